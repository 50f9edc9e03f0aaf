"""The failure catalogue: every known failure signature, loaded from ``catalogue.toml``.

One signature is one failure with one text. The log explainer matches its patterns against log
lines; probes call ``signature(id).render(facts)`` so a problem found before a run reads the
same as the same problem found in a failed run's log.
"""

from __future__ import annotations

import re
import signal as _signal
import string
import sys
from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import resources
from typing import Any, Mapping

from ncclcheck.explain.literals import NoLiteral, required_literals
from ncclcheck.explain.prefilter import Literal
from ncclcheck.model import Category

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

CATALOGUE_FILE = "catalogue.toml"
# Signatures that claim a line only when no other does, in this order: their patterns match
# any exception line of a kind (one about the job's ranks or devices, then any at all).
LAST_RESORT = ("python.exception_about_ranks", "python.uncaught_exception")
CATCH_ALL = LAST_RESORT[-1]

# Text between [[ and ]] is dropped when a fact it names is unknown, so one text reads well
# with or without the facts of a particular line.
_OPTIONAL = re.compile(r"\[\[(.*?)\]\]", re.S)
_FORMATTER = string.Formatter()


class UnknownSignature(KeyError):
    """Asked for a signature id the catalogue does not have."""


@dataclass(frozen=True)
class Signature:
    """One known failure: how to recognise it in a log, what it means and how to fix it.

    ``consequence`` marks failures that usually follow another one (a peer closing its socket
    because it crashed, a timeout after a rank died); they are never chosen as the root cause
    while a primary failure is in view; ``warning`` marks messages after which the library
    carries on; ``broad`` marks patterns that read a message in any context and so claim a
    line only when no other signature does. ``settings`` names facts taken from ``NCCL_X set
    by environment to V`` lines of the same log when the matched line does not carry them. ``priority`` (0-100) orders
    primary failures when log lines carry no comparable timestamps. ``inferred`` signatures
    are never matched line by line: their patterns read a context line (a setting, a launch
    command, an INFO line) that names the likely cause when NCCL gave only a generic error,
    or, for the root causes listed in ``explains``, when that failure is only the symptom
    (``"generic"`` in that list stands for NCCL's generic errors).
    """

    id: str
    category: Category
    title: str
    meaning: str
    fix: str
    patterns: tuple[str, ...]
    literals: tuple[Literal, ...]
    example: str
    consequence: bool = False
    warning: bool = False
    broad: bool = False
    priority: int = 50
    requires: tuple[str, ...] = ()
    settings: tuple[tuple[str, str], ...] = ()
    inferred: bool = False
    explains: tuple[str, ...] = ()

    @cached_property
    def compiled(self) -> tuple[re.Pattern[str], ...]:
        """The patterns, compiled when first needed: a log asks for the few signatures whose
        literals it holds, so start-up does not pay for all of them."""
        return tuple(re.compile(p) for p in self.patterns)

    @property
    def explanation(self) -> str:
        """The meaning text (alias used by probes)."""
        return self.meaning

    def match(self, line: str, known: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        """Facts captured from ``line`` when one of the patterns matches it, else None.
        ``known`` facts (an inferred cause's failing line) take part in ``requires``."""
        for pattern in self.compiled:
            found = pattern.search(line)
            if found:
                facts = {k: _typed(v) for k, v in found.groupdict().items() if v is not None}
                facts.update(_counts(facts))
                checked = {**(known or {}), **facts}
                if all(_holds(condition, checked) for condition in self.requires):
                    return facts
        return None

    def render(self, facts: Mapping[str, Any] | None = None) -> tuple[str, str]:
        """(explanation, fix) with the facts filled in; unknown facts drop their optional part."""
        full = derived_facts(facts or {})
        return _fill(self.meaning, full), _fill(self.fix, full)


def _counts(facts: Mapping[str, Any]) -> dict[str, int]:
    """``x_count`` for every fact ``x_list`` (a comma-separated list such as 0,1,3)."""
    return {name[:-5] + "_count": len(str(value).split(","))
            for name, value in facts.items() if name.endswith("_list")}


def derived_facts(facts: Mapping[str, Any]) -> dict[str, Any]:
    """Facts plus what follows from them (a signal's name, a PCI bus id, a version string)."""
    out = dict(facts)
    if isinstance(out.get("rank"), int) and "needed_world_size" not in out:
        out["needed_world_size"] = out["rank"] + 1
    sig = out.get("signal")
    if isinstance(sig, int) and "signal_name" not in out:
        out["signal_name"] = _signal_name(sig)
    exitcode = out.get("exitcode")
    if isinstance(exitcode, int) and exitcode < 0 and "signal_name" not in out:
        out["signal"] = -exitcode
        out["signal_name"] = _signal_name(-exitcode)
    if isinstance(exitcode, int) and exitcode > 128 and "signal_name" not in out:
        out["signal_name"] = _signal_name(exitcode - 128)
    busid = out.get("busid")
    if busid is not None and "pci_bus_id" not in out:
        out["pci_bus_id"] = pci_bus_id(str(busid))
    for key in ("version1", "version2"):
        code = out.get(key)
        if isinstance(code, int) and f"{key}_text" not in out:
            out[f"{key}_text"] = nccl_version_text(code)
    return out


def nccl_version_text(code: int) -> str:
    """NCCL's integer version code as x.y.z (2.8.4 is 2804, 2.9.6 is 20906)."""
    if code < 2900:
        return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"
    return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"


def pci_bus_id(hex_text: str) -> str:
    """NCCL prints a GPU's PCI bus id as one hex integer (``1b000``); show it as 0000:1b:00.0."""
    digits = hex_text.lower().removeprefix("0x").rjust(9, "0")
    return f"{digits[:-5][-4:].rjust(4, '0')}:{digits[-5:-3]}:{digits[-3:-1]}.{digits[-1]}"


def _signal_name(number: int) -> str:
    try:
        return _signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


_CONDITION = re.compile(r"^\s*(\w+)\s*(<=|>=|==|!=|<|>)\s*(\w+)\s*$")
_COMPARE = {
    "<": lambda a, b: a < b, ">": lambda a, b: a > b, "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
}


def _holds(condition: str, facts: Mapping[str, Any]) -> bool:
    """A ``requires`` condition such as ``member > world_size`` on integer facts, or
    ``host != master_addr`` on two text facts (compared without regard to case)."""
    left, op, right = _CONDITION.match(condition).groups()  # type: ignore[union-attr]
    values = [facts.get(t) if not t.lstrip("-").isdigit() else int(t) for t in (left, right)]
    if op in ("==", "!=") and all(isinstance(v, str) for v in values):
        return _COMPARE[op](values[0].casefold(), values[1].casefold())
    if not all(isinstance(v, int) for v in values):
        return False
    return _COMPARE[op](values[0], values[1])


def _typed(value: str) -> Any:
    return int(value) if re.fullmatch(r"-?\d{1,18}", value) else value


def _fill(template: str, facts: Mapping[str, Any]) -> str:
    def optional(part: re.Match[str]) -> str:
        names = [name for _, name, _, _ in _FORMATTER.parse(part.group(1)) if name]
        return part.group(1) if all(n in facts for n in names) else ""

    text = _OPTIONAL.sub(optional, template)
    try:
        return text.format_map(_Missing(facts))
    except (ValueError, IndexError):
        return text


class _Missing(dict):
    def __missing__(self, key: str) -> str:
        return f"<{key}>"


def _literals(sig_id: str, patterns: list[str]) -> tuple[Literal, ...]:
    """The prefilter literals of a signature, derived from its patterns (see literals.py)."""
    out: list[Literal] = []
    for pattern in patterns:
        try:
            found = required_literals(pattern)
        except NoLiteral as exc:
            raise ValueError(f"{sig_id}: {exc}") from None
        out += [Literal(text, found.caseless) for text in sorted(found.strings)]
    return tuple(dict.fromkeys(out))


def _build(entry: dict[str, Any]) -> Signature:
    patterns = list(entry["patterns"])
    for condition in entry.get("requires", ()):
        if not _CONDITION.match(condition):
            raise ValueError(f"{entry['id']}: unreadable condition {condition!r}")
    return Signature(
        id=entry["id"],
        category=Category(entry["category"]),
        title=entry["title"],
        meaning=entry["meaning"].strip(),
        fix=entry["fix"].strip(),
        patterns=tuple(patterns),
        literals=_literals(entry["id"], patterns),
        example=entry["example"],
        consequence=bool(entry.get("consequence", False)),
        warning=bool(entry.get("warning", False)),
        broad=bool(entry.get("broad", False)),
        priority=int(entry.get("priority", 50)),
        requires=tuple(entry.get("requires", ())),
        settings=tuple(sorted(entry.get("settings", {}).items())),
        inferred=bool(entry.get("inferred", False)),
        explains=tuple(entry.get("explains", ())),
    )


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    text = resources.files("ncclcheck.explain").joinpath(CATALOGUE_FILE).read_text("utf-8")
    return tomllib.loads(text)


@lru_cache(maxsize=1)
def load() -> tuple[Signature, ...]:
    """All signatures, in catalogue order (parsed once per process)."""
    data = _data()
    signatures = tuple(_build(entry) for entry in data["signature"])
    seen: set[str] = set()
    for sig in signatures:
        if sig.id in seen:
            raise ValueError(f"duplicate signature id in catalogue: {sig.id}")
        seen.add(sig.id)
    return signatures


@lru_cache(maxsize=1)
def _by_id() -> dict[str, Signature]:
    return {sig.id: sig for sig in load()}


def signature(id: str) -> Signature:
    """The signature with this id; raises UnknownSignature for an id not in the catalogue."""
    try:
        return _by_id()[id]
    except KeyError:
        raise UnknownSignature(id) from None


def all_signatures() -> tuple[Signature, ...]:
    return load()


@lru_cache(maxsize=1)
def line_signatures() -> tuple[Signature, ...]:
    """The signatures matched against log lines (all but the inferred ones)."""
    return tuple(sig for sig in load() if not sig.inferred)


@lru_cache(maxsize=1)
def inferred_signatures() -> tuple[Signature, ...]:
    """The signatures only named from context when NCCL gave a generic error."""
    return tuple(sig for sig in load() if sig.inferred)


def catalogue_fix(signature_id: str, here: str = "",
                  facts: Mapping[str, Any] | None = None) -> str:
    """For probes: the catalogue's fix for ``signature_id`` followed by ``here`` (this host's
    specifics), so a problem found before a run reads the same as in a failed run's log. The
    catalogue is the only copy of the text: an id it lacks raises ``UnknownSignature``."""
    text = signature(signature_id).render(dict(facts or {}))[1].strip()
    return f"{text} {here}".strip() if here else text
