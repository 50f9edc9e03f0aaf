"""The ranks family's facts: the launcher's layout, the job shape the ranks are checked
against (nodes x GPUs, and where each number came from) and the GPUs this process sees.

Flags say what the user means to run; without them the launcher's own counts are used. The
fix for a world size that is not nodes x GPUs is the catalogue's, so the ranks probe, the
cluster gather and ``explain`` all say the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass

from ncclcheck.context import ProbeContext
from ncclcheck.catalogue import load
from ncclcheck.gpus import VisibleGpus, nvidia_driver_loaded, visible_gpus
from ncclcheck.launchers import Layout, read_layout

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


@dataclass(frozen=True)
class RanksFacts:
    """What every ranks check reads, gathered once by ``gather_facts`` (tests build it)."""

    ctx: ProbeContext
    layout: Layout
    others: list[str]  # the other launchers whose variables are also present
    expected: Expected
    gpus: VisibleGpus


def gather_facts(ctx: ProbeContext) -> RanksFacts:
    layout, others = read_layout(ctx.env)
    return RanksFacts(ctx, layout, others, expected_layout(ctx, layout), _gpus(ctx, layout))


def _gpus(ctx: ProbeContext, layout: Layout) -> VisibleGpus:
    """The visible GPU count, from torch only when a local rank needs it and the driver is
    there: importing torch costs seconds, which a short --timeout cannot spare."""
    override = ctx.options.ranks.visible_gpus
    if override is not None:
        return VisibleGpus(int(override), "given by the caller")
    if layout.local_rank is None:
        return VisibleGpus(None, "not needed: no local rank to check")
    if not nvidia_driver_loaded():
        return VisibleGpus(None, "no NVIDIA driver: GPU count unknown, CPU (Gloo) layout assumed")
    return visible_gpus(ctx.env)
