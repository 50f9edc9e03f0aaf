"""How many GPUs this process can see, asked of torch only when it imports."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from typing import Mapping

from ncclcheck.needs import torch_missing


@dataclass(frozen=True)
class VisibleGpus:
    count: int | None
    how: str


def parse_visible_devices(value: str) -> list[str] | None:
    """CUDA_VISIBLE_DEVICES as a list of entries, or None when it is malformed.

    CUDA stops at the first invalid entry; ``-1`` or an empty value hides every GPU.
    """
    value = value.strip()
    if value in ("", "-1", "none", "NoDevFiles"):
        return []
    entries = [e.strip() for e in value.split(",")]
    if any(not e for e in entries):
        return None
    return entries


def nvidia_driver_loaded() -> bool:
    """Whether the NVIDIA kernel driver is loaded here (its /proc entry or a device node).
    Without it no torch build can see a GPU, so the answer needs no torch import."""
    return os.path.exists("/proc/driver/nvidia/version") or bool(glob.glob("/dev/nvidia[0-9]*"))


def visible_gpus(env: Mapping[str, str]) -> VisibleGpus:
    """GPUs visible to this process (CUDA_VISIBLE_DEVICES honoured), or count None if unknown."""
    missing = torch_missing()
    if missing:
        return VisibleGpus(None, missing)
    try:
        import torch  # deferred: seconds to import; only the probes that need a GPU count pay
    except Exception as exc:  # torch missing or broken: the count is simply unknown
        return VisibleGpus(None, f"torch does not import ({type(exc).__name__})")
    try:
        if not torch.cuda.is_available():
            build = "CPU-only torch build" if torch.version.cuda is None else "no CUDA device"
            return VisibleGpus(None, f"{build}: GPU count unknown, CPU (Gloo) layout assumed")
        return VisibleGpus(torch.cuda.device_count(), "torch.cuda.device_count()")
    except Exception as exc:
        return VisibleGpus(None, f"torch.cuda failed: {exc}")
