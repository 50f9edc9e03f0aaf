"""The job shape the ranks are checked against: nodes x GPUs, and where each number came from.

Flags say what the user means to run; without them the launcher's own counts are used. The
fix for a world size that is not nodes x GPUs is the catalogue's, so the ranks probe, the
cluster gather and ``explain`` all say the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass

from ncclcheck.context import ProbeContext
from ncclcheck.catalogue import load
from ncclcheck.launchers import Layout

INVALID_RANK = "nccl.invalid_rank"  # the catalogue signature a wrong world size leads to


@dataclass(frozen=True)
class Expected:
    """The job shape the ranks are checked against, and where each number came from."""

    nodes: int | None
    gpus_per_node: int | None
    nodes_from: str
    gpus_from: str

    @property
    def world(self) -> int | None:
        if self.nodes is None or self.gpus_per_node is None:
            return None
        return self.nodes * self.gpus_per_node

    def describe(self) -> str:
        if self.world is None:
            return "unknown"
        return f"{self.nodes} x {self.gpus_per_node} = {self.world}"


def expected_layout(ctx: ProbeContext, layout: Layout) -> Expected:
    """Flags win (they say what the user means to run); else the launcher's own variables."""
    nodes, nodes_from = ctx.nodes, "--nodes"
    if nodes is None and layout.num_nodes is not None:
        nodes, nodes_from = layout.num_nodes, layout.source("num_nodes")
    gpus, gpus_from = ctx.gpus_per_node, "--gpus-per-node"
    if gpus is None and layout.local_world_size is not None:
        gpus, gpus_from = layout.local_world_size, layout.source("local_world_size")
    return Expected(nodes, gpus, nodes_from if nodes is not None else "",
                    gpus_from if gpus is not None else "")


def fix_world(expected: Expected) -> str:
    """The fix for a world size that disagrees with nodes x GPUs: the catalogue's text for
    NCCL's 'Invalid rank requested', so the probe and `explain` say the same thing."""
    return load().signature(INVALID_RANK).render({"nodes": expected.nodes,
                                                  "gpus_per_node": expected.gpus_per_node,
                                                  "expected_world_size": expected.world})[1]
