"""Property: rank 0's job report accounts for every process exactly once and says the same
thing whatever order the processes started in, on any mis-numbered launch.

Each example is a real launch on loopback (real interpreters, rank 0's real TCPStore) with
generated mis-numberings: duplicated ranks, gaps, out-of-range and negative ranks, a wrong
WORLD_SIZE, late joiners and a rank killed before it could connect. Every example runs twice,
in two start orders, once with the grouped JSON and once with --per-rank, and the two reports
must name the same failures.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow

TIMEOUT = 15  # room for every interpreter to import torch on a loaded 2-core host
STRIP = ("RANK", "WORLD_SIZE", "LOCAL_", "NODE_RANK", "GROUP_", "MASTER_", "SLURM", "OMPI_",
         "PMI_", "MPI_LOCAL", "PET_", "JSM_", "LSB_", "TORCHELASTIC", "NCCL_", "TORCH_NCCL",
         "GLOO_", "ROLE_")


@dataclass(frozen=True)
class Launch:
    """One mis-numbered launch: the rank each process claims (process 0 is the one rank 0),
    the WORLD_SIZE every process is told, which processes start late and which is killed."""

    ranks: tuple[int, ...]
    world_size: int
    late: frozenset[int] = frozenset()
    killed: int | None = None


@st.composite
def launches(draw) -> Launch:
    count = draw(st.integers(3, 8))
    ranks = list(range(count))
    for index in draw(st.lists(st.integers(1, count - 1), max_size=3, unique=True)):
        kind = draw(st.sampled_from(["duplicate", "outside", "negative", "gap"]))
        if kind == "duplicate":
            ranks[index] = draw(st.integers(1, count - 1))
        elif kind == "outside":
            ranks[index] = count + draw(st.integers(0, 3))
        elif kind == "negative":
            ranks[index] = -draw(st.integers(1, 2))
        else:  # a hole in 0..N-1: this process takes the next rank up
            ranks[index] = min(ranks[index] + 1, count + 4)
    world_size = draw(st.sampled_from([count, max(2, count // 2), count + 2]))
    late = draw(st.frozensets(st.integers(1, count - 1), max_size=2))
    killed = draw(st.none() | st.integers(1, count - 1))
    return Launch(tuple(ranks), world_size, late - {killed}, killed)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(launch: Launch, index: int, port: int, per_rank: bool) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(STRIP)}
    env.update(RANK=str(launch.ranks[index]), WORLD_SIZE=str(launch.world_size),
               LOCAL_RANK=str(index), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # The launch's own count (--nodes x --gpus-per-node) is the number of processes started.
    argv = [sys.executable, "-m", "ncclcheck", "ranks", "--nodes", "1", "--gpus-per-node",
            str(len(launch.ranks)), "--format", "json", "--timeout", str(TIMEOUT)]
    argv += ["--per-rank"] if per_rank else []
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


@dataclass
class Ran:
    code: int
    out: str
    err: str
    pid: int
    seconds: float  # from this process's start to its exit


def run(launch: Launch, order: list[int], per_rank: bool) -> dict[int, Ran]:
    """Start the processes in ``order`` (late ones 2 s after the rest), kill the killed one at
    once, and collect every one, its pipes drained as it runs."""
    port = free_port()
    procs: dict[int, tuple[subprocess.Popen, float]] = {}
    for index in [i for i in order if i not in launch.late] + [i for i in order if i in launch.late]:
        if index in launch.late and not any(i in launch.late for i in procs):
            time.sleep(2.0)
        procs[index] = (start(launch, index, port, per_rank), time.monotonic())
        if index == launch.killed:
            procs[index][0].send_signal(signal.SIGKILL)

    def wait(index: int) -> Ran:
        proc, began = procs[index]
        try:
            out, err = proc.communicate(timeout=TIMEOUT + 30)
        finally:
            if proc.poll() is None:
                proc.kill()
        return Ran(proc.returncode, out, err, proc.pid, time.monotonic() - began)

    with ThreadPoolExecutor(max_workers=len(procs)) as pool:
        return dict(zip(procs, pool.map(wait, procs)))


def failures(doc: dict) -> tuple:
    """What the report says is wrong, independent of arrival order: the failing job-wide
    checks with what they name, and every rank's failing checks as a multiset."""
    job = sorted((c["id"], c["category"], c["summary"], c["details"].get("where"))
                 for c in doc["checks"] if c["id"].startswith("cluster.") and c["status"] == "fail")
    per_rank = Counter((c["id"], c["rank"], c["status"]) for c in doc["checks"]
                       if not c["id"].startswith("cluster.") and c["status"] in ("fail", "error"))
    return job, sorted(per_rank.items())


def judge(launch: Launch, ran: dict[int, Ran], per_rank: bool) -> tuple:
    for index, result in ran.items():
        assert result.seconds <= TIMEOUT + 5, (index, result.seconds, result.err[-600:])
    doc = json.loads(ran[0].out)
    cluster = doc["context"]["cluster"]
    processes = cluster["processes"]
    alive = {r.pid for i, r in ran.items() if i != launch.killed}
    if per_rank:  # every process, each once
        assert Counter(p["pid"] for p in processes) == Counter(alive), processes
    else:  # those with a problem, each once; every process counted
        assert cluster["connected"] == len(alive), cluster
        assert all(p["problems"] for p in processes), processes
        assert Counter(p["pid"] for p in processes) <= Counter(alive), processes
        # every result of every process that reported is in a row's count, grouped or not
        for row in cluster["rows"]:
            if row["id"].startswith("ranks."):
                assert row["details"]["total"] == cluster["reported"], row
    for index, result in ran.items():
        if index not in (0, launch.killed):
            assert result.out.strip() == "" and result.code == ran[0].code, result.err[-600:]
    return failures(doc)


@settings(max_examples=2, derandomize=True, deadline=None, database=None,
          phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(launches())
@example(Launch((0, 1, 1, 9, -1, 3, 7, 6), world_size=4, late=frozenset({3}), killed=5))
def test_every_process_once_and_the_same_verdict_in_any_start_order(launch: Launch):
    forward = judge(launch, run(launch, list(range(len(launch.ranks))), False), False)
    backward = judge(launch, run(launch, list(range(len(launch.ranks) - 1, -1, -1)), True), True)
    assert forward == backward
