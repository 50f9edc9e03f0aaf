"""Where the probes took the catalogue's fix texts from, until they import ncclcheck.catalogue
themselves; explain's own modules use ncclcheck.catalogue."""

from __future__ import annotations

from ncclcheck.catalogue import Signature, catalogue_fix, load

__all__ = ["catalogue_fix", "signature"]


def signature(id: str) -> Signature:
    """The shipped catalogue's signature with this id."""
    return load().signature(id)
