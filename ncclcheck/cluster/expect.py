"""How many processes rank 0 waits for, and which rank each process claims.

A mis-numbered launch is the case this tool exists for, so neither number may come from
WORLD_SIZE alone: the launch itself (nodes x processes per node, SLURM_NTASKS,
OMPI_COMM_WORLD_SIZE, --nodes x --gpus-per-node) says how many processes exist even when
WORLD_SIZE disagrees, and a rank outside 0..WORLD_SIZE-1 (or a negative one) still joins the
gather so that it can be named.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ncclcheck.launchers import Layout


@dataclass(frozen=True)
class Expectation:
    """The job's declared size, what the launch says, and the rank slots rank 0 waits for."""

    declared: int  # WORLD_SIZE as rank 0 reads it (the launcher's own variable when it has one)
    declared_from: str
    launch: int | None = None  # processes the launch itself says exist
    launch_from: str = ""
    nodes: int | None = None  # the launch's shape, for the fix (Trainer(num_nodes=, devices=))
    per_node: int | None = None

    @property
    def slots(self) -> int:
        """Ranks 0..slots-1 must each be filled by a report before rank 0 stops early."""
        return max(self.declared, self.launch or 0)


def launch_count(layout: Layout, nodes: int | None,
                 gpus_per_node: int | None) -> tuple[int | None, str, int | None, int | None]:
    """(processes, where that number came from, nodes, per node) as the launch states them.

    The launcher's own world size (SLURM_NTASKS, OMPI_COMM_WORLD_SIZE, PMI_SIZE) first, then
    nodes x processes per node (GROUP_WORLD_SIZE x LOCAL_WORLD_SIZE, SLURM_NNODES x
    SLURM_NTASKS_PER_NODE), then the command line's --nodes x --gpus-per-node."""
    shape_nodes = nodes if nodes is not None else layout.num_nodes
    shape_per_node = gpus_per_node if gpus_per_node is not None else layout.local_world_size
    own = layout.source("world_size")
    if layout.world_size is not None and own != "WORLD_SIZE":
        return layout.world_size, own, shape_nodes, shape_per_node
    if layout.num_nodes is not None and layout.local_world_size is not None:
        return (layout.num_nodes * layout.local_world_size,
                f"{layout.source('num_nodes')} x {layout.source('local_world_size')}",
                layout.num_nodes, layout.local_world_size)
    if nodes is not None and gpus_per_node is not None:
        return (nodes * gpus_per_node, f"--nodes {nodes} x --gpus-per-node {gpus_per_node}",
                nodes, gpus_per_node)
    return None, "", shape_nodes, shape_per_node


def expectation(layout: Layout, env: Mapping[str, str], nodes: int | None = None,
                gpus_per_node: int | None = None) -> Expectation:
    """Rank 0's expectation of the job, from its own launcher variables and options."""
    declared, declared_from = int(layout.world_size or 1), layout.source("world_size")
    world_env = _integer(env.get("WORLD_SIZE"))
    if world_env is not None and world_env >= 1 and declared_from != "WORLD_SIZE":
        declared, declared_from = world_env, "WORLD_SIZE"  # what torch's env:// reads
    launch, launch_from, shape_nodes, shape_per_node = launch_count(layout, nodes, gpus_per_node)
    return Expectation(declared, declared_from, launch, launch_from, shape_nodes, shape_per_node)


def claimed_rank(layout: Layout, env: Mapping[str, str]) -> int | None:
    """The rank this process claims, negative ones included (the launcher reader rejects
    those, but the gather must still name them); None when no integer is given."""
    if layout.rank is not None:
        return layout.rank
    return _integer(env.get(layout.source("rank")))


def _integer(text: str | None) -> int | None:
    try:
        return int(str(text).strip(), 10) if text is not None else None
    except ValueError:
        return None
