"""Cluster mode across real processes on loopback: real `python -m ncclcheck` ranks, a real
TCPStore hosted by rank 0, real kills. Nothing is faked; the ranks are configured with the
plain RANK / WORLD_SIZE / LOCAL_RANK / MASTER_* variables, as srun or a job script would set.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from procs import collect

from ncclcheck.cluster.ranges import parse_ranges

pytestmark = pytest.mark.slow

SCHEMA = Path(__file__).parents[1] / "docs" / "report.schema.json"

LAUNCH_PREFIXES = ("RANK", "WORLD_SIZE", "LOCAL_", "NODE_RANK", "GROUP_", "MASTER_", "SLURM",
                   "OMPI_", "PMI_", "MPI_LOCAL", "PET_", "JSM_", "LSB_", "TORCHELASTIC", "NCCL_",
                   "TORCH_NCCL", "GLOO_", "ROLE_")

# A rank whose probe stalls (so the test can kill it after it joined, before it reports).
STALLING_RANK = """
import sys, time
import ncclcheck.probes.ranks as ranks
def stall(ctx):
    sys.stderr.write("PROBING\\n"); sys.stderr.flush(); time.sleep(120)
ranks.probe = stall
from ncclcheck.cli import main
main()
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rank_env(rank: int, world: int, port: int, local_rank: int | None = None,
             **extra: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCH_PREFIXES)}
    env.update(RANK=str(rank), WORLD_SIZE=str(world),
               LOCAL_RANK=str(rank if local_rank is None else local_rank),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}  # None: leave the variable unset


def start(rank: int, world: int, port: int, timeout: float = 30, fmt: str = "json",
          script: str | None = None, args: tuple[str, ...] = (), **env) -> subprocess.Popen:
    argv = ["run", "--checks", "ranks", "--format", fmt, "--timeout", str(timeout), *args]
    head = [sys.executable, "-c", script, *argv] if script else [sys.executable, "-m", "ncclcheck", *argv]
    return subprocess.Popen(head, env=rank_env(rank, world, port, **env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(procs: list[subprocess.Popen], limit: float = 90) -> list[tuple[int, str, str]]:
    return collect(procs, limit)


def check(doc: dict, check_id: str) -> dict:
    return next(c for c in doc["checks"] if c["id"] == check_id)


def test_four_healthy_ranks_one_report_from_rank_0():
    port = free_port()
    outs = finish([start(r, 4, port) for r in range(4)])
    codes = [code for code, _, _ in outs]
    assert codes == [0, 0, 0, 0], outs
    doc = json.loads(outs[0][1])
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))  # the one documented JSON shape
    assert doc["status"] == "pass"
    # passing results are grouped per check: ranks as ranges, hosts counted
    grouped = [c for c in doc["checks"] if c.get("ranks") is not None]
    assert {c["id"] for c in grouped} >= {"ranks.rank", "ranks.launcher", "ranks.master"}
    assert all(parse_ranges(c["ranks"]) == [0, 1, 2, 3] and c["hosts"] == 1
               and c["status"] == "pass" and c["rank"] is None for c in grouped)
    assert len({c["id"] for c in grouped}) == len(grouped)  # one entry per check
    assert all(c["host"] and c["rank"] in (0, 1, 2, 3) for c in doc["checks"]
               if c["status"] != "pass" and not c["id"].startswith("cluster."))
    assert all(c["host"] for c in doc["checks"] if c.get("ranks") is None)
    assert check(doc, "cluster.reported")["status"] == "pass"
    assert doc["context"]["cluster"]["reported"] == 4
    rows = {r["id"]: r for r in doc["context"]["cluster"]["rows"]}
    assert rows["ranks.rank"]["details"]["counts"] == [{"status": "pass", "count": 4}]
    assert doc["context"]["cluster"]["processes"] == []  # only processes with a problem
    for code, out, err in outs[1:]:
        assert out == ""  # only rank 0 prints the job report
        assert len(err.strip().splitlines()) == 1 and "job status pass" in err


def test_ranks_that_never_start_are_named_within_the_deadline():
    port = free_port()
    began = time.monotonic()
    outs = finish([start(r, 4, port, timeout=10, args=("--gpus-per-node", "2")) for r in (0, 1)])
    elapsed = time.monotonic() - began
    assert [code for code, _, _ in outs] == [1, 1], outs
    assert elapsed < 10 + 15, elapsed  # deadline plus start-up and clean-up on a loaded machine
    doc = json.loads(outs[0][1])
    missing = check(doc, "cluster.reported")
    assert missing["status"] == "fail" and missing["category"] == "timeout"
    assert missing["details"]["missing_ranks"] == [2, 3]
    assert "ranks 2-3 never connected (expected on node 1, from which no rank connected)" \
        in missing["summary"]
    assert "job status fail" in outs[1][2]


def test_rank_killed_mid_run_is_named_with_its_host():
    port = free_port()
    procs = [start(r, 3, port, timeout=12) for r in range(2)]
    victim = start(2, 3, port, timeout=12, script=STALLING_RANK)
    procs.append(victim)
    try:
        assert victim.stderr.readline().strip() == "PROBING"  # joined the store, now probing
        os.kill(victim.pid, signal.SIGKILL)
        outs = finish(procs[:2])
    finally:
        victim.kill()
        victim.communicate()
    assert [code for code, _, _ in outs] == [1, 1], outs
    doc = json.loads(outs[0][1])
    missing = check(doc, "cluster.reported")
    assert missing["status"] == "fail" and missing["category"] == "rank_crashed"
    assert missing["details"]["missing"] == [
        {"rank": 2, "host": socket.gethostname().split(".")[0], "connected": True,
         "pid": victim.pid}]
    assert "connected, then stopped before reporting" in missing["summary"]


def test_rank_with_a_different_world_size_is_named():
    port = free_port()
    procs = [start(r, 3, port) for r in range(2)] + [start(2, 3, port, WORLD_SIZE="5")]
    outs = finish(procs)
    assert [code for code, _, _ in outs] == [1, 1, 1], outs  # every rank: the job's status
    doc = json.loads(outs[0][1])
    settings = check(doc, "cluster.settings")
    assert settings["status"] == "fail" and settings["category"] == "rank_mismatch"
    assert settings["details"]["differences"][0]["name"] == "WORLD_SIZE"
    assert settings["details"]["differences"][0]["ranks"] == [2]
    assert "WORLD_SIZE='5' on" in settings["summary"] and "rank 2" in settings["summary"]


def test_two_ranks_with_one_local_rank_on_a_host(tmp_path):
    port = free_port()
    junit = tmp_path / "job.xml"
    procs = [start(r, 3, port, local_rank=lr, fmt="table", args=("--junit", str(junit)))
             for r, lr in enumerate((0, 1, 1))]
    outs = finish(procs)
    assert [code for code, _, _ in outs] == [1, 1, 1], outs
    line = next(ln for ln in outs[0][1].splitlines() if "cluster.local_ranks" in ln)
    assert line.startswith("FAIL")
    xml = junit.read_text()  # written by rank 0 only, one testcase per row
    assert "LOCAL_RANK 1 is used by ranks 1-2" in xml
    assert xml.count('name="ranks.rank"') == 1


def test_port_taken_rank_0_says_so_and_others_cannot_reach_it():
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen(8)
        port = squatter.getsockname()[1]
        began = time.monotonic()
        outs = finish([start(0, 2, port, timeout=12), start(1, 2, port, timeout=12)])
        elapsed = time.monotonic() - began
    assert [code for code, _, _ in outs] == [1, 1], outs
    assert elapsed < 12 + 5 + 2  # + the interpreters' own start-up
    assert all("frame #" not in err for _, _, err in outs)  # no C++ stack dump from our store use
    doc = json.loads(outs[0][1])
    store = check(doc, "cluster.store")
    assert store["category"] == "port_in_use" and str(port) in store["summary"]
    own = json.loads(outs[1][1])  # rank 1 cannot join: its own report, the reason in it
    store = check(own, "cluster.store")
    assert store["category"] == "connection" and store["details"]["port"] == port
    assert check(own, "ranks.rank")["rank"] == 1
    note = outs[1][2].strip().splitlines()
    assert len(note) == 1 and "[connection]" in note[0] and "rank 1" in note[0]


def test_rank_alone_prints_its_own_report_with_the_port_it_could_not_reach():
    """No rank 0 anywhere, MASTER_ADDR resolvable: rank 6 of 4 says so itself, in one JSON
    document, within --timeout + 5 s, with nothing but our own lines on stderr."""
    port = free_port()  # nobody listens: rank 0 never started
    began = time.monotonic()
    (code, out, err), = finish([start(6, 4, port, timeout=10, local_rank=2,
                                      args=("--nodes", "2", "--gpus-per-node", "4"))])
    assert time.monotonic() - began < 10 + 5  # counted from the command's start
    assert code == 1
    doc = json.loads(out)  # exactly one document
    store = check(doc, "cluster.store")
    assert store["status"] == "fail" and store["category"] == "connection"
    assert store["details"] == {"address": "127.0.0.1", "port": port,
                                "error": store["details"]["error"]}
    assert f"127.0.0.1:{port}" in store["summary"] and "refused" in store["summary"]
    assert check(doc, "ranks.rank")["status"] == "fail"  # rank 6 cannot exist in a world of 4
    assert {c["rank"] for c in doc["checks"]} == {6}
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ncclcheck: rank 6"), err
    assert "frame #" not in err and "Warning" not in err


def test_every_process_claiming_rank_0_gives_one_report_naming_the_clash():
    """The motivating case's ClusterEnvironment defaults RANK to 0: every process is rank 0."""
    port = free_port()
    outs = finish([start(0, 2, port, local_rank=lr) for lr in range(2)])
    assert [code for code, _, _ in outs] == [1, 1], outs
    reports = [json.loads(out) for _, out, _ in outs if out.strip()]
    assert len(reports) == 1  # the first rank 0 reports; the others join its store
    ids = check(reports[0], "cluster.rank_ids")
    assert ids["status"] == "fail" and ids["category"] == "rank_mismatch"
    assert ids["summary"].startswith("global ranks are inconsistent: rank 0 is claimed by 2 "
                                     "processes")
    assert check(reports[0], "cluster.reported")["details"]["missing_ranks"] == [1]


def test_rank_0_killed_the_others_say_so_and_exit_1():
    port = free_port()
    host = start(0, 2, port, timeout=20, script=STALLING_RANK)
    other = start(1, 2, port, timeout=20)
    try:
        assert host.stderr.readline().strip() == "PROBING"  # the store is up
        time.sleep(1.0)
        os.kill(host.pid, signal.SIGKILL)
        began = time.monotonic()
        (code, out, err), = finish([other])
    finally:
        host.kill()
        host.communicate()
    assert time.monotonic() - began < 20 + 5
    assert code == 1
    store = check(json.loads(out), "cluster.store")  # its own report, the reason in it
    assert store["status"] == "fail" and store["details"]["port"] == port
    assert store["category"] in ("rank_crashed", "connection")
    note = err.strip().splitlines()
    assert len(note) == 1 and "rank 1" in note[0], err
    assert any(why in note[0] for why in ("lost the rank-0 store", "gave no job report",
                                          "cannot reach the rank-0 store"))


def test_no_job_to_join_each_process_reports_on_itself():
    """No MASTER_ADDR (mpirun sets none) or one that does not resolve: no rank can reach
    rank 0, so each process reports on itself and says why the job-wide checks are missing."""
    port = free_port()
    unset = start(0, 2, port, MASTER_ADDR=None)
    unresolved = start(1, 2, port, MASTER_ADDR="no-such-host.invalid")
    outs = finish([unset, unresolved])
    first, second = (json.loads(out) for _, out, _ in outs)
    store = check(first, "cluster.store")
    assert store["status"] == "warn" and store["category"] == "configuration"
    assert check(first, "ranks.master")["status"] == "fail"  # torch's env:// needs it too
    assert outs[0][0] == 1 and check(first, "ranks.rank")["status"] == "pass"
    assert outs[1][0] == 1
    store = check(second, "cluster.store")
    assert store["status"] == "fail" and store["category"] == "name_resolution"
    assert "no-such-host.invalid" in store["summary"]


def test_local_checks_this_process_at_once_under_a_launcher():
    """--local with a job's environment copied into a shell (WORLD_SIZE 4, rank 6, a
    MASTER_ADDR nobody answers at): this process's own report at once, no store row, no
    waiting for a rank 0."""
    began = time.monotonic()
    (code, out, err), = finish([start(6, 4, 29500, timeout=60, local_rank=2, MASTER_ADDR="192.0.2.1",
                                      args=("--local", "--nodes", "2", "--gpus-per-node", "4"))])
    assert time.monotonic() - began < 20  # nowhere near the 60 s a gather would wait
    assert code == 1, err
    doc = json.loads(out)
    assert not any(c["id"].startswith("cluster.") for c in doc["checks"])
    assert "cluster" not in doc["context"]
    assert check(doc, "ranks.rank")["status"] == "fail"  # rank 6 cannot exist in a world of 4
    assert check(doc, "ranks.world_size")["status"] == "fail"
    assert err.strip() == ""
