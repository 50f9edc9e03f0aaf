"""What a probe is given: the environment snapshot, the expected layout, the deadline."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass
class ProbeContext:
    """Everything a probe family reads. Probes never read ``os.environ`` directly, so tests
    can hand them any environment and cluster mode can compare what each rank saw."""

    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    nodes: int | None = None
    gpus_per_node: int | None = None
    timeout: float = 60.0
    host: str = field(default_factory=lambda: socket.gethostname().split(".")[0])
    options: dict[str, Any] = field(default_factory=dict)
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

    def option(self, name: str, default: Any = None) -> Any:
        return self.options.get(name, default)
