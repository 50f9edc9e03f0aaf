"""One node's snapshot: find the job's processes, look at each a few times, note the ranks gone,
ask NCCL's RAS, collect flight-recorder dumps.

Every step runs under one deadline (``--timeout``): processes are read in parallel, each read
bounded by what is left, and a process not read in time is noted, never waited for. Nothing is
written to, paused or changed in a target: py-spy reads without stopping it; the debug server
and the armed hook are the process's own answers to a question it was made to expect. A
process that exits meanwhile is noted as such.
"""

from __future__ import annotations

import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ncclcheck.hang import debugserver, pyspy, ras
from ncclcheck.hang.discover import Found, find_job, named, place_of
from ncclcheck.hang.jobs import choose
from ncclcheck.hang.model import GoneRank, NodeSnapshot, ProcessSnapshot, Problem, Sample
from ncclcheck.hang.procstate import Gone, read_state
from ncclcheck.hang.sources import Reader

MAX_WORKERS = 16
FR_PREFIX_VARIABLES = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")


@dataclass(frozen=True)
class Request:
    """What to look at and how long: ``pids`` empty means find the job's processes."""

    pids: tuple[int, ...] = ()
    samples: int = 3
    interval_s: float = 1.0
    timeout_s: float = 30.0
    armed_folder: str | None = None
    job: str | None = None           # which job, where the node runs several (jobs.py)


@dataclass
class Taken:
    """A node's snapshot and the flight-recorder dumps found beside it: (file name, bytes) taken
    from live processes, and paths of dumps the job already wrote."""

    node: NodeSnapshot
    dumps: list[tuple[str, bytes]] = field(default_factory=list)
    dump_paths: list[str] = field(default_factory=list)


class Deadline:
    """Seconds left of the command's --timeout."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self, cap: float | None = None) -> float:
        left = max(0.0, self.end - time.monotonic())
        return min(left, cap) if cap is not None else left


def _record(found: Found, host: str, reader: Reader) -> ProcessSnapshot:
    env = found.env if found.env is not None else (reader.marker.env if reader.marker else None)
    place = place_of(env)
    kept = found.kept_env() if found.env is not None else dict(env or {})
    return ProcessSnapshot(found.pid, host, place.rank, place.local_rank, place.world_size,
                           place.local_world_size, place.launcher, found.command(), kept)


def take(request: Request, found: list[Found] | None = None) -> Taken:
    """The snapshot of this node (``found``: processes already chosen, e.g. by --pid); raises
    jobs.JobChoice when several jobs run here and none is chosen."""
    deadline = Deadline(request.timeout_s)
    started = time.monotonic()
    host = socket.gethostname()
    if found is None:
        found = named(list(request.pids))[0] if request.pids else choose(
            find_job(), request.job, os.environ.get("SLURM_JOB_ID"))
    readers = {f.pid: Reader(f.pid) for f in found}
    spy = pyspy.pyspy_binary()
    notes = [] if spy else ["py-spy is not installed (pip install py-spy): stacks come only "
                            "from torch's debug server or armed processes"]
    avoid = {int(f.env["MASTER_PORT"]) for f in found
             if f.env and f.env.get("MASTER_PORT", "").isdigit()}
    samples: dict[int, list[Sample]] = {f.pid: [] for f in found}
    exited: set[int] = set()

    def look(pid: int, at: float) -> None:
        if pid in exited:
            return
        try:
            state = read_state(pid)
        except Gone:
            exited.add(pid)
            return
        reader = readers[pid]
        threads = reader.read(deadline.left(10.0), avoid, request.armed_folder, spy)
        if reader.gone:
            exited.add(pid)
            return
        samples[pid].append(Sample(at, state, threads))

    with ThreadPoolExecutor(max_workers=max(1, min(MAX_WORKERS, len(found)))) as pool:
        for n in range(max(1, request.samples)):
            due = started + n * request.interval_s
            if n and time.monotonic() < due:
                time.sleep(min(due - time.monotonic(), deadline.left()))
            if deadline.left() <= 0.05:
                notes.append(f"--timeout reached after {n} sample(s)")
                break
            at = time.monotonic() - started
            list(pool.map(lambda pid: look(pid, at), [f.pid for f in found]))
    processes = []
    for f in found:
        reader = readers[f.pid]
        record = _record(f, host, reader)
        record.samples = samples[f.pid]
        record.source = reader.way if reader.way not in (None, "none") else None
        record.problems = list(reader.problems)
        record.exited = f.pid in exited
        if record.exited and not record.samples:
            record.problems.append(Problem("the process exited before it could be read"))
        processes.append(record)
    taken = Taken(NodeSnapshot(host, datetime.now(timezone.utc).isoformat(timespec="seconds"),
                               max(1, request.samples), request.interval_s, 0.0, processes,
                               gone_ranks(processes, host), None, notes))
    _dumps(taken, readers, found, deadline, avoid)
    if deadline.left() > 1.0:
        address = next((f.env["NCCL_RAS_ADDR"] for f in found
                        if f.env and f.env.get("NCCL_RAS_ADDR")), None)
        report, why = ras.query(deadline.left(10.0), address)
        taken.node.ras = report.to_dict() if report else None
        if why:
            notes.append(why)
    if not found:
        notes.append("no training process on this node: none whose environment holds RANK, "
                     "LOCAL_RANK, SLURM_PROCID or OMPI_COMM_WORLD_RANK, or whose parent is "
                     "torchrun, srun or mpirun (give --pid PID to name them)")
    taken.node.duration_s = time.monotonic() - started
    return taken


def gone_ranks(processes: list[ProcessSnapshot], host: str) -> list[GoneRank]:
    """Local ranks the launcher started here that have no process now: every process found must
    know its local rank and agree on the node's local size, or nothing is said."""
    alive = [p for p in processes if not p.exited]
    sizes = {p.local_world_size for p in processes}
    locals_ = [p.local_rank for p in alive]
    gone = [GoneRank(p.rank, p.local_rank, host, "exited while it was being looked at", p.pid)
            for p in processes if p.exited]
    if not processes or None in locals_ or len(sizes) != 1 or None in sizes:
        return gone
    size = sizes.pop()
    bases = {p.rank - p.local_rank for p in processes
             if p.rank is not None and p.local_rank is not None}
    base = bases.pop() if len(bases) == 1 else None
    present = set(locals_) | {p.local_rank for p in processes if p.exited}
    for local in sorted(set(range(size or 0)) - present):  # type: ignore[arg-type]
        gone.append(GoneRank(base + local if base is not None else None, local, host,
                             f"no process for local rank {local} of {size} on {host}: it "
                             "exited or never started"))
    return gone


def _dumps(taken: Taken, readers: dict[int, Reader], found: list[Found], deadline: Deadline,
           avoid: set[int]) -> None:
    """Flight-recorder dumps: from the debug server or the armed hook (taken now), and those the
    job wrote already (its TORCH_FR_DUMP_TEMP_FILE prefix + rank). ``avoid``: the job's store
    ports, never asked anything."""
    for record in taken.node.processes:
        reader = readers[record.pid]
        data = reader.fr
        if data is None and not record.exited and deadline.left() > 0.5:
            # the debug server's flight recorder, also where py-spy read the stacks
            server = reader.server or debugserver.find(record.pid, avoid, deadline.left(2.0))
            data = server.flight_recorder(deadline.left(5.0)) if server else None
        if data:
            suffix = ".json" if data.lstrip()[:1] == b"{" else ".pkl"
            rank = record.rank if record.rank is not None else record.pid
            name = f"fr-{record.host}-{record.pid}-rank{rank}{suffix}"
            taken.dumps.append((name, data))
            record.fr_dump = name
    for f in found:
        env = f.env or {}
        rank = env.get("RANK")
        for variable in FR_PREFIX_VARIABLES:
            prefix = env.get(variable)
            if prefix and rank is not None and os.path.isfile(prefix + rank):
                taken.dump_paths.append(prefix + rank)
                break
