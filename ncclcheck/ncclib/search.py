"""Where ld.so finds a library: the search order of ld.so(8), computed rather than guessed.

For a DT_NEEDED entry (or a dlopen without a slash) the dynamic loader tries, in order:
LD_PRELOAD'ed objects that already provide the soname; the requesting object's DT_RPATH (only
when it has no DT_RUNPATH) and then the executable's; LD_LIBRARY_PATH; the requesting object's
DT_RUNPATH; the ld.so.cache (what `ldconfig -p` prints); the default directories. That order is
why a pip-installed torch, whose libtorch_cuda.so carries a DT_RPATH to the nvidia-nccl wheel,
ignores a libnccl that is only on LD_LIBRARY_PATH.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ncclcheck.ncclib.elf import ElfError, read_dynamic

# ld.so's trusted directories: the multiarch ones (Debian/Ubuntu) and the classic ones.
_MULTIARCH = f"{platform.machine()}-linux-gnu"
DEFAULT_DIRS = (f"/lib/{_MULTIARCH}", f"/usr/lib/{_MULTIARCH}", "/lib64", "/usr/lib64", "/lib",
                "/usr/lib")
_LDCONFIG_LINE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$")


@dataclass(frozen=True)
class SearchStep:
    """One place ld.so looks, with the reason it looks there."""

    how: str        # "LD_PRELOAD", "DT_RPATH of <obj>", "LD_LIBRARY_PATH", "ld.so.cache", ...
    directory: str  # or the full path for LD_PRELOAD / cache entries


@dataclass
class Resolution:
    """Which file a soname request ends in, and the steps tried on the way."""

    soname: str
    requester: str | None
    found: str | None = None
    how: str | None = None
    steps: list[SearchStep] = field(default_factory=list)


def expand_origin(entry: str, origin: Path) -> str:
    """$ORIGIN / ${ORIGIN} -> the directory of the object that carries the path."""
    return entry.replace("${ORIGIN}", str(origin)).replace("$ORIGIN", str(origin))


def split_path_list(value: str | None) -> list[str]:
    """LD_LIBRARY_PATH style: ':' or ';' separated; an empty entry means the current directory."""
    if not value:
        return []
    return [p or "." for p in re.split(r"[:;]", value)]


def ldconfig_cache(timeout: float = 5.0) -> dict[str, list[str]]:
    """soname -> paths from `ldconfig -p` (the ld.so.cache), for this machine's word size."""
    tool = shutil.which("ldconfig") or next(
        (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.access(p, os.X_OK)), None)
    if tool is None:
        return {}
    try:
        out = subprocess.run([tool, "-p"], capture_output=True, text=True, timeout=timeout,
                             check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    want64 = platform.architecture()[0] == "64bit"
    cache: dict[str, list[str]] = {}
    for line in out.splitlines():
        match = _LDCONFIG_LINE.match(line)
        if not match:
            continue
        name, flags, path = match.groups()
        if ("64" in flags) != want64:  # the cache lists 32- and 64-bit builds side by side
            continue
        cache.setdefault(name, []).append(path)
    return cache


def _dynamic_paths(obj: Path | None) -> tuple[list[str] | None, list[str] | None]:
    if obj is None:
        return None, None
    try:
        info = read_dynamic(obj)
    except ElfError:
        return None, None
    origin = obj.resolve().parent
    rpath = [expand_origin(p, origin) for p in info.rpath] if info.rpath is not None else None
    runpath = [expand_origin(p, origin) for p in info.runpath] if info.runpath is not None else None
    return rpath, runpath


def _provides(path: Path, soname: str) -> bool:
    """An LD_PRELOAD entry satisfies the request when its soname (or file name) matches."""
    try:
        info = read_dynamic(path)
    except ElfError:
        return False
    return (info.soname or path.name) == soname


def search_steps(soname: str, requester: Path | None, env: Mapping[str, str],
                 executable: Path | None = None,
                 cache: Mapping[str, list[str]] | None = None,
                 assumed_rpath: list[str] | None = None) -> list[SearchStep]:
    """Every place ld.so would try for ``soname`` requested by ``requester``, in order.

    ``assumed_rpath`` stands in for a requester that is not on disk (a CPU-only torch, whose
    CUDA build would carry that DT_RPATH)."""
    steps: list[SearchStep] = []
    for entry in re.split(r"[:\s]+", env.get("LD_PRELOAD", "")):
        if entry and "/" in entry and _provides(Path(entry), soname):
            steps.append(SearchStep("LD_PRELOAD", entry))
    rpath, runpath = _dynamic_paths(requester)
    name = requester.name if requester else "the requesting object"
    if assumed_rpath is not None:
        rpath, runpath, name = assumed_rpath, None, "libtorch_cuda.so of a pip CUDA build"
    if runpath is None:
        for d in rpath or []:
            steps.append(SearchStep(f"DT_RPATH of {name}", d))
        exe_rpath, exe_runpath = _dynamic_paths(executable)
        if exe_runpath is None and executable is not None:
            for d in exe_rpath or []:
                steps.append(SearchStep(f"DT_RPATH of {executable.name}", d))
    for d in split_path_list(env.get("LD_LIBRARY_PATH")):
        steps.append(SearchStep("LD_LIBRARY_PATH", d))
    for d in runpath or []:
        steps.append(SearchStep(f"DT_RUNPATH of {name}", d))
    for path in (cache if cache is not None else ldconfig_cache()).get(soname, []):
        steps.append(SearchStep("ld.so.cache", path))
    for d in DEFAULT_DIRS:
        steps.append(SearchStep("default directory", d))
    return steps


def resolve(soname: str, requester: Path | None, env: Mapping[str, str],
            executable: Path | None = None,
            cache: Mapping[str, list[str]] | None = None,
            assumed_rpath: list[str] | None = None) -> Resolution:
    """The file ld.so would load for ``soname``; ``found`` None when nothing matches."""
    result = Resolution(soname, str(requester) if requester else None)
    result.steps = search_steps(soname, requester, env, executable, cache, assumed_rpath)
    for step in result.steps:
        if step.how in ("LD_PRELOAD", "ld.so.cache"):
            candidate = Path(step.directory)
        else:
            candidate = Path(step.directory) / soname
        if candidate.is_file() and _loadable(candidate):
            result.found, result.how = str(candidate), step.how
            break
    return result


def _loadable(path: Path) -> bool:
    """ld.so skips files of the wrong class; a non-ELF file there would make the load fail,
    but it is still the file the loader opens first, so only class mismatches are skipped."""
    try:
        with open(path, "rb") as fh:
            ident = fh.read(5)
    except OSError:
        return False
    if ident[:4] != b"\x7fELF":
        return True
    want64 = platform.architecture()[0] == "64bit"
    return (ident[4] == 2) == want64
