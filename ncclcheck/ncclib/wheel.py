"""The installed NCCL wheel (nvidia-nccl-cu13 / -cu12 / -cu11): the one place that says which.

Several can be installed side by side. The one that matters is the one torch itself depends
on, so torch's own metadata decides first (its ``Requires-Dist`` names it for CUDA builds);
then torch's CUDA tag (``2.5.1+cu124`` -> cu12); only when torch says nothing, the newest
CUDA line installed. The library file itself is never loaded here.
"""

from __future__ import annotations

import importlib.metadata
import re
from dataclasses import dataclass
from typing import Callable, Sequence

WHEELS = ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")  # newest CUDA line first
_REQUIREMENT = re.compile(r"^\s*(nvidia-nccl-cu\d+)\b", re.IGNORECASE)
_CUDA_TAG = re.compile(r"\+cu(\d+?)\d$")


@dataclass(frozen=True)
class NcclWheel:
    name: str      # "nvidia-nccl-cu12"
    version: str   # "2.32.3"
    why: str       # "torch depends on it", "matches torch's CUDA tag", "installed"

    def __str__(self) -> str:
        return f"{self.name} {self.version}"


def _metadata_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _torch_requirements() -> Sequence[str]:
    try:
        return importlib.metadata.requires("torch") or ()
    except importlib.metadata.PackageNotFoundError:
        return ()


def preferred_order(torch_requires: Sequence[str], torch_version: str | None) -> list[tuple[str, str]]:
    """(wheel name, why) in the order they are preferred: torch's dependency, torch's CUDA
    tag, then the newest CUDA line first."""
    order: list[tuple[str, str]] = []
    for requirement in torch_requires:
        match = _REQUIREMENT.match(requirement)
        if match:
            order.append((match.group(1).lower(), "torch depends on it"))
    tag = _CUDA_TAG.search(torch_version or "")
    if tag:
        order.append((f"nvidia-nccl-cu{tag.group(1)}", "matches torch's CUDA tag"))
    order += [(name, "installed") for name in WHEELS]
    seen: set[str] = set()
    return [(n, w) for n, w in order if not (n in seen or seen.add(n))]  # type: ignore[func-returns-value]


def installed_nccl_wheel(version_of: Callable[[str], str | None] = _metadata_version,
                         torch_requires: Callable[[], Sequence[str]] = _torch_requirements
                         ) -> NcclWheel | None:
    """The NCCL wheel a PyTorch job here uses, or None when no NCCL wheel is installed.
    ``version_of`` / ``torch_requires`` read package metadata (tests pass their own)."""
    for name, why in preferred_order(torch_requires(), version_of("torch")):
        version = version_of(name)
        if version:
            return NcclWheel(name, version, why)
    return None


def installed_nccl_version() -> str | None:
    """The preferred NCCL wheel's version ("2.32.3"), None without one."""
    wheel = installed_nccl_wheel()
    return wheel.version if wheel else None
