"""What each launcher puts in a process's environment, for every slot of an N x M grid.

The point of simulating more than one launcher: a ClusterEnvironment that reads RANK works
under torchrun and silently gives every process rank 0 under Lightning's own launcher, which
sets NODE_RANK, LOCAL_RANK and WORLD_SIZE but never RANK.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from ncclcheck.launchers import slurm

MASTER_ADDR, MASTER_PORT = "127.0.0.1", "29500"


@dataclass(frozen=True)
class Slot:
    node: int
    local: int
    nodes: int
    per_node: int

    @property
    def rank(self) -> int:
        return self.node * self.per_node + self.local

    @property
    def world(self) -> int:
        return self.nodes * self.per_node


def _master(base: Mapping[str, str]) -> dict[str, str]:
    return {"MASTER_ADDR": base.get("MASTER_ADDR", MASTER_ADDR),
            "MASTER_PORT": base.get("MASTER_PORT", MASTER_PORT)}


def torchrun_env(slot: Slot, base: Mapping[str, str]) -> dict[str, str]:
    """torchrun --nnodes N --nproc-per-node M (static rendezvous, --node-rank = node)."""
    return {**base, **_master(base), "RANK": str(slot.rank), "LOCAL_RANK": str(slot.local),
            "WORLD_SIZE": str(slot.world), "LOCAL_WORLD_SIZE": str(slot.per_node),
            "GROUP_RANK": str(slot.node), "GROUP_WORLD_SIZE": str(slot.nodes),
            "ROLE_RANK": str(slot.rank), "ROLE_WORLD_SIZE": str(slot.world),
            "ROLE_NAME": "default", "TORCHELASTIC_RUN_ID": "ncclcheck",
            "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0"}


def lightning_parent_env(node: int, base: Mapping[str, str]) -> dict[str, str]:
    """The script as the user starts it on node ``node``, before Lightning launches anything."""
    return {**base, **_master(base), "NODE_RANK": str(node)}


def lightning_env(slot: Slot, base: Mapping[str, str]) -> dict[str, str]:
    """After Lightning's _SubprocessScriptLauncher: NODE_RANK, LOCAL_RANK, WORLD_SIZE; no RANK."""
    return {**lightning_parent_env(slot.node, base), "LOCAL_RANK": str(slot.local),
            "WORLD_SIZE": str(slot.world)}


def slurm_env(slot: Slot, base: Mapping[str, str]) -> dict[str, str]:
    """srun --nodes N --ntasks-per-node M inside an sbatch job."""
    env = {**base, "SLURM_PROCID": str(slot.rank), "SLURM_LOCALID": str(slot.local),
           "SLURM_NODEID": str(slot.node), "SLURM_NTASKS": str(slot.world),
           "SLURM_NPROCS": str(slot.world), "SLURM_NNODES": str(slot.nodes),
           "SLURM_JOB_NUM_NODES": str(slot.nodes), "SLURM_NTASKS_PER_NODE": str(slot.per_node),
           "SLURM_JOB_ID": base.get("SLURM_JOB_ID", "4242"), "SLURM_JOB_NAME": "train",
           "SLURM_JOB_NODELIST": f"node[0-{max(slot.nodes - 1, 0)}]",
           "SLURM_NODELIST": f"node[0-{max(slot.nodes - 1, 0)}]"}
    return env


@dataclass(frozen=True)
class LaunchStyle:
    name: str
    title: str
    env_for: Callable[[Slot, Mapping[str, str]], dict[str, str]]
    external: bool  # True: the launcher starts every process, Lightning must not


TORCHRUN = LaunchStyle("torchrun", "torchrun", torchrun_env, True)
LIGHTNING = LaunchStyle("lightning_launcher", "Lightning's own launcher", lightning_env, False)
SLURM = LaunchStyle("slurm", "srun", slurm_env, True)


def styles_for(env: Mapping[str, str]) -> list[LaunchStyle]:
    """torchrun and Lightning's launcher always (the two ways a script is usually started);
    srun too when this shell is inside a Slurm job."""
    styles = [TORCHRUN, LIGHTNING]
    if slurm.inside_job(env):
        styles.append(SLURM)
    return styles


def grid(nodes: int, per_node: int) -> list[Slot]:
    return [Slot(n, l, nodes, per_node) for n in range(nodes) for l in range(per_node)]
