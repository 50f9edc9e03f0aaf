"""Known problems of the libraries a job loads, read from ``known_issues.toml``.

A release can be fine in general and wrong for one job: NCCL's RAS crashed some 2.24-2.27
releases until disabled, NVIDIA's resiliency extension asks to avoid NCCL 2.28.3-2.28.8 with
its in-process restart. The preflight knows the versions a job loads, so it can say so before
the job: ``nccl.known_issues`` judges every entry against what it read, and explain adds a note
when a log names an affected version. Both read this one table, which carries for every entry
its versions, symptom, the conditions it needs (``when``), the first fixed release and the
sources that say so; docs/known-issues.md is generated from it.

Pure: versions and conditions are compared with facts handed in (``Scene``), nothing is read
from the host here. A leaf like the rest of the catalogue: it imports nothing of ncclcheck but
the catalogue's compiled copy of its TOML (compiled.py), read at start instead of the TOML.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping

from ncclcheck.catalogue.compiled import FOLDER, read_compiled

TABLE = "known_issues.toml"
LIBRARIES = ("nccl", "torch", "aws-ofi-nccl", "driver")
CONDITIONS = ("ras", "inprocess_restart", "infiniband", "arch", "gpu", "setting", "plugin",
              "nccl")
_NUMBERS = re.compile(r"\d+(?:\.\d+)*")
_COMPARISON = re.compile(r"^\s*(>=|<=|==|>|<)\s*v?(\d+(?:\.\d+)*)\s*$")

Version = tuple[int, ...]


def version_of(text: object) -> Version | None:
    """The leading dotted numbers of a version label: "2.28.3-1" -> (2, 28, 3), "1.9.1-aws"
    -> (1, 9, 1), "535.104.05" -> (535, 104, 5); None when there are none."""
    if isinstance(text, tuple):
        return tuple(int(x) for x in text) or None
    found = _NUMBERS.search(str(text)) if text is not None else None
    return tuple(int(x) for x in found.group(0).split(".")) if found else None


def _cmp(a: Version, b: Version) -> int:
    width = max(len(a), len(b))
    a, b = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
    return (a > b) - (a < b)


@dataclass(frozen=True)
class VersionRange:
    """Comparisons that must all hold ("">=2.24.3,<2.27.3""); ``text`` as written."""

    text: str
    bounds: tuple[tuple[str, Version], ...]

    @classmethod
    def parse(cls, text: str) -> "VersionRange":
        bounds = []
        for part in text.split(","):
            match = _COMPARISON.match(part)
            if not match:
                raise ValueError(f"{TABLE}: {text!r} is not a version range (e.g. >=2.24.3,<2.27.3)")
            bounds.append((match.group(1), tuple(int(x) for x in match.group(2).split("."))))
        return cls(text, tuple(bounds))

    def __contains__(self, version: Version) -> bool:
        ops = {">=": lambda c: c >= 0, "<=": lambda c: c <= 0, "==": lambda c: c == 0,
               ">": lambda c: c > 0, "<": lambda c: c < 0}
        return all(ops[op](_cmp(version, bound)) for op, bound in self.bounds)


@dataclass(frozen=True)
class Condition:
    """One condition of ``when``: its kind and argument ("gpu", ("H100", "H800"))."""

    kind: str
    args: tuple[str, ...] = ()
    text: str = ""

    @classmethod
    def parse(cls, text: str) -> "Condition":
        kind, _, arg = text.partition(":")
        if kind not in CONDITIONS:
            raise ValueError(f"{TABLE}: unknown condition {text!r} (one of {', '.join(CONDITIONS)})")
        args = tuple(a.strip() for a in arg.split(",") if a.strip()) if kind != "nccl" else (arg,)
        if kind in ("arch", "gpu", "setting", "plugin", "nccl") and not any(args):
            raise ValueError(f"{TABLE}: condition {text!r} needs an argument")
        if kind == "nccl":
            VersionRange.parse(arg)
        return cls(kind, args, text)

    @property
    def label(self) -> str:
        """How a person reads it: "only with RAS on", "only on H100, H800 GPUs"."""
        words = {"ras": "only with NCCL's RAS on (the default since 2.24)",
                 "inprocess_restart": "only with NVIDIA Resiliency Extension's in-process restart",
                 "infiniband": "only over InfiniBand / RoCE"}
        if self.kind in words:
            return words[self.kind]
        arg = ", ".join(self.args)
        return {"arch": f"only on {arg} hosts", "gpu": f"only on {arg} GPUs",
                "setting": f"only with {' or '.join(self.args)} set",
                "plugin": f"only with the {arg} net plugin",
                "nccl": f"only with NCCL {arg}"}[self.kind]


@dataclass(frozen=True)
class KnownIssue:
    """One entry of the table (see known_issues.toml for the fields)."""

    id: str
    library: str
    affected: tuple[VersionRange, ...]
    title: str
    symptom: str
    fix: str
    sources: tuple[str, ...]
    when: tuple[Condition, ...] = ()
    fixed: str | None = None

    @property
    def affected_text(self) -> str:
        return " or ".join(r.text for r in self.affected)

    def affects(self, version: Version | None) -> bool:
        return version is not None and any(version in r for r in self.affected)

    @property
    def scope(self) -> str:
        return "; ".join(c.label for c in self.when) or "always"


@dataclass(frozen=True)
class Rename:
    """A setting a release reads under a new name; ``since`` is that release."""

    library: str
    old: str
    new: str
    since: Version
    sources: tuple[str, ...]

    @property
    def since_text(self) -> str:
        return ".".join(str(x) for x in self.since)


@dataclass(frozen=True)
class KnownIssues:
    issues: tuple[KnownIssue, ...]
    renames: tuple[Rename, ...]

    def for_library(self, library: str) -> list[KnownIssue]:
        return [i for i in self.issues if i.library == library]


@dataclass(frozen=True)
class Scene:
    """What one host loads and runs, as the probe read it; None where it could not tell.
    ``versions``: library -> version (LIBRARIES)."""

    versions: Mapping[str, Version | None] = field(default_factory=dict)
    settings: Mapping[str, str] = field(default_factory=dict)
    ras: bool | None = None
    inprocess_restart: bool | None = None
    infiniband: bool | None = None
    arch: str | None = None
    gpus: tuple[str, ...] | None = None
    plugins: tuple[str, ...] | None = None


def holds(condition: Condition, scene: Scene) -> bool | None:
    """Whether ``condition`` holds on ``scene``; None when the scene cannot tell."""
    kind, args = condition.kind, condition.args
    if kind in ("ras", "inprocess_restart", "infiniband"):
        return getattr(scene, kind)
    if kind == "setting":
        return any(name in scene.settings for name in args)
    if kind == "nccl":
        version = scene.versions.get("nccl")
        return None if version is None else version in VersionRange.parse(args[0])
    if kind == "arch":
        return None if scene.arch is None else scene.arch in args
    names = scene.gpus if kind == "gpu" else scene.plugins
    if names is None:
        return None
    return any(arg.lower() in name.lower() for arg in args for name in names)


def applies(issue: KnownIssue, scene: Scene) -> bool | None:
    """True when the loaded version is affected and every condition holds; False when the
    version is not affected or a condition fails; None when a condition cannot be told."""
    if not issue.affects(scene.versions.get(issue.library)):
        return False
    results = [holds(c, scene) for c in issue.when]
    if any(r is False for r in results):
        return False
    return None if any(r is None for r in results) else True


def _issue(raw: Mapping[str, Any]) -> KnownIssue:
    missing = {"id", "library", "affected", "title", "symptom", "fix", "sources"} - set(raw)
    if missing:
        raise ValueError(f"{TABLE}: {raw.get('id', '?')} lacks {', '.join(sorted(missing))}")
    if raw["library"] not in LIBRARIES:
        raise ValueError(f"{TABLE}: {raw['id']}: library {raw['library']!r} is not one of "
                         f"{', '.join(LIBRARIES)}")
    affected = raw["affected"] if isinstance(raw["affected"], list) else [raw["affected"]]
    sources = tuple(raw["sources"])
    if not sources or not all(s.startswith("https://") for s in sources):
        raise ValueError(f"{TABLE}: {raw['id']}: every source must be a https:// link")
    return KnownIssue(raw["id"], raw["library"], tuple(VersionRange.parse(a) for a in affected),
                      raw["title"], raw["symptom"], raw["fix"], sources,
                      tuple(Condition.parse(c) for c in raw.get("when", [])), raw.get("fixed"))


def _rename(raw: Mapping[str, Any]) -> Rename:
    since = version_of(raw["since"])
    if since is None or raw["library"] not in ("nccl", "torch") or not raw.get("sources"):
        raise ValueError(f"{TABLE}: rename {raw.get('old')!r} needs a library (nccl or torch), "
                         "a since release and sources")
    return Rename(raw["library"], raw["old"], raw["new"], since, tuple(raw["sources"]))


def parse(text: str) -> KnownIssues:
    """The table in ``text`` (TOML), checked: ids unique, ranges and conditions well formed."""
    from ncclcheck.catalogue.sources import read_toml  # deferred: the TOML parser, not at start
    return from_table(read_toml(text))


def from_table(data: Mapping[str, Any]) -> KnownIssues:
    """The table as parsed (TOML's, or the compiled file's copy), checked as ``parse`` does."""
    issues = tuple(_issue(raw) for raw in data.get("issue", []))
    ids = [i.id for i in issues]
    if len(ids) != len(set(ids)):
        raise ValueError(f"{TABLE}: duplicate ids")
    return KnownIssues(issues, tuple(_rename(raw) for raw in data.get("rename", [])))


@lru_cache(maxsize=1)
def load() -> KnownIssues:
    """The shipped table, read once per process (from the compiled file while it is current)."""
    found = read_compiled()
    if found is not None:
        return from_table(found["known_issues"])
    return parse((FOLDER / TABLE).read_text("utf-8"))
