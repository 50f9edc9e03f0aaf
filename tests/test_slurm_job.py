"""ncclcheck inside a real srun step (tests/slurm.py): one job report without MASTER_*, and
``--on-fail drain`` draining this node with the failing check as the reason."""

from __future__ import annotations

import json
import socket
import sys
import time

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

NCCLCHECK = [sys.executable, "-m", "ncclcheck"]


def test_srun_run_gives_one_job_report_without_master_exports(slurm_cluster, tmp_path):
    assert not any(k.startswith("MASTER_") for k in slurm_cluster.env)
    done = slurm_cluster.run(["srun", "-N1", "-n2", *NCCLCHECK, "run", "--no-bench", "--format",
                              "json", "--timeout", "30"], timeout=120, cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(done.stdout)  # exactly one JSON document: rank 0's
    cluster = report["context"]["cluster"]
    assert (cluster["world_size"], cluster["connected"], cluster["reported"]) == (2, 2, 2)
    launcher = [c for c in report["checks"] if c["id"] == "ranks.launcher"]
    assert [(c["ranks"], c["hosts"]) for c in launcher] == [("0-1", 1)]  # grouped: both passed
    checks = {c["id"]: c for c in report["checks"] if c.get("rank") in (0, None)}
    assert checks["cluster.store"]["status"] == "pass"
    master = checks["ranks.master"]["details"]
    assert master["master_addr"] == socket.gethostname() == slurm_cluster.hostname
    assert 15000 <= master["master_port"] <= 24999
    assert master["sources"]["master_addr"].startswith("SLURM_STEP_NODELIST")
    assert master["sources"]["master_port"].startswith("SLURM_JOB_ID")
    assert checks["cluster.store"]["details"]["port"] == master["master_port"]
    assert "reported to rank 0" in done.stderr  # rank 1's one line


def test_srun_exported_master_values_win(slurm_cluster, tmp_path):
    port = _free_port()
    done = slurm_cluster.run(["srun", "-N1", "-n2", *NCCLCHECK, "ranks", "--format", "json",
                              "--timeout", "30"], timeout=120, cwd=tmp_path,
                             env={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    report = json.loads(done.stdout)
    master = next(c for c in report["checks"] if c["id"] == "ranks.master")
    assert master["status"] == "pass", master
    assert master["details"]["sources"] == {"master_addr": "MASTER_ADDR",
                                            "master_port": "MASTER_PORT"}
    store = next(c for c in report["checks"] if c["id"] == "cluster.store")
    assert store["details"]["port"] == port


def test_on_fail_drain_drains_this_node_with_the_failing_check_as_reason(slurm_cluster,
                                                                         tmp_path):
    host = slurm_cluster.hostname
    try:
        done = slurm_cluster.run(
            ["srun", "-N1", "-n2", *NCCLCHECK, "net", "--on-fail", "drain", "--format", "json",
             "--timeout", "30"], timeout=120, cwd=tmp_path, env={"NCCL_SOCKET_IFNAME": "eth9"})
        assert done.returncode == 1, done.stderr
        report = json.loads(done.stdout)
        failing = next(c for c in report["checks"] if c["id"] == "net.nccl_interface")
        assert failing["status"] == "fail" and failing["host"] == host
        drain = report["context"]["drain"]
        assert [(a["node"], a["drained"]) for a in drain["actions"]] == [(host, True)]
        reason = drain["actions"][0]["reason"]
        assert reason.startswith("ncclcheck: net.nccl_interface: ") and "eth9" in reason
        assert f"ncclcheck: --on-fail drain: drained {host} (" in done.stderr
        listed = slurm_cluster.run(["sinfo", "-R", "-h", "-o", "%n|%E"], timeout=10).stdout
        assert f"{host}|{reason}" in listed.splitlines(), listed
    finally:
        resume(slurm_cluster)


def test_on_fail_drain_drains_nothing_when_nothing_fails(slurm_cluster, tmp_path):
    done = slurm_cluster.run(["srun", "-N1", "-n1", *NCCLCHECK, "ranks", "--on-fail", "drain",
                              "--format", "json", "--timeout", "30"], timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["context"]["drain"]["actions"] == []
    assert "nothing drained" in done.stderr
    assert settled_state(slurm_cluster) == "idle"


def settled_state(slurm, wait_s: float = 30) -> str:
    """The node's state once the job's completion is over: right after srun returns the node
    may still be COMPLETING for a moment (its epilog running), which is neither drained nor
    idle yet."""
    deadline = time.monotonic() + wait_s
    state = slurm.node_state()
    while state == "completing" and time.monotonic() < deadline:
        time.sleep(0.2)
        state = slurm.node_state()
    return state


def resume(slurm) -> None:
    """Give the node back to the other tests: resume it, and wait until Slurm calls it idle."""
    slurm.run(["scontrol", "update", f"nodename={slurm.hostname}", "state=resume"], timeout=10)
    deadline = time.monotonic() + 60
    while slurm.node_state() != "idle" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert slurm.node_state() == "idle"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
