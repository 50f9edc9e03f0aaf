"""The benchmark's options, with the two default sweeps: full (`bench`) and quick (`run`)."""

from __future__ import annotations

import glob
from dataclasses import dataclass, replace
from typing import Mapping

from ncclcheck.gpus import visible_gpus

BACKENDS = ("auto", "nccl", "gloo")


@dataclass(frozen=True)
class BenchOptions:
    """None means "the default for the backend" (GPUs sweep larger sizes than Gloo on CPU)."""

    backend: str = "auto"
    nproc: int = 2
    min_bytes: int | None = None
    max_bytes: int | None = None
    factor: float | None = None
    iters: int | None = None
    warmup: int | None = None
    dtype: str = "float32"
    min_busbw: float | None = None
    plot: str | None = None
    quick: bool = False
    isolate: str | None = None       # "nodes" | "links": pair tests after the sweep
    isolate_threshold: float = 0.7  # a pair is slow below this fraction of the median pair
    min_share: float | None = None   # of the expected busbw; None: the table row's default

    @classmethod
    def for_run(cls) -> "BenchOptions":
        """`ncclcheck run`: a few sizes, well under 10 s on a healthy node."""
        return cls(quick=True)

    def resolved(self, backend: str) -> "BenchOptions":
        """Fill the sweep defaults for the backend actually used."""
        if self.quick:
            defaults = {"min_bytes": 1024, "factor": 16.0, "iters": 10, "warmup": 3,
                        "max_bytes": 64 * 2 ** 20 if backend == "nccl" else 4 * 2 ** 20}
        else:
            defaults = {"min_bytes": 1024, "factor": 2.0 if backend == "nccl" else 4.0,
                        "iters": 20, "warmup": 5,
                        "max_bytes": 2 ** 30 if backend == "nccl" else 64 * 2 ** 20}
        fill = {k: v for k, v in defaults.items() if getattr(self, k) is None}
        resolved = replace(self, backend=backend, **fill)
        if resolved.min_bytes > resolved.max_bytes and self.min_bytes is None:
            resolved = replace(resolved, min_bytes=resolved.max_bytes)
        if resolved.max_bytes < resolved.min_bytes and self.max_bytes is None:
            resolved = replace(resolved, max_bytes=resolved.min_bytes)
        return resolved


def cuda_gpu_count(env: Mapping[str, str]) -> int:
    """GPUs this process can use; torch is asked only when an NVIDIA device node exists."""
    if not glob.glob("/dev/nvidia[0-9]*"):
        return 0
    return visible_gpus(env).count or 0


def choose_backend(requested: str, gpus: int) -> str:
    """auto: NCCL when CUDA GPUs are present, else Gloo on CPU."""
    if requested == "auto":
        return "nccl" if gpus > 0 else "gloo"
    return requested
