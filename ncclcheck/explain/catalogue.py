"""The failure catalogue: every known failure signature, loaded from ``signatures/*.toml``.

One signature is one failure with one text. The log explainer matches its patterns against log
lines; probes call ``signature(id).render(facts)`` so a problem found before a run reads the
same as the same problem found in a failed run's log.

The catalogue is one TOML file per family (NCCL's setup, network and devices; torch; CUDA and
the host; launchers; frameworks; Python). Neither the file an entry sits in nor its place there
decides anything: which signature claims a line that several match, and which finding becomes
the root cause, come from declared fields only (``claim_level``, ``refines``, ``priority``;
see matcher.py and findings.py), so the entries can be moved or reordered freely.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import resources
from typing import Any, Iterable, Mapping

from ncclcheck.explain.facts import CONDITION, counts, derived_facts, fill, holds, typed
from ncclcheck.explain.literal_cache import literal_table
from ncclcheck.explain.literals import Literals, NoLiteral, required_literals
from ncclcheck.explain.prefilter import Literal
from ncclcheck.model import Category

if sys.version_info >= (3, 11):
    import tomllib
    from importlib.resources.abc import Traversable
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib
    from importlib.abc import Traversable

CATALOGUE_DIR = "signatures"  # under ncclcheck/explain/: one *.toml file per family
# How a signature claims a line that several signatures match (see ``claim_level``).
SPECIFIC, BROAD, LAST_RESORT = 0, 1, 2

_FIELDS = frozenset({"id", "category", "title", "meaning", "fix", "patterns", "example",
                     "consequence", "warning", "broad", "last_resort", "generic", "refines",
                     "priority", "requires", "settings", "inferred", "explains", "rule"})


class UnknownSignature(KeyError):
    """Asked for a signature id the catalogue does not have."""


@dataclass(frozen=True)
class Signature:
    """One known failure: how to recognise it in a log, what it means and how to fix it.

    Which signature claims a line that several match (matcher.py): ``claim_level`` first
    (specific, then ``broad`` patterns that read a message in any context, then the
    ``last_resort`` ones that read any exception line), then ``refines`` (this signature reads
    a more specific case of those signatures' lines, so they give way to it), then
    ``priority``. Which finding is the root cause (findings.py): primary failures before
    ``consequence`` (usually follows another failure: a peer closing its socket because it
    crashed, a timeout after a rank died) before ``warning`` (the library carries on), then
    time, then ``priority`` (0-100). ``generic`` marks NCCL's generic results (system error,
    internal error, remote error), which say that something failed, not what: a cause read
    from the context (infer.py) or a specific failure elsewhere in the log explains them.
    ``settings`` names facts taken from ``NCCL_X set by environment to V`` lines of the same
    log when the matched line does not carry them. ``inferred`` signatures are never matched
    line by line: their patterns read a context line (a setting, a launch command, an INFO
    line) that names the likely cause when NCCL gave only a generic error, or, for the root
    causes listed in ``explains``, when that failure is only the symptom (``"generic"`` in
    that list stands for NCCL's generic errors); an inferred signature with a ``rule`` is
    named by that rule of infer.py (a fact across several lines), not by one line.
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
    last_resort: bool = False
    generic: bool = False
    refines: tuple[str, ...] = ()
    priority: int = 50
    requires: tuple[str, ...] = ()
    settings: tuple[tuple[str, str], ...] = ()
    inferred: bool = False
    explains: tuple[str, ...] = ()
    rule: str = ""

    @property
    def claim_level(self) -> int:
        """SPECIFIC, BROAD or LAST_RESORT: the tier in which it competes for a line."""
        return LAST_RESORT if self.last_resort else BROAD if self.broad else SPECIFIC

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
                facts = {k: typed(v) for k, v in found.groupdict().items() if v is not None}
                facts.update(counts(facts))
                checked = {**(known or {}), **facts}
                if all(holds(condition, checked) for condition in self.requires):
                    return facts
        return None

    def render(self, facts: Mapping[str, Any] | None = None) -> tuple[str, str]:
        """(explanation, fix) with the facts filled in; unknown facts drop their optional part."""
        full = derived_facts(facts or {})
        return fill(self.meaning, full), fill(self.fix, full)


def _literals(sig_id: str, patterns: list[str],
              table: Mapping[str, Literals]) -> tuple[Literal, ...]:
    """The prefilter literals of a signature, derived from its patterns (see literals.py;
    ``table`` holds those already derived, literal_cache.py)."""
    out: list[Literal] = []
    for pattern in patterns:
        found = table.get(pattern)
        if found is None:
            try:
                found = required_literals(pattern)
            except NoLiteral as exc:
                raise ValueError(f"{sig_id}: {exc}") from None
        out += [Literal(text, found.caseless) for text in sorted(found.strings)]
    return tuple(dict.fromkeys(out))


def _build(entry: dict[str, Any], source: str, table: Mapping[str, Literals]) -> Signature:
    sig_id = entry.get("id", "?")
    unknown = set(entry) - _FIELDS
    if unknown:
        raise ValueError(f"{source}: {sig_id}: unknown field(s) {', '.join(sorted(unknown))}")
    patterns = list(entry["patterns"])
    for condition in entry.get("requires", ()):
        if not CONDITION.match(condition):
            raise ValueError(f"{source}: {sig_id}: unreadable condition {condition!r}")
    refines = entry.get("refines", ())
    if isinstance(refines, str):
        refines = (refines,)
    sig = Signature(
        id=sig_id,
        category=Category(entry["category"]),
        title=entry["title"],
        meaning=entry["meaning"].strip(),
        fix=entry["fix"].strip(),
        patterns=tuple(patterns),
        literals=_literals(sig_id, patterns, table),
        example=entry["example"],
        consequence=bool(entry.get("consequence", False)),
        warning=bool(entry.get("warning", False)),
        broad=bool(entry.get("broad", False)),
        last_resort=bool(entry.get("last_resort", False)),
        generic=bool(entry.get("generic", False)),
        refines=tuple(refines),
        priority=int(entry.get("priority", 50)),
        requires=tuple(entry.get("requires", ())),
        settings=tuple(sorted(entry.get("settings", {}).items())),
        inferred=bool(entry.get("inferred", False)),
        explains=tuple(entry.get("explains", ())),
        rule=str(entry.get("rule", "")),
    )
    if sig.broad and sig.last_resort:
        raise ValueError(f"{source}: {sig_id}: broad and last_resort are two different levels")
    if sig.rule and not sig.inferred:
        raise ValueError(f"{source}: {sig_id}: only an inferred signature is named by a rule")
    return sig


@lru_cache(maxsize=1)
def files() -> dict[str, tuple[str, ...]]:
    """The catalogue's files (name without .toml, in name order) and the ids each holds."""
    return {name: tuple(sig.id for sig in sigs) for name, sigs in _by_file().items()}


def folder() -> Traversable:
    """Where the catalogue's files are (inside the package)."""
    return resources.files("ncclcheck.explain").joinpath(CATALOGUE_DIR)


@lru_cache(maxsize=1)
def _by_file() -> dict[str, tuple[Signature, ...]]:
    parsed = {item.name: tomllib.loads(item.read_text("utf-8")).get("signature", [])
              for item in sorted(folder().iterdir(), key=lambda f: f.name)
              if item.name.endswith(".toml")}
    patterns = [p for entries in parsed.values() for entry in entries
                for p in entry.get("patterns", ()) if isinstance(p, str)]
    try:
        table = literal_table(patterns)
    except NoLiteral:
        table = {}  # _build names the signature whose pattern has no literal
    return {name[:-5]: tuple(_build(entry, name, table) for entry in entries)
            for name, entries in parsed.items()}


@lru_cache(maxsize=1)
def load() -> tuple[Signature, ...]:
    """All signatures (parsed once per process), file by file in name order; that order is
    only for listings: nothing decides by it (see the module's docstring)."""
    signatures = tuple(sig for sigs in _by_file().values() for sig in sigs)
    check(signatures)
    return signatures


def check(signatures: Iterable[Signature]) -> None:
    """Refuse a catalogue that cannot be read one way only: a repeated id, a ``refines`` that
    names no signature or goes round in a circle, a rule named twice."""
    by_id: dict[str, Signature] = {}
    rules: dict[str, str] = {}
    for sig in signatures:
        if sig.id in by_id:
            raise ValueError(f"duplicate signature id in catalogue: {sig.id}")
        by_id[sig.id] = sig
        if sig.rule:
            if sig.rule in rules:
                raise ValueError(f"rule {sig.rule!r} names both {rules[sig.rule]} and {sig.id}")
            rules[sig.rule] = sig.id
    for sig in by_id.values():
        for other in sig.refines:
            if other not in by_id:
                raise ValueError(f"{sig.id} refines {other!r}, which the catalogue does not have")
    for sig in by_id.values():
        if sig.id in refined_by_closure(sig.id, by_id):
            raise ValueError(f"{sig.id} refines itself through 'refines'")


def refined_by_closure(sig_id: str, by_id: Mapping[str, Signature]) -> frozenset[str]:
    """Every id that ``sig_id`` refines, directly or through the ones it refines."""
    seen: set[str] = set()
    todo = list(by_id[sig_id].refines) if sig_id in by_id else []
    while todo:
        other = todo.pop()
        if other not in seen:
            seen.add(other)
            todo.extend(by_id[other].refines if other in by_id else ())
    return frozenset(seen)


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


def by_rule(rule: str) -> Signature:
    """The inferred signature that infer.py's rule ``rule`` names (the catalogue declares it)."""
    for sig in inferred_signatures():
        if sig.rule == rule:
            return sig
    raise UnknownSignature(f"no signature declares rule = {rule!r}")


def catalogue_fix(signature_id: str, here: str = "",
                  facts: Mapping[str, Any] | None = None) -> str:
    """For probes: the catalogue's fix for ``signature_id`` followed by ``here`` (this host's
    specifics), so a problem found before a run reads the same as in a failed run's log. The
    catalogue is the only copy of the text: an id it lacks raises ``UnknownSignature``."""
    text = signature(signature_id).render(dict(facts or {}))[1].strip()
    return f"{text} {here}".strip() if here else text
