"""Hyperscan databases kept on disk between runs: compiling them is most of explain's start-up.

The literal prefilter (prefilter.py) and the gate's full patterns (gate.py) compile the same
expressions on every run; together that is a few tenths of a second, longer than reading a
64 MiB log. A database is stored under the user's cache folder, named by a hash of everything
it is built from (expressions, flags, mode, Hyperscan's version, the machine and its CPU
features, as a home folder may be shared by nodes of different CPUs), so a changed catalogue or
another Hyperscan simply builds and stores a new one. Reading or writing the
cache never fails a run: any problem means compiling as before. ``NCCLCHECK_CACHE_DIR`` moves
the folder; set to ``off`` (or empty) it turns the cache off.
"""

from __future__ import annotations

import hashlib
import os
import platform
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

CACHE_VARIABLE = "NCCLCHECK_CACHE_DIR"
KEPT_FILES = 16   # files of each kind kept; older ones are removed when a new one is written
PREFIX = "hyperscan-"


def cache_dir() -> Path | None:
    """Where databases are kept; None when the cache is off."""
    chosen = os.environ.get(CACHE_VARIABLE)
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "off") else Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ncclcheck"


def block_database(expressions: Sequence[bytes], flags: Sequence[int],
                   literal: bool = False) -> Any:
    """A block-mode Hyperscan database of ``expressions`` (ids 0..n-1), from the cache when
    one was built from the same input before, else compiled (and stored)."""
    import hyperscan  # deferred: slow to load, and not installed on every platform

    folder = cache_dir()
    path = None
    if folder is not None:
        key = hashlib.sha256(repr((list(expressions), list(flags), literal,
                                   getattr(hyperscan, "__version__", "?"), platform.machine(),
                                   platform.system(), _cpu_features())).encode()).hexdigest()[:32]
        path = folder / f"{PREFIX}{key}.db"
        loaded = _load(hyperscan, path)
        if loaded is not None:
            return loaded
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(expressions=list(expressions), ids=list(range(len(expressions))),
                     flags=list(flags), literal=literal)
    if path is not None:
        _store(hyperscan, database, path)
    return database


@lru_cache(maxsize=1)
def _cpu_features() -> str:
    """The CPU's feature flags (Linux), which Hyperscan compiles for."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            for line in info:
                if line.startswith(("flags", "Features")):
                    return line.split(":", 1)[-1].strip()
    except OSError:
        pass
    return ""


def _load(hyperscan: Any, path: Path) -> Any:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        database = hyperscan.loadb(data, mode=hyperscan.HS_MODE_BLOCK)
        database.scratch = hyperscan.Scratch(database)  # fails for another CPU's database
    except (hyperscan.error, ValueError, TypeError):
        return None  # a truncated or foreign file: compile instead
    return database


def _store(hyperscan: Any, database: Any, path: Path) -> None:
    try:
        data = hyperscan.dumpb(database)
    except hyperscan.error:
        return
    keep(path, data, PREFIX + "*.db")


def keep(path: Path, data: bytes, kind: str) -> None:
    """Write ``data`` to ``path`` atomically (ranks of one node may start at once), then keep
    the newest KEPT_FILES of the files in its folder matching the glob ``kind``; a folder that
    cannot be written only means nothing is kept."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(temporary, path)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
        stored = sorted(path.parent.glob(kind), key=lambda p: p.stat().st_mtime)
        for old in stored[:-KEPT_FILES]:
            old.unlink()
    except OSError:
        return
