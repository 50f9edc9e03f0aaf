"""Every libnccl on this machine, and the one a PyTorch job would load.

Copies are looked for where they come from in practice: the nvidia-nccl-cu* wheel torch depends
on, a copy inside torch/lib, NCCL_HOME, LD_LIBRARY_PATH, the ld.so cache and the usual CUDA
directories. The winner is computed with ld.so's rules (``search.resolve``) for the object that
really asks for libnccl: torch's libtorch_cuda.so when torch is a CUDA build. A CPU-only torch
loads no libnccl at all; then the answer is the library its CUDA build would load from the same
site-packages (the pip wheels carry DT_RPATH $ORIGIN/../../nvidia/nccl/lib), so the rest of the
checks still ask the real library.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ncclcheck.ncclib.elf import ElfError, ElfFile
from ncclcheck.ncclib.search import Resolution, ldconfig_cache, resolve, split_path_list
from ncclcheck.ncclib.wheel import installed_nccl_wheel
from ncclcheck.needs import torch_package

SONAME = "libnccl.so.2"
CUDA_DIRS = ("/usr/local/cuda/lib64", "/usr/local/cuda/lib",
             "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/nccl/lib", "/opt/nccl/lib",
             "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")
_BANNER = re.compile(rb"NCCL version (\d+\.\d+\.\d+)([^\0\s%]*)")


@dataclass
class LibraryCopy:
    """One libnccl file and where it was seen (a file can be seen from several places)."""

    path: str
    real: str
    sources: list[str] = field(default_factory=list)
    banner: str | None = None   # "2.32.3+cuda12.9", read from the file, not by loading it

    @property
    def version(self) -> str | None:
        return self.banner.split("+", 1)[0] if self.banner else None

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "real_path": self.real, "sources": self.sources,
                "version": self.version, "banner": self.banner}


@dataclass
class TorchLayout:
    """Where torch lives and which object of it asks for libnccl (no torch import needed)."""

    lib_dir: Path | None
    requester: Path | None     # torch/lib/libtorch_cuda.so, when torch is a CUDA build
    simulated: bool            # True: CPU build, the CUDA wheel's layout is assumed


@dataclass
class Discovery:
    copies: list[LibraryCopy]
    resolution: Resolution
    torch: TorchLayout
    override: str | None = None
    wheel: str | None = None   # "nvidia-nccl-cu12 2.32.3"

    @property
    def winner(self) -> LibraryCopy | None:
        if self.resolution.found is None:
            return None
        real = str(Path(self.resolution.found).resolve())
        return next((c for c in self.copies if c.real == real), None)


def read_banner(path: str | Path) -> str | None:
    """The "NCCL version x.y.z+cudaA.B" string compiled into the library's read-only data."""
    try:
        with ElfFile(path) as elf:
            data = elf.section_bytes(".rodata")
    except (ElfError, OSError):
        return None
    for match in _BANNER.finditer(data):
        return (match.group(1) + match.group(2)).decode("ascii", "replace")
    return None


def torch_layout(search_path: list[str] | None = None) -> TorchLayout:
    """torch's lib directory found without importing torch (importing costs seconds)."""
    lib_dir = None
    if search_path is None:
        package = torch_package()
        lib_dir = None if package is None else package / "lib"
    else:
        lib_dir = next((Path(p) / "torch" / "lib" for p in search_path
                        if (Path(p) / "torch" / "lib").is_dir()), None)
    if lib_dir is None or not lib_dir.is_dir():
        return TorchLayout(None, None, False)
    cuda = lib_dir / "libtorch_cuda.so"
    if cuda.is_file():
        return TorchLayout(lib_dir, cuda, False)
    return TorchLayout(lib_dir, None, True)


def wheel_dirs(search_path: list[str]) -> list[Path]:
    return [Path(p) / "nvidia" / "nccl" / "lib" for p in search_path
            if (Path(p) / "nvidia" / "nccl" / "lib").is_dir()]


def installed_wheel() -> str | None:
    """"nvidia-nccl-cu12 2.32.3": the wheel ``ncclib.wheel`` prefers, as the report shows it."""
    wheel = installed_nccl_wheel()
    return str(wheel) if wheel else None


def _add(copies: dict[str, LibraryCopy], path: Path, source: str) -> None:
    if not path.is_file():
        return
    real = str(path.resolve())
    copy = copies.get(real)
    if copy is None:
        copy = copies[real] = LibraryCopy(str(path), real, [], read_banner(path))
    if source not in copy.sources:
        copy.sources.append(source)


def _nccl_files(directory: Path) -> list[Path]:
    try:
        return sorted(p for p in directory.glob("libnccl.so*") if p.is_file())
    except OSError:
        return []


def discover(env: Mapping[str, str], override: str | None = None,
             search_path: list[str] | None = None,
             cache: Mapping[str, list[str]] | None = None,
             extra_dirs: tuple[str, ...] = CUDA_DIRS) -> Discovery:
    """All copies and the winner. ``override`` (--nccl-lib) wins by definition."""
    search_path = list(sys.path if search_path is None else search_path)
    cache = ldconfig_cache() if cache is None else cache
    torch = torch_layout(search_path)
    copies: dict[str, LibraryCopy] = {}
    wheel = installed_wheel()
    if override:
        _add(copies, Path(override), "--nccl-lib")
    for d in wheel_dirs(search_path):
        for f in _nccl_files(d):
            _add(copies, f, wheel.split()[0] + " wheel" if wheel else "nvidia/nccl wheel")
    if torch.lib_dir is not None:
        for f in _nccl_files(torch.lib_dir):
            _add(copies, f, "torch/lib")
    if env.get("NCCL_HOME"):
        for sub in ("lib", "lib64", "build/lib"):
            for f in _nccl_files(Path(env["NCCL_HOME"]) / sub):
                _add(copies, f, "NCCL_HOME")
    for d in split_path_list(env.get("LD_LIBRARY_PATH")):
        for f in _nccl_files(Path(d)):
            _add(copies, f, "LD_LIBRARY_PATH")
    for name, paths in cache.items():
        if name.startswith("libnccl.so"):
            for p in paths:
                _add(copies, Path(p), "ld.so.cache")
    for d in extra_dirs:
        for f in _nccl_files(Path(d)):
            _add(copies, f, "system directory")

    if override:
        resolution = Resolution(SONAME, None, override, "--nccl-lib")
    else:
        resolution = _resolve_for_torch(torch, env, cache)
    return Discovery(list(copies.values()), resolution, torch, override, wheel)


def _resolve_for_torch(torch: TorchLayout, env: Mapping[str, str],
                       cache: Mapping[str, list[str]]) -> Resolution:
    executable = Path(sys.executable)
    if torch.requester is not None:
        return resolve(SONAME, torch.requester, env, executable, cache)
    if torch.simulated and torch.lib_dir is not None:
        # A CPU build loads no libnccl; ask what its CUDA build would load from here.
        return resolve(SONAME, None, env, executable, cache, wheel_rpath(torch.lib_dir))
    return resolve(SONAME, None, env, executable, cache)


def wheel_rpath(lib_dir: Path) -> list[str]:
    """The DT_RPATH entries the pip CUDA wheels of torch give libtorch_cuda.so for NCCL."""
    return [str((lib_dir / "../../nvidia/nccl/lib").resolve()), str(lib_dir.resolve())]
