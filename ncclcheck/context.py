"""What a probe is given: the environment snapshot, the expected layout, the deadline, and each
family's own typed options."""

from __future__ import annotations

import os
import socket
import time
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ncclcheck.bench.options import BenchOptions
from ncclcheck.model import CheckResult

# What a check that could measure nothing in its share of --timeout suggests at least: the
# probe commands' default --timeout.
DEFAULT_TIMEOUT_S = 60


def round_seconds_up(seconds: float) -> int:
    """A --timeout a person would type: whole tens of seconds up to two minutes, then minutes."""
    step = 10 if seconds <= 120 else 60
    return int(math.ceil(seconds / step) * step)


def longer_timeout(timeout: float) -> int:
    """What to try after a --timeout in which a check could measure nothing: twice it, and at
    least the default."""
    return round_seconds_up(max(DEFAULT_TIMEOUT_S, 2 * timeout))


@dataclass(frozen=True)
class RanksOptions:
    """`ncclcheck ranks`: add Lightning's view, validate a custom ClusterEnvironment."""

    lightning: bool = False
    cluster_env: str | None = None  # "MODULE:CLASS"
    visible_gpus: int | None = None  # the GPU count to assume instead of asking torch (tests)
    # What reports the Lightning checks, handed in by the caller that asks for them
    # (``ncclcheck.lightning.probe.ranks_options``), so that the ranks family never imports
    # the Lightning-facing code itself.
    lightning_part: Callable[[ProbeContext], list[CheckResult]] | None = None

    @property
    def wants_lightning(self) -> bool:
        return self.lightning or bool(self.cluster_env)

    def lightning_results(self, ctx: ProbeContext) -> list[CheckResult]:
        """The Lightning checks asked for, by the part the caller handed in."""
        if self.lightning_part is None:
            raise ValueError("Lightning checks asked for (lightning / cluster_env) without the "
                             "part that runs them: build the options with "
                             "ncclcheck.lightning.probe.ranks_options()")
        return self.lightning_part(ctx)


@dataclass(frozen=True)
class NetOptions:
    """`ncclcheck net`: the mesh's shape and patience; where the InfiniBand sysfs lives."""

    mesh_full_max: int | None = None  # None: the mesh module's own default
    mesh_connect_timeout: float | None = None  # None: a share of the deadline
    sys_infiniband: str | None = None  # None: /sys/class/infiniband
    nccl_version: str | None = None  # judge by this NCCL version instead of the one found


@dataclass(frozen=True)
class NcclOptions:
    """`ncclcheck nccl`: inspect this libnccl instead of the one the job would load."""

    nccl_lib: str | None = None


@dataclass(frozen=True)
class ProbeOptions:
    """Every family's options, each typed and defaulted; the CLI and the library build one."""

    ranks: RanksOptions = field(default_factory=RanksOptions)
    net: NetOptions = field(default_factory=NetOptions)
    nccl: NcclOptions = field(default_factory=NcclOptions)
    bench: BenchOptions = field(default_factory=BenchOptions.for_run)


@dataclass
class ProbeContext:
    """Everything a probe family reads. Probes never read ``os.environ`` directly, so tests
    can hand them any environment and cluster mode can compare what each rank saw."""

    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    nodes: int | None = None
    gpus_per_node: int | None = None
    timeout: float = 60.0
    host: str = field(default_factory=lambda: socket.gethostname().split(".")[0])
    options: ProbeOptions = field(default_factory=ProbeOptions)
    # Cluster mode: the session that connects this rank to the others (see ncclcheck/cluster/);
    # None when the command runs on one process only.
    cluster: Any = None
    started: float = field(default_factory=time.monotonic)

    @property
    def deadline(self) -> float:
        return self.started + self.timeout

    def remaining(self) -> float:
        """Seconds left before the command's deadline (never negative)."""
        return max(0.0, self.deadline - time.monotonic())
