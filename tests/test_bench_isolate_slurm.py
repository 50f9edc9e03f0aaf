"""``bench --isolate`` under a real multi-node Slurm (tests/slurm_nodes.py): six slurmd "nodes"
in network namespaces, one task each through ``srun``, Gloo over the namespaces' eth0.

Real: slurmctld, the slurmds, srun and its step environment, the TCPStore, Gloo, the kernel's
shaping, and ``scontrol`` draining the node the report names. Only the machines are simulated.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from conftest import require_netns, require_slurm
from netns import Cluster
from slurm_nodes import NodesSlurm
from test_bench_isolate_netns import SWEEP, show, verdict

pytestmark = [pytest.mark.slurm, pytest.mark.netns, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
NODES = 6
TIMEOUT = 120


@pytest.fixture(scope="module")
def slurm_nodes(tmp_path_factory):
    """Six Slurm nodes (namespaces 0-5) and the controller (namespace 6), shared by the tests
    of this module; every daemon is stopped by its pid and every namespace removed after."""
    require_netns()
    require_slurm()
    with Cluster("isl", subnet="198.18.26", nodes=NODES + 1) as cluster:
        slurm = NodesSlurm.start(tmp_path_factory.mktemp("slurm-nodes"), cluster, NODES)
        try:
            yield slurm
        finally:
            slurm.stop()
            assert not slurm.running_pids()


@pytest.fixture
def slurm(slurm_nodes):
    """The shared Slurm, unshaped and every node idle again after each test."""
    yield slurm_nodes
    slurm_nodes.cluster.unshape()
    slurm_nodes.resume()


def srun_isolate(slurm: NodesSlurm, mode: str, *extra: str) -> tuple[dict, float, str]:
    """`srun -N6 ncclcheck bench --isolate MODE`: rank 0's report, the wall time, stderr."""
    env = {"MASTER_ADDR": slurm.cluster.node(0).address, "MASTER_PORT": "29526",
           "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    began = time.monotonic()
    done = slurm.run(["srun", f"-N{NODES}", f"-n{NODES}", "--ntasks-per-node=1", sys.executable,
                      "-m", "ncclcheck", "bench", *SWEEP, "--isolate", mode, "--timeout",
                      str(TIMEOUT), "--format", "json", *extra], timeout=TIMEOUT + 60, env=env,
                     cwd=ROOT)
    elapsed = time.monotonic() - began
    assert done.stdout.strip(), done.stderr[-3000:]
    doc = json.loads(done.stdout)
    show(doc, mode, elapsed)
    return doc, elapsed, done.stderr


def test_srun_names_the_slow_node_and_drains_exactly_it(slurm):
    slurm.cluster.slow_node(3)
    doc, elapsed, stderr = srun_isolate(slurm, "nodes", "--on-fail", "drain")
    check = verdict(doc)
    details = check["details"]
    assert check["status"] == "fail" and check["category"] == "degraded", check["summary"]
    assert details["slow_nodes"] == ["node3"] and details["slow_links"] == [], details
    assert details["rounds"] <= 3, details["round_log"]
    assert elapsed < TIMEOUT + 10
    assert doc["context"]["launcher"] == "slurm"
    drain = doc["context"]["drain"]
    assert [(a["node"], a["drained"]) for a in drain["actions"]] == [("node3", True)], drain
    assert drain["actions"][0]["reason"].startswith("ncclcheck: bench.isolate: slow node node3")
    assert "ncclcheck: --on-fail drain: drained node3 (" in stderr
    states = slurm.states()
    assert states.pop("node3") in ("drained", "draining"), states
    assert all(state in ("idle", "completing") for state in states.values()), states
    reasons = slurm.run(["sinfo", "-R", "-h", "-o", "%n|%E"], timeout=15).stdout
    assert [line.split("|")[0] for line in reasons.splitlines()] == ["node3"], reasons


def test_srun_links_mode_names_the_slow_link_and_no_node(slurm):
    slurm.cluster.slow_link(0, 5)
    doc, elapsed, _ = srun_isolate(slurm, "links")
    check = verdict(doc)
    details = check["details"]
    assert check["status"] == "fail" and check["category"] == "degraded", check["summary"]
    assert details["slow_links"] == [["node0", "node5"]] and details["slow_nodes"] == [], details
    assert len({tuple(sorted((p["a"], p["b"]))) for p in details["pairs"]}) == 15
    assert elapsed < TIMEOUT + 10


def test_srun_unshaped_names_nothing_three_times_over(slurm):
    for run in range(3):
        doc, elapsed, _ = srun_isolate(slurm, "nodes")
        check = verdict(doc)
        assert check["status"] == "pass", (run, check["summary"], check["details"]["pairs"])
        assert check["details"]["slow_nodes"] == [] and check["details"]["slow_links"] == []
        assert elapsed < TIMEOUT + 10
