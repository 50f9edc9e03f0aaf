"""Launchers: one class per launcher behind one interface, and the order they are tried in."""

from __future__ import annotations

from typing import Mapping

from .base import Agreement, EnvProblem, EnvReader, LaunchAdvice, Launcher, Layout
from .kubeflow import KubeflowLauncher
from .lsf import LsfLauncher
from .mpi import MpichLauncher, OpenMpiLauncher
from .plain import PlainEnvLauncher, StandaloneLauncher
from .slurm import SlurmBatchLauncher, SlurmLauncher
from .torchrun import TorchrunLauncher

# torchrun first: it runs inside Slurm allocations, MPI jobs and Kubeflow pods, and when it
# does, its variables are the ones torch reads. Then the per-task launchers, then the
# allocation-level ones (Kubeflow pods, Slurm batch scripts), then the plain environment.
DETECTION_ORDER: tuple[type[Launcher], ...] = (
    TorchrunLauncher,
    SlurmLauncher,
    OpenMpiLauncher,
    MpichLauncher,
    LsfLauncher,
    KubeflowLauncher,
    SlurmBatchLauncher,
    PlainEnvLauncher,
    StandaloneLauncher,
)

__all__ = ["Agreement", "EnvProblem", "EnvReader", "LaunchAdvice", "Launcher", "Layout", "DETECTION_ORDER",
           "detect_launcher", "read_layout"]


def detect_launcher(env: Mapping[str, str]) -> tuple[Launcher, str, list[str]]:
    """The launcher that started this process, why, and the other launchers also present."""
    found: list[tuple[type[Launcher], str]] = []
    for cls in DETECTION_ORDER:
        reason = cls.detect(env)
        if reason and cls is not StandaloneLauncher:
            found.append((cls, reason))
    if not found:
        return StandaloneLauncher(), StandaloneLauncher.detect(env) or "", []
    cls, reason = found[0]
    return cls(), reason, [other.name for other, _ in found[1:]]


def read_layout(env: Mapping[str, str]) -> tuple[Layout, list[str]]:
    """Detect the launcher and read its layout; also returns the other launchers seen."""
    launcher, reason, others = detect_launcher(env)
    return launcher.read(EnvReader(env), reason), others
