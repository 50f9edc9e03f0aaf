"""The catalogue's entries built into signatures, and refused when they cannot be read one way.

Each TOML file holds ``[[signature]]`` entries (read by sources.py, or from the compiled file); an entry with a field nobody reads, a condition that
cannot be evaluated or two claim levels at once is refused with the file and id named, and the
whole set is refused when an id repeats, a ``refines`` names no signature or goes round in a
circle, or two signatures declare one rule: precedence must come from declared fields alone.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Protocol

from ncclcheck.catalogue.facts import CONDITION
from ncclcheck.catalogue.knowledge_index import NAMED as QUOTABLE  # the enumerations' tables
from ncclcheck.catalogue.signature import Signature
from ncclcheck.model import Category

_FIELDS = frozenset({"id", "category", "title", "meaning", "fix", "patterns", "example",
                     "consequence", "warning", "report", "aftermath", "broad", "last_resort", "generic", "quotes", "refines",
                     "priority", "requires", "settings", "inferred", "explains", "rule"})


class Folder(Protocol):
    """What is read of a folder: a pathlib.Path and an importlib Traversable both are one."""

    def iterdir(self) -> Iterable[Any]: ...


def build_files(entries: Mapping[str, Iterable[dict[str, Any]]]
                ) -> dict[str, tuple[Signature, ...]]:
    """The signatures of each file's entries (file name without .toml -> its entries)."""
    return {name: tuple(build(entry, f"{name}.toml") for entry in found)
            for name, found in entries.items()}


def build(entry: dict[str, Any], source: str) -> Signature:
    """One ``[[signature]]`` entry of the file ``source`` as a Signature."""
    sig_id = entry.get("id", "?")
    unknown = set(entry) - _FIELDS
    if unknown:
        raise ValueError(f"{source}: {sig_id}: unknown field(s) {', '.join(sorted(unknown))}")
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
        patterns=tuple(entry["patterns"]),
        example=entry["example"],
        consequence=bool(entry.get("consequence", False)),
        warning=bool(entry.get("warning", False)),
        report=bool(entry.get("report", False)),
        aftermath=bool(entry.get("aftermath", False)),
        broad=bool(entry.get("broad", False)),
        last_resort=bool(entry.get("last_resort", False)),
        generic=bool(entry.get("generic", False)),
        quotes=str(entry.get("quotes", "")),
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
    if sig.quotes and sig.quotes not in QUOTABLE:
        raise ValueError(f"{source}: {sig_id}: quotes names no enumeration table "
                         f"({', '.join(QUOTABLE)}): {sig.quotes!r}")
    if sig.rule and not sig.inferred:
        raise ValueError(f"{source}: {sig_id}: only an inferred signature is named by a rule")
    return sig


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
