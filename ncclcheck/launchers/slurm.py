"""Slurm: tasks started by srun, and batch scripts that never called srun."""

from __future__ import annotations

import re
from typing import Mapping

from .base import Agreement, EnvReader, LaunchAdvice, Launcher, Layout, finish

_SRUN_MARKERS = ("SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_NUM_TASKS")


def tasks_per_node(value: str | None) -> list[int] | None:
    """Expand SLURM_TASKS_PER_NODE run-length notation: ``2(x3),1`` -> [2, 2, 2, 1]."""
    if not value:
        return None
    counts: list[int] = []
    for part in value.split(","):
        match = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if not match:
            return None
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts


class SlurmLauncher(Launcher):
    """Tasks started by srun (one task per GPU).

    Reads SLURM_PROCID (global rank), SLURM_NTASKS / SLURM_NPROCS (world size), SLURM_LOCALID
    (local rank), SLURM_NODEID (node rank), SLURM_NNODES / SLURM_JOB_NUM_NODES (node count),
    SLURM_NTASKS_PER_NODE, SLURM_TASKS_PER_NODE, and RANK / WORLD_SIZE / LOCAL_RANK when the
    job script exports them too.
    """

    name = "slurm"
    title = "Slurm (srun)"
    variables: tuple[str, ...] = ("SLURM_PROCID", "SLURM_STEP_ID", "SLURM_NTASKS", "SLURM_NPROCS",
                                   "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NNODES",
                                   "SLURM_JOB_NUM_NODES", "SLURM_NTASKS_PER_NODE",
                                   "SLURM_TASKS_PER_NODE", "RANK", "WORLD_SIZE", "LOCAL_RANK")
    rank_formula_guaranteed = False  # --distribution=cyclic numbers tasks round-robin
    master_required = False  # Lightning derives it from SLURM_NODELIST; torch env:// needs it

    @staticmethod
    def detect(env: Mapping[str, str]) -> str | None:
        if "SLURM_PROCID" in env and any(m in env for m in _SRUN_MARKERS):
            marker = next(m for m in _SRUN_MARKERS if m in env)
            return f"SLURM_PROCID and {marker} are set (a task started by srun)"
        return None

    def read(self, env: EnvReader, reason: str) -> Layout:
        ntasks_name = "SLURM_NTASKS" if env.has("SLURM_NTASKS") else "SLURM_NPROCS"
        nnodes_name = "SLURM_NNODES" if env.has("SLURM_NNODES") else "SLURM_JOB_NUM_NODES"
        layout = self._layout(
            env, reason,
            rank=env.int("SLURM_PROCID"),
            world_size=env.int(ntasks_name, minimum=1),
            local_rank=env.int("SLURM_LOCALID"),
            node_rank=env.int("SLURM_NODEID"),
            num_nodes=env.int(nnodes_name, minimum=1),
            local_world_size=env.int("SLURM_NTASKS_PER_NODE", minimum=1),
            sources={"rank": "SLURM_PROCID", "world_size": ntasks_name, "local_rank": "SLURM_LOCALID",
                     "node_rank": "SLURM_NODEID", "num_nodes": nnodes_name,
                     "local_world_size": "SLURM_NTASKS_PER_NODE"},
        )
        per_node = tasks_per_node(env.str("SLURM_TASKS_PER_NODE"))
        if layout.local_world_size is None and per_node and len(set(per_node)) == 1:
            layout.local_world_size = per_node[0]
            layout.sources["local_world_size"] = "SLURM_TASKS_PER_NODE"
        if per_node and len(set(per_node)) > 1:
            layout.notes.append(
                f"SLURM_TASKS_PER_NODE={env.str('SLURM_TASKS_PER_NODE')}: nodes run different "
                "numbers of tasks, so ranks are not nodes x GPUs.")
        if None not in (layout.world_size, layout.num_nodes, layout.local_world_size):
            layout.agreements.append(Agreement(
                "world_size", layout.source("world_size"), layout.world_size,
                f"{layout.source('num_nodes')} x {layout.source('local_world_size')}",
                layout.num_nodes * layout.local_world_size,
                "Request tasks per node rather than a total: #SBATCH --nodes=N and "
                "--ntasks-per-node=M (one task per GPU)."))
        self._agree(layout, env, "world_size", layout.source("world_size"), layout.world_size,
                    "WORLD_SIZE", "Export WORLD_SIZE=$SLURM_NTASKS (or leave it unset).")
        self._agree(layout, env, "rank", "SLURM_PROCID", layout.rank, "RANK",
                    "Export RANK=$SLURM_PROCID in the srun step (or leave it unset).")
        self._agree(layout, env, "local_rank", "SLURM_LOCALID", layout.local_rank, "LOCAL_RANK",
                    "Export LOCAL_RANK=$SLURM_LOCALID in the srun step (or leave it unset).")
        return finish(layout, env)


class SlurmBatchLauncher(Launcher):
    """A Slurm batch script running without srun: one process on the first node only.

    Reads SLURM_JOB_ID, SLURM_NNODES / SLURM_JOB_NUM_NODES, SLURM_NTASKS,
    SLURM_NTASKS_PER_NODE.
    """

    name = "slurm-batch"
    title = "Slurm batch script (no srun)"
    variables: tuple[str, ...] = ("SLURM_JOB_ID", "SLURM_NNODES", "SLURM_JOB_NUM_NODES",
                                   "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE")
    master_required = False

    @staticmethod
    def detect(env: Mapping[str, str]) -> str | None:
        for name in ("SLURM_JOB_ID", "SLURM_JOBID"):
            if name in env:
                return f"{name} is set but no srun step variables (SLURM_STEP_ID): a batch script"
        return None

    def read(self, env: EnvReader, reason: str) -> Layout:
        nnodes_name = "SLURM_NNODES" if env.has("SLURM_NNODES") else "SLURM_JOB_NUM_NODES"
        layout = self._layout(
            env, reason,
            num_nodes=env.int(nnodes_name, minimum=1),
            local_world_size=env.int("SLURM_NTASKS_PER_NODE", minimum=1),
            sources={"num_nodes": nnodes_name, "local_world_size": "SLURM_NTASKS_PER_NODE"},
        )
        ntasks = env.int("SLURM_NTASKS", minimum=1)
        if ntasks is not None and ntasks > 1:
            layout.notes.append(
                f"SLURM_NTASKS={ntasks} but this process was not started by srun: only one "
                "process runs. Start training with `srun python train.py` so every task runs.")
            layout.advice = LaunchAdvice(False, layout.notes[-1], "Prefix the training command "
                                         "with srun so Slurm starts one task per GPU: srun python "
                                         "train.py ...")
        return finish(layout, env)
