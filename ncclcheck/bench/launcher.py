"""The standalone launcher: start one worker process per rank, watch them, tear them down.

Workers report progress and their outcome as JSON lines on stdout (see worker.py). The parent
never imports torch: it only starts processes, reads lines and enforces the deadline, so a
rank that stops answering is killed and named rather than waited on.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .worker import EVENT_PREFIX, SweepConfig

# After one rank reports a timeout, the others get this long to report before teardown.
GRACE_S = 2.0


@dataclass
class LaunchResult:
    """Every rank's outcome (as dicts), and what the parent saw of the ranks that gave none."""

    outcomes: dict[int, dict[str, Any]] = field(default_factory=dict)
    torn_down: list[int] = field(default_factory=list)   # killed at the deadline, no outcome
    exited: dict[int, int] = field(default_factory=dict)  # rank -> exit status without outcome
    stderr_tail: dict[int, str] = field(default_factory=dict)
    progress: dict[int, int] = field(default_factory=dict)  # see progress_mark()


def progress_mark(event: dict[str, Any]) -> int | None:
    """How far a rank got, as one number: 2*step when it started a size, 2*step+1 once it
    finished the size's warm-up and went on to the timed loop."""
    if event.get("event") == "start":
        return 2 * int(event["step"])
    if event.get("event") == "timed":
        return 2 * int(event["step"]) + 1
    return None


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def worker_env(env: Mapping[str, str], backend: str) -> dict[str, str]:
    """The workers' environment: the caller's, plus single-host defaults it did not set."""
    out = dict(env)
    out.pop("NCCLCHECK_BENCH_FAULT", None)
    if backend == "gloo":
        out.setdefault("GLOO_SOCKET_IFNAME", "lo")  # one host: talk over loopback
    else:
        # abort the communicators on error, but let the worker report before it exits
        out.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2")
    out.setdefault("OMP_NUM_THREADS", "1")
    return out


def _pump(rank: int, stream: Any, events: "queue.Queue[tuple[int, str, str]]", name: str) -> None:
    for line in iter(stream.readline, ""):
        events.put((rank, name, line))
    events.put((rank, name + "-eof", ""))


def launch(config: SweepConfig, nproc: int, env: Mapping[str, str], deadline: float,
           on_event: Callable[[dict[str, Any]], None] | None = None) -> LaunchResult:
    """Run the sweep on ``nproc`` local processes; return by ``deadline`` (time.monotonic())."""
    events: "queue.Queue[tuple[int, str, str]]" = queue.Queue()
    procs: dict[int, subprocess.Popen[str]] = {}
    tails: dict[int, deque[str]] = {}
    result = LaunchResult()
    try:
        _start_workers(config, nproc, worker_env(env, config.backend), events, procs, tails)
        _follow(events, 2 * nproc, deadline, result, tails, on_event)
    finally:
        _tear_down(procs, events, result, tails)
    return result


def _start_workers(config: SweepConfig, nproc: int, child_env: dict[str, str],
                   events: "queue.Queue[tuple[int, str, str]]",
                   procs: dict[int, subprocess.Popen[str]], tails: dict[int, deque[str]]) -> None:
    """One worker process per rank, each with a thread per output stream feeding ``events``."""
    port = free_port()
    group = 0  # 0: the first worker makes a new process group; the others join it
    for rank in range(nproc):
        spec = {"config": json.loads(config.to_json()), "rank": rank, "world_size": nproc,
                "master_addr": "127.0.0.1", "master_port": port}
        argv = [sys.executable, "-m", "ncclcheck.bench.worker", json.dumps(spec)]
        try:
            proc = _spawn(argv, child_env, group)
        except (PermissionError, ProcessLookupError, OSError):  # the group is gone: a new one
            proc = _spawn(argv, child_env, 0)
        group = group or proc.pid
        procs[rank] = proc
        tails[rank] = deque(maxlen=20)
        for name, stream in (("out", proc.stdout), ("err", proc.stderr)):
            threading.Thread(target=_pump, args=(rank, stream, events, name),
                             daemon=True).start()


def _spawn(argv: list[str], env: dict[str, str], group: int) -> subprocess.Popen[str]:
    """A worker in process group ``group`` (0: its own), apart from this process's group, so
    that teardown is one signal to the group, whatever --nproc."""
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, process_group=group)


def _follow(events: "queue.Queue[tuple[int, str, str]]", open_streams: int, deadline: float,
            result: LaunchResult, tails: dict[int, deque[str]],
            on_event: Callable[[dict[str, Any]], None] | None) -> None:
    """Read the workers' lines until every stream closed or ``deadline``; a failed rank
    shortens the wait, since the others will fail soon or hang."""
    give_up = deadline
    while open_streams and time.monotonic() < give_up:
        try:
            rank, name, line = events.get(timeout=max(0.01, min(0.2, give_up - time.monotonic())))
        except queue.Empty:
            continue
        if name.endswith("-eof"):
            open_streams -= 1
        elif name == "err":
            tails[rank].append(line.rstrip())
        elif line.startswith(EVENT_PREFIX):
            event = json.loads(line[len(EVENT_PREFIX):])
            mark = progress_mark(event)
            if mark is not None:
                result.progress[rank] = max(result.progress.get(rank, -1), mark)
            if event.get("event") == "result":
                result.outcomes[rank] = event["outcome"]
                if event["outcome"].get("error"):
                    give_up = min(give_up, time.monotonic() + GRACE_S)
            elif on_event is not None:
                on_event(event)


def _tear_down(procs: dict[int, subprocess.Popen[str]],
               events: "queue.Queue[tuple[int, str, str]]", result: LaunchResult,
               tails: dict[int, deque[str]]) -> None:
    """Stop the workers still running (torn down), note how the others exited, keep stderr."""
    for rank, proc in procs.items():
        if proc.poll() is None and rank not in result.outcomes:
            result.torn_down.append(rank)
    stop_groups({_group(p) for p in procs.values()} - {None}, list(procs.values()))
    for rank, proc in procs.items():
        code = proc.wait()
        if rank not in result.outcomes and rank not in result.torn_down:
            result.exited[rank] = code
    while not events.empty():  # lines that arrived while tearing down
        rank, name, line = events.get_nowait()
        if name == "err":
            tails[rank].append(line.rstrip())
    result.stderr_tail = {r: "\n".join(t) for r, t in tails.items() if t}


def _group(proc: subprocess.Popen[str]) -> int | None:
    try:
        return os.getpgid(proc.pid)
    except ProcessLookupError:
        return None


def stop_groups(groups: set[int], procs: list[subprocess.Popen[str]], grace: float = 1.0) -> None:
    """SIGTERM every worker group at once, then SIGKILL what is left after ``grace`` seconds in
    all (a worker stuck in a collective may ignore TERM): teardown takes about ``grace``
    whatever the number of workers, and the workers' children go with them."""
    own = os.getpgrp()
    groups.discard(own)  # never this process's own group
    for group in groups:
        _signal_group(group, signal.SIGTERM)
    stop = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, stop - time.monotonic()))
        except subprocess.TimeoutExpired:
            break
    for group in groups:
        _signal_group(group, signal.SIGKILL)


def _signal_group(group: int, sig: int) -> None:
    try:
        os.killpg(group, sig)
    except (ProcessLookupError, PermissionError):
        pass
