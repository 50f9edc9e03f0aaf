"""The NCCL parameter names the loaded libnccl itself reads, taken from its read-only strings.

NCCL_PARAM("X", ...) and DEFINE_NCCL_PARAM(..., NCCL_X, ...) both leave the whole name
"NCCL_X" as one NUL-terminated string in .rodata, next to the getenv("NCCL_X") literals, so the
library knows its own vocabulary better than any table (as ``plugins`` reads the plugin API
versions it asks for). The shipped table (``known_names``) is the fallback only when no
library can be read; ``NameSource`` says which of the two a verdict used.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ncclcheck.ncclib import known_names
from ncclcheck.ncclib.elf import ElfError, ElfFile

# A whole string: NUL before and after, so "NCCL_X set by environment to %d" never counts.
_NAME = re.compile(rb"(?<=\0)(NCCL_[A-Z0-9_]+)\0")


@dataclass(frozen=True)
class NameSource:
    """The NCCL_* names one linter run accepts, and where they came from."""

    nccl_names: frozenset[str]
    library: str | None = None   # the libnccl they were read from; None: the shipped table
    version: str | None = None   # that library's version, when known

    @property
    def from_library(self) -> bool:
        return self.library is not None

    @property
    def label(self) -> str:
        """"names read from <lib> (NCCL 2.32.3)" or "shipped table (NCCL 2.14.3-2.30.7)"."""
        if self.library is None:
            return f"shipped table (NCCL {known_names.TABLE_RELEASES})"
        version = f" (NCCL {self.version})" if self.version else ""
        return f"names read from {self.library}{version}"

    @property
    def known(self) -> frozenset[str]:
        """Every name the linter accepts: NCCL's, the plugins', torch's and Gloo's."""
        return (self.nccl_names | known_names.PLUGIN_NAMES | known_names.TORCH_NAMES
                | known_names.GLOO_NAMES)


SHIPPED = NameSource(known_names.NCCL_NAMES)


@lru_cache(maxsize=8)
def _scan(path: str, mtime_ns: int, size: int) -> frozenset[str] | None:
    """The names in one file version (cached per path + mtime + size within a process)."""
    try:
        with ElfFile(path) as elf:
            data = elf.section_bytes(".rodata")
    except (ElfError, OSError):
        return None
    names = frozenset(m.group(1).decode("ascii") for m in _NAME.finditer(data))
    return names or None


def read_library_names(path: str | os.PathLike[str]) -> frozenset[str] | None:
    """The NCCL_* names compiled into ``path``; None when it cannot be read or holds none."""
    try:
        stat = Path(path).stat()
    except OSError:
        return None
    return _scan(str(path), stat.st_mtime_ns, stat.st_size)


def name_source(library: str | None, version: object = None) -> NameSource:
    """The names of ``library`` when it can be read, else the shipped table."""
    names = read_library_names(library) if library else None
    if names is None:
        return SHIPPED
    return NameSource(names, str(library), str(version) if version else None)
