"""The body of `ncclcheck hang` (the click command in ncclcheck/cli.py stays a few lines).

The snapshot is written as the files ``--out`` keeps (or into a temporary folder) and explained
by explain's own engine, reading those files: the live command and ``ncclcheck explain DIR``
on the same snapshots print the same findings, in the same document.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any

from ncclcheck.explain.engine import explain_sources
from ncclcheck.explain.reader import Source
from ncclcheck.hang import discover, files
from ncclcheck.hang.jobs import JobChoice, choose
from ncclcheck.hang.frames import deciding_thread
from ncclcheck.hang.model import ProcessSnapshot
from ncclcheck.hang.procstate import moved
from ncclcheck.hang.snapshot import Request, Taken, take
from ncclcheck.hang.verdict import Verdict, judge_job, see
from ncclcheck.redact import redact_value_tree
from ncclcheck.report import render
from ncclcheck.report.formats import HANG

MAX_COPIED_DUMP = 256 << 20   # a dump the job wrote is copied into --out up to this size
MAX_FRAMES = 64               # frames of each process's deciding thread in the JSON document


@dataclass(frozen=True)
class HangArgs:
    """The command's options, as given."""

    pids: tuple[int, ...]
    job: str | None
    out: str | None
    fmt: str
    timeout: float
    samples: int
    interval: float
    exit_code: bool


def _writable_folder(path: str) -> str | None:
    """Why ``path`` cannot take the snapshot's files, or None (created when missing)."""
    try:
        os.makedirs(path, exist_ok=True)
        handle, probe = tempfile.mkstemp(prefix=".ncclcheck-probe-", dir=path)
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def run_hang(args: HangArgs, usage_error: type[Exception]) -> int:
    """Snapshot, write, explain, print; return the exit code."""
    if args.out is not None:
        why = _writable_folder(args.out)
        if why:
            raise usage_error(f"--out {args.out}: cannot write there ({why})")
    if args.pids:
        found, missing = discover.named(list(args.pids))
        if missing:
            raise usage_error(f"--pid {', '.join(map(str, missing))}: no such process")
    else:
        try:
            found = choose(discover.find_job(), args.job, os.environ.get("SLURM_JOB_ID"))
        except JobChoice as exc:
            raise usage_error(str(exc)) from None
    taken = take(Request(args.pids, args.samples, args.interval, args.timeout, job=args.job),
                 found)
    with tempfile.TemporaryDirectory(prefix="ncclcheck-hang-") as scratch:
        folder = args.out or scratch
        written = files.write(taken.node, folder, taken.dumps)
        dumps = [Source(_shown(p, args.out), p) for p in written
                 if not os.path.basename(p).startswith("hang-")]
        dumps += _job_dumps(taken, args.out)
        snapshots = [Source(_shown(p, args.out), p) for p in written
                     if os.path.basename(p).startswith("hang-")]
        result = explain_sources([], model=None, dumps=dumps, snapshots=snapshots)
    document = result.to_dict()
    verdict = judge_job(taken.node.processes, [taken.node])
    document["hang"] = summary(taken, verdict, args.out)
    print(render(HANG, document, args.fmt))
    return 1 if args.exit_code and result.failed else 0


def _shown(path: str, out: str | None) -> str:
    """A written file as findings name it: its path under --out, else its name alone."""
    return path if out else os.path.basename(path)


def _job_dumps(taken: Taken, out: str | None) -> list[Source]:
    """Dumps the job wrote already: copied into --out (so the folder explains alone), else read
    where they are."""
    sources = []
    for path in taken.dump_paths:
        target = path
        if out:
            try:
                if os.path.getsize(path) <= MAX_COPIED_DUMP:
                    target = os.path.join(out, os.path.basename(path))
                    if os.path.abspath(target) != os.path.abspath(path):
                        shutil.copyfile(path, target)
            except OSError:
                target = path
        sources.append(Source(target, target))
    return sources


def _stack(proc: ProcessSnapshot) -> list[str]:
    """The deciding thread's frames at the last sample, innermost first."""
    for sample in reversed(proc.samples):
        thread = deciding_thread(sample.threads, proc.pid)
        if thread is not None:
            return [f"{f.function} ({f.file}:{f.line})" for f in thread.frames[:MAX_FRAMES]]
    return []


def summary(taken: Taken, verdict: Verdict, out: str | None) -> dict[str, Any]:
    """What the table shows beside the findings: the node, every group, every process."""
    node = taken.node
    processes = []
    for proc in node.processes:
        seen = see(proc)
        states = [s.state for s in proc.samples if s.state is not None]
        cpu, _ = moved(states[0], states[-1]) if len(states) > 1 else (None, None)
        last = states[-1] if states else None
        processes.append({
            "rank": proc.rank, "local_rank": proc.local_rank, "host": proc.host,
            "pid": proc.pid, "launcher": proc.launcher, "source": proc.source,
            "exited": proc.exited, "state": last.state if last else None,
            "threads": last.threads if last else None, "wchan": last.wchan if last else None,
            "cpu_s": cpu, "wakeups_per_s": None if seen.wakeups_per_s is None
            else round(seen.wakeups_per_s, 1), "stuck": seen.stuck,
            "where": seen.last.describe() if seen.last else None,
            "thread": seen.last.thread if seen.last else None,
            "stack": _stack(proc),
            "problems": [p.to_dict() for p in proc.problems], "fr_dump": proc.fr_dump})
    return redact_value_tree({
        "host": node.host, "taken_at": node.taken_at, "samples": node.samples,
        "interval_s": node.interval_s, "duration_s": round(node.duration_s, 3),
        "outcome": verdict.outcome, "world_size": verdict.world_size,
        "groups": [g.to_dict() for g in verdict.groups], "processes": processes,
        "gone": [g.to_dict() for g in node.gone], "missing": verdict.missing,
        "ras": node.ras, "notes": node.notes, "out": out})
