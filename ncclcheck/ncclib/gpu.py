"""GPU and CUDA facts for NCCL's checks: the pure helpers (driver vs CUDA build, arch lists)
take plain values, so they are tested anywhere; the reads (libcuda's version, nvidia-smi's
compute modes, whether torch is a CPU-only build) never import torch and never fail.

The checks that judge them are ``ncclcheck.probes.nccl.gpu``'s.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import re
import shutil
import subprocess

from ncclcheck.ncclib.version import cuda_version_tuple
from ncclcheck.needs import torch_package


def driver_supports(torch_cuda: str, driver_code: int) -> bool:
    """A driver runs a CUDA build of the same major version or older (minor-version compat)."""
    major = int(torch_cuda.split(".")[0])
    return cuda_version_tuple(driver_code)[0] >= major


def arch_supported(capability: tuple[int, int], arch_list: list[str]) -> bool:
    """Is there code for this GPU: an sm_XY cubin of the same major and no newer minor, or
    compute_XY PTX no newer than the GPU (JIT-compiled)."""
    major, minor = capability
    for arch in arch_list:
        match = re.match(r"^(sm|compute)_(\d+)(\d)[a-z]?$", arch)
        if not match:
            continue
        kind, amaj, amin = match.group(1), int(match.group(2)), int(match.group(3))
        if kind == "sm" and amaj == major and amin <= minor:
            return True
        if kind == "compute" and (amaj, amin) <= (major, minor):
            return True
    return False


_KERNEL_DRIVER = re.compile(r"\b(\d{3,}\.\d+(?:\.\d+)?)\b")


def kernel_driver_version() -> str | None:
    """The NVIDIA kernel module's release ("535.104.05"), from /proc or /sys (no nvidia-smi
    subprocess, no libcuda); None without the driver."""
    for path in ("/proc/driver/nvidia/version", "/sys/module/nvidia/version"):
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                first = handle.readline()
        except OSError:
            continue
        match = _KERNEL_DRIVER.search(first)
        if match:
            return match.group(1)
    return None


def cuda_driver_version() -> int | None:
    """cuDriverGetVersion from libcuda, without creating a context; None without a driver."""
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    version = ctypes.c_int(0)
    return version.value if libcuda.cuDriverGetVersion(ctypes.byref(version)) == 0 else None


def compute_modes(timeout: float = 5.0) -> list[str] | None:
    """nvidia-smi's compute mode per GPU ("Default", "Exclusive_Process", ...), if available."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return None
    try:
        out = subprocess.run([tool, "--query-gpu=compute_mode", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] or None


def torch_build_without_cuda() -> str | None:
    """"torch 2.13.0+cpu" when torch is installed without libtorch_cuda.so (a CPU-only build),
    found without importing torch, which costs seconds; None otherwise."""
    package = torch_package()
    lib = None if package is None else package / "lib"
    if lib is None or not lib.is_dir() or (lib / "libtorch_cuda.so").exists():
        return None
    try:
        return f"torch {importlib.metadata.version('torch')}"
    except importlib.metadata.PackageNotFoundError:
        return "torch"
