"""Slurm: tasks started by srun, and batch scripts that never called srun."""

from __future__ import annotations

import re
from typing import Mapping

from .base import Agreement, EnvReader, LaunchAdvice, Launcher, Layout, finish
from .hostlist import expand_hostlist

_SRUN_MARKERS = ("SLURM_STEP_ID", "SLURM_STEPID", "SLURM_STEP_NUM_TASKS")
# The step's own node list first: rank 0 of an srun step runs on the step's first node, which
# need not be the allocation's first node (srun -w / --relative). SLURM_NODELIST is the name
# Lightning reads.
NODELIST_NAMES = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
JOB_ID_NAMES = ("SLURM_JOB_ID", "SLURM_JOBID")
PORT_BASE = 15000  # Lightning's SLURMEnvironment: 15000 + the job id's last four digits
HOSTLIST_TIMEOUT_S = 2.0


def job_id(env: Mapping[str, str]) -> str | None:
    """The Slurm job this process runs in (SLURM_JOB_ID, or the older SLURM_JOBID)."""
    return next((env[name] for name in JOB_ID_NAMES if env.get(name)), None)


def inside_job(env: Mapping[str, str]) -> bool:
    """Whether this process runs inside a Slurm job (an allocation, a batch script or a step)."""
    return any(name in env for name in JOB_ID_NAMES)


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


def port_from_job_id(job_id: str) -> int | None:
    """Lightning's SLURMEnvironment port: 15000 + the job id's last four digits (15000-24999);
    every task of the job computes the same one. None when the id is not a number."""
    tail = job_id.strip()[-4:]
    return PORT_BASE + int(tail) if tail.isdigit() else None


def first_node(hostlist: str, env: Mapping[str, str]) -> tuple[str | None, str]:
    """The first host of a Slurm hostlist and what expanded it. A plain first name needs no
    expansion; a bracketed one goes to ``scontrol show hostnames`` (the parser without it)."""
    head = hostlist.strip().split(",")[0].split()[0] if hostlist.strip() else ""
    if head and "[" not in head:
        return head, "parser"
    try:
        expanded = expand_hostlist(hostlist, timeout=HOSTLIST_TIMEOUT_S, env=env)
    except ValueError:
        return None, "malformed"
    return expanded.first, expanded.source


def derive_rendezvous(layout: Layout, env: EnvReader) -> None:
    """Rank 0's host and the store port where MASTER_ADDR / MASTER_PORT are not exported, as
    Lightning's SLURMEnvironment derives them: the node list's first host and 15000 + the job
    id's last four digits. ``layout.sources`` says where each value came from."""
    if layout.master_addr is not None:
        layout.sources["master_addr"] = "MASTER_ADDR"
    else:
        name = next((n for n in NODELIST_NAMES if env.has(n)), None)
        hostlist = env.str(name) if name else None
        host, how = first_node(hostlist, env.env) if hostlist else (None, "")
        if host:
            layout.master_addr = host
            layout.sources["master_addr"] = f"{name} (first host, expanded by {how})"
        elif hostlist:
            layout.notes.append(f"{name}={hostlist!r} is not a hostlist: rank 0's host unknown")
    if layout.master_port is not None:
        layout.sources["master_port"] = "MASTER_PORT"
    elif not env.has("MASTER_PORT"):
        name = next((n for n in JOB_ID_NAMES if env.has(n)), None)
        port = port_from_job_id(env.str(name) or "") if name else None
        if port is not None:
            layout.master_port = port
            layout.sources["master_port"] = f"{name} (15000 + last four digits, as Lightning)"


class SlurmLauncher(Launcher):
    """Tasks started by srun (one task per GPU).

    Reads SLURM_PROCID (global rank), SLURM_NTASKS / SLURM_NPROCS (world size), SLURM_LOCALID
    (local rank), SLURM_NODEID (node rank), SLURM_NNODES / SLURM_JOB_NUM_NODES (node count),
    SLURM_NTASKS_PER_NODE, SLURM_TASKS_PER_NODE, and RANK / WORLD_SIZE / LOCAL_RANK when the
    job script exports them too. Rank 0's address and port are MASTER_ADDR / MASTER_PORT when
    exported, else derived as Lightning does: the first host of SLURM_STEP_NODELIST /
    SLURM_JOB_NODELIST / SLURM_NODELIST, and 15000 + the last four digits of SLURM_JOB_ID.
    """

    name = "slurm"
    title = "Slurm (srun)"
    variables: tuple[str, ...] = ("SLURM_PROCID", "SLURM_STEP_ID", "SLURM_NTASKS", "SLURM_NPROCS",
                                   "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NNODES",
                                   "SLURM_JOB_NUM_NODES", "SLURM_NTASKS_PER_NODE",
                                   "SLURM_TASKS_PER_NODE", "SLURM_STEP_NODELIST",
                                   "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_JOB_ID",
                                   "RANK", "WORLD_SIZE", "LOCAL_RANK")
    rank_formula_guaranteed = False  # --distribution=cyclic numbers tasks round-robin
    master_required = False  # derived from SLURM_NODELIST / SLURM_JOB_ID; torch env:// needs it

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
        derive_rendezvous(layout, env)
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
        for name in JOB_ID_NAMES:
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
