"""Finding the job's processes on this node without being told their pids.

A training rank is a Python process whose environment holds a launcher's rank variable (RANK,
LOCAL_RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK) or whose parent is a launcher
(torchrun, srun, mpirun). Its own children inherit that environment (DataLoader workers, the
debug server's frontend, compile workers), and a shell wrapper between srun and Python holds it
too, so of a chain of processes with the same rank the topmost Python one is the rank. The
launchers themselves, this command and everything it starts are never taken.

Where the environment cannot be read (another user's process without ptrace rights), a child of
a launcher is still found by its parent's command line, which anyone may read. Lightning's own
launcher is its rank 0: the script's process sets LOCAL_RANK for the children it starts, in its
own memory only (/proc shows the environment a process started with), so a Python process whose
children carry LOCAL_RANK and which has none is their local rank 0.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Mapping

from ncclcheck.hang.procstate import Gone, read_stat
from ncclcheck.launchers import read_layout
from ncclcheck.redact import redact_env, redact_text

# A launcher's variable that says which rank a process is.
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                  "PMIX_RANK")
# Variables kept in a snapshot: the job's shape and the settings that change how it hangs.
KEPT_PREFIXES = ("NCCL_", "TORCH_", "TORCHELASTIC_", "GLOO_", "SLURM_", "OMPI_COMM_WORLD_",
                 "PMI_", "PMIX_RANK", "MASTER_", "CUDA_VISIBLE_DEVICES", "NCCLCHECK_")
KEPT_NAMES = frozenset({"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                        "NODE_RANK", "ROLE_RANK", "GROUP_WORLD_SIZE", "HOSTNAME"})
_LAUNCHER_WORDS = re.compile(
    r"(?:^|[/\s])(?:torchrun|srun|slurmstepd|mpirun|mpiexec|orterun|prterun|orted|prted|"
    r"hydra_pmi_proxy|jsrun)(?:\s|$)|torch\.distributed\.(?:run|launch)\b")
# ncclcheck's own commands (never `-m ncclcheck.hang.armed train.py`, which is a rank)
_NCCLCHECK = re.compile(r"(?:^|[/\s])ncclcheck(?:\s|$)|-m\s+ncclcheck(?:\s|$)")
_PYTHON = re.compile(r"(?:^|/)(?:python[\d.]*|pypy[\d.]*)(?:-dbg)?$")


@dataclass
class Found:
    """A process of the job, as /proc shows it."""

    pid: int
    ppid: int
    comm: str
    cmdline: list[str]
    env: dict[str, str] | None          # None: not readable (another user, no ptrace rights)
    python: bool
    start_ticks: int
    children: list[int] = field(default_factory=list)
    launcher_pid: int | None = None     # the nearest launcher above it (torchrun, slurmstepd)

    @property
    def identity(self) -> tuple[str | None, ...] | None:
        """The rank variables' values, which its own children share; None when unknown."""
        if self.env is None:
            return None
        values = tuple(self.env.get(name) for name in RANK_VARIABLES)
        return values if any(v is not None for v in values) else None

    def kept_env(self) -> dict[str, str]:
        """The variables a snapshot keeps, secret-looking values masked."""
        env = self.env or {}
        kept = {k: v for k, v in env.items()
                if k in KEPT_NAMES or k.startswith(KEPT_PREFIXES)}
        return redact_env(dict(sorted(kept.items())))

    def command(self) -> str:
        return redact_text(" ".join(self.cmdline))[:500]


@dataclass(frozen=True)
class Place:
    """A process's place in the job, as its launcher's variables say."""

    rank: int | None
    local_rank: int | None
    world_size: int | None
    local_world_size: int | None
    launcher: str | None


def read_environ(pid: int) -> dict[str, str] | None:
    """/proc/PID/environ as a dict (the environment the process started with); None when the
    kernel refuses (another user's process without ptrace rights)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    env = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name:
            env[name.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


def read_cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def is_launcher(cmdline: list[str], comm: str) -> bool:
    """Whether a process is a launcher rather than a rank."""
    return bool(_LAUNCHER_WORDS.search(" " + " ".join(cmdline[:4]) + " ")) or comm in (
        "torchrun", "srun", "slurmstepd", "mpirun", "mpiexec", "orted", "prted")


def is_ncclcheck(cmdline: list[str]) -> bool:
    """Whether a process is an ncclcheck command (another node's snapshot, a probe)."""
    return bool(_NCCLCHECK.search(" " + " ".join(cmdline[:4]) + " "))


def _is_python(cmdline: list[str], comm: str, pid: int) -> bool:
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        exe = ""
    names = [exe, cmdline[0] if cmdline else "", comm]
    return any(_PYTHON.search(name.removesuffix(" (deleted)")) for name in names if name) or \
        comm == "pt_main_thread"


def place_of(env: Mapping[str, str] | None) -> Place:
    """Rank, local rank, world sizes and launcher read from a process's environment."""
    if not env:
        return Place(None, None, None, None, None)
    layout, _ = read_layout(env)
    if layout.single_process:  # no launcher's variable: its place in a job is unknown
        return Place(None, None, None, None, None)
    return Place(layout.rank, layout.local_rank, layout.world_size, layout.local_world_size,
                 layout.launcher)


def _all_processes() -> dict[int, Found]:
    table: dict[int, Found] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            stat = read_stat(pid)
        except Gone:
            continue
        if stat.state in ("Z", "X"):
            continue
        table[pid] = Found(pid, stat.ppid, stat.comm, read_cmdline(pid), None, False,
                           stat.start_ticks)
    for found in table.values():
        parent = table.get(found.ppid)
        if parent is not None:
            parent.children.append(found.pid)
    return table


def _mine(table: dict[int, Found]) -> set[int]:
    """This process, its ancestors and its descendants: never part of the job."""
    me = os.getpid()
    mine = {me}
    pid = table[me].ppid if me in table else 0
    while pid in table and pid not in mine:
        mine.add(pid)
        pid = table[pid].ppid
    todo = [me]
    while todo:
        for child in table.get(todo.pop(), Found(0, 0, "", [], None, False, 0)).children:
            if child not in mine:
                mine.add(child)
                todo.append(child)
    return mine


def _same_netns(pids: list[int]) -> list[int]:
    """The pids in this process's network namespace (a pod's, a node's), when any is; else all
    (this command runs beside the job's containers, on their host)."""
    try:
        mine = os.readlink("/proc/self/ns/net")
    except OSError:
        return pids
    same = []
    for pid in pids:
        try:
            if os.readlink(f"/proc/{pid}/ns/net") == mine:
                same.append(pid)
        except OSError:
            same.append(pid)  # unreadable: cannot tell, keep it
    return same or pids


def find_job() -> list[Found]:
    """The rank processes of every job on this node, by pid (jobs.py tells the jobs apart)."""
    table = _all_processes()
    mine = _mine(table)
    candidates: dict[int, Found] = {}
    for pid, found in table.items():
        if pid in mine or is_launcher(found.cmdline, found.comm) or is_ncclcheck(found.cmdline):
            continue
        parent = table.get(found.ppid)
        launched = parent is not None and is_launcher(parent.cmdline, parent.comm)
        found.env = read_environ(pid)
        marked = found.env is not None and any(v in found.env for v in RANK_VARIABLES)
        if marked or launched:
            found.python = _is_python(found.cmdline, found.comm, pid)
            candidates[pid] = found
    for parent in _launching_ranks(candidates, table, mine):
        candidates[parent.pid] = parent
    kept = [f for f in candidates.values() if not _shadowed(f, candidates, table)]
    for found in kept:
        found.launcher_pid = _launcher_above(found, table)
    pids = _same_netns(sorted(f.pid for f in kept))
    return [candidates[p] for p in pids]


def _launching_ranks(candidates: dict[int, Found], table: dict[int, Found],
                     mine: set[int]) -> list[Found]:
    """Lightning's rank 0: the Python parent, itself unmarked, of ranks that carry LOCAL_RANK;
    its place is read from theirs (local rank 0 of the same node and world)."""
    found = []
    for child in list(candidates.values()):
        parent = table.get(child.ppid)
        if parent is None or parent.pid in candidates or parent.pid in mine or not child.env \
                or "LOCAL_RANK" not in child.env or any(f.pid == parent.pid for f in found):
            continue
        parent.env = read_environ(parent.pid)
        if parent.env is None or any(v in parent.env for v in RANK_VARIABLES) or is_launcher(
                parent.cmdline, parent.comm) or not _is_python(parent.cmdline, parent.comm,
                                                                 parent.pid):
            continue
        parent.python = True
        parent.env = {**parent.env, "LOCAL_RANK": "0", **{
            k: child.env[k] for k in ("NODE_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
            if k in child.env}}
        found.append(parent)
    return found


def _launcher_above(found: Found, table: dict[int, Found]) -> int | None:
    pid = found.ppid
    while pid in table and pid > 1:
        if is_launcher(table[pid].cmdline, table[pid].comm):
            return pid
        pid = table[pid].ppid
    return None


def _shadowed(found: Found, candidates: dict[int, Found], table: dict[int, Found]) -> bool:
    """A child that inherited a rank's identity (a DataLoader worker) or a wrapper around the
    Python rank (a shell between srun and python) is not a rank of its own."""
    identity = found.identity
    pid = found.ppid
    while pid in table:
        ancestor = candidates.get(pid)
        if ancestor is not None and ancestor.python and (
                identity is None or ancestor.identity in (None, identity)):
            return True
        pid = table[pid].ppid
    if found.python:
        return False
    todo = list(found.children)
    while todo:
        pid = todo.pop()
        child = candidates.get(pid)
        if child is not None and child.python and child.identity in (None, identity):
            return True
        todo.extend(table[pid].children if pid in table else ())
    return False


def named(pids: list[int]) -> tuple[list[Found], list[int]]:
    """The processes given by ``--pid``, and the pids that name no running process."""
    found, missing = [], []
    for pid in pids:
        try:
            stat = read_stat(pid)
        except Gone:
            missing.append(pid)
            continue
        if stat.state in ("Z", "X"):
            missing.append(pid)
            continue
        cmdline = read_cmdline(pid)
        found.append(Found(pid, stat.ppid, stat.comm, cmdline, read_environ(pid),
                           _is_python(cmdline, stat.comm, pid), stat.start_ticks))
    return found, missing
