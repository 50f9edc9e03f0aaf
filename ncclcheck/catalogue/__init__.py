"""The failure catalogue: every known failure signature, loaded from ``signatures/*.toml``.

One signature is one failure with one text. The log explainer (ncclcheck.explain) matches its
patterns against log lines; probes call ``catalogue_fix(id, here)`` or
``load().signature(id).render(facts)`` so a problem found before a run reads the same as the
same problem found in a failed run's log.

This package is a leaf: plain data and the reading of it, importing nothing of ncclcheck but the
taxonomy (ncclcheck.model) and NCCL's version codes. How explain finds the lines worth matching
(prefilter literals derived from the patterns, indexes, files in the user's cache folder) stays
in explain, so a preflight that only wants a fix text loads none of it and writes nothing.

The catalogue is one TOML file per family (NCCL's setup, network and devices; torch; CUDA and
the host; launchers; frameworks; Python). Neither the file an entry sits in nor its place there
decides anything: which signature claims a line that several match, and which finding becomes
the root cause, come from declared fields only (``claim_level``, ``refines``, ``priority``;
see signature.py), so the entries can be moved or reordered freely.

``load()`` is the shipped catalogue, read once per process from the file generated from its
TOML files (compiled.py: no TOML is parsed at start-up while that file is current);
``load(folder)`` reads another folder's TOML afresh at each call, so a test hands its own
Catalogue to whoever needs one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from ncclcheck.catalogue.compiled import FOLDER, SIGNATURES_DIR, read_compiled
from ncclcheck.catalogue.parse import Folder, build_files, check, refined_by_closure
from ncclcheck.catalogue.signature import (BROAD, LAST_RESORT, SPECIFIC, Signature,
                                           UnknownSignature)

__all__ = ["BROAD", "LAST_RESORT", "SPECIFIC", "Catalogue", "Signature", "UnknownSignature",
           "catalogue_fix", "load", "shipped_folder"]


@dataclass(frozen=True, eq=False)
class Catalogue:
    """A read, checked set of signatures; immutable. Two loads are two catalogues (compared by
    identity), so whoever prepares a catalogue for some use can keep that per object."""

    signatures: tuple[Signature, ...]          # all, file by file in name order
    files: Mapping[str, tuple[str, ...]]       # file name without .toml -> the ids it holds
    line_signatures: tuple[Signature, ...] = field(init=False, repr=False)
    inferred_signatures: tuple[Signature, ...] = field(init=False, repr=False)
    _by_id: Mapping[str, Signature] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        check(self.signatures)
        set_ = object.__setattr__  # frozen: the derived views are filled in once, here
        set_(self, "files", MappingProxyType(dict(self.files)))
        set_(self, "line_signatures", tuple(s for s in self.signatures if not s.inferred))
        set_(self, "inferred_signatures", tuple(s for s in self.signatures if s.inferred))
        set_(self, "_by_id", MappingProxyType({s.id: s for s in self.signatures}))

    @property
    def by_id(self) -> Mapping[str, Signature]:
        """Every signature by id (read-only)."""
        return self._by_id

    def signature(self, id: str) -> Signature:
        """The signature with this id; raises UnknownSignature for an id not in the catalogue."""
        try:
            return self._by_id[id]
        except KeyError:
            raise UnknownSignature(id) from None

    def by_rule(self, rule: str) -> Signature:
        """The inferred signature that explain's rule ``rule`` names (the catalogue declares
        it); UnknownSignature when none does."""
        for sig in self.inferred_signatures:
            if sig.rule == rule:
                return sig
        raise UnknownSignature(f"no signature declares rule = {rule!r}")

    def refined_by_closure(self, sig_id: str) -> frozenset[str]:
        """Every id that ``sig_id`` refines, directly or through the ones it refines."""
        return refined_by_closure(sig_id, self._by_id)

    def fix(self, signature_id: str, here: str = "",
            facts: Mapping[str, Any] | None = None) -> str:
        """The fix for ``signature_id`` with ``facts`` filled in, followed by ``here`` (this
        host's specifics); an id the catalogue lacks raises ``UnknownSignature``."""
        text = self.signature(signature_id).render(dict(facts or {}))[1].strip()
        return f"{text} {here}".strip() if here else text


def shipped_folder() -> Folder:
    """Where the shipped catalogue's files are (inside the package)."""
    return FOLDER / SIGNATURES_DIR


def load(folder: Folder | str | None = None) -> Catalogue:
    """The catalogue in ``folder`` (its ``*.toml`` files), read and checked at each call; with
    no folder, the shipped one, read once per process."""
    if folder is None:
        return _shipped()
    return _read(Path(folder) if isinstance(folder, str) else folder)


@lru_cache(maxsize=1)
def _shipped() -> Catalogue:
    found = read_compiled()
    if found is None:  # a source edited since the compiled file was made: its TOML is read
        return _read(shipped_folder())
    return _built(found["signatures"])


def _read(folder: Folder) -> Catalogue:
    # deferred: the TOML parser, only for another folder than the shipped one (or a stale file)
    from ncclcheck.catalogue.sources import signature_entries
    return _built(signature_entries(folder))


def _built(entries: Mapping[str, Any]) -> Catalogue:
    by_file = build_files(entries)
    return Catalogue(tuple(sig for sigs in by_file.values() for sig in sigs),
                     {name: tuple(sig.id for sig in sigs) for name, sigs in by_file.items()})


def catalogue_fix(signature_id: str, here: str = "",
                  facts: Mapping[str, Any] | None = None) -> str:
    """For probes: the shipped catalogue's fix for ``signature_id`` followed by ``here`` (this
    host's specifics), so a problem found before a run reads the same as in a failed run's log.
    The catalogue is the only copy of the text: an id it lacks raises ``UnknownSignature``."""
    return load().fix(signature_id, here, facts)
