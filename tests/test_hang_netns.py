"""Across nodes: two "nodes" (network namespaces on a private bridge, 198.18.35.0/24, each with
its own hostname) run one torchrun job of 2 x 2 Gloo ranks that hangs; `ncclcheck hang --out DIR`
on each node writes its snapshot into one folder, and `ncclcheck explain DIR` joins them into one
verdict. Alone, a node sees only its half of the job and says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hangjobs import JOB, ROOT, explain_json, job_env, line_of, stop_job, wait_ready

pytestmark = [pytest.mark.netns, pytest.mark.slow]

TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
PORT = 29435


def start_nodes(cluster, folder, scenario: str, **extra: str) -> tuple[list, list[int]]:
    master = cluster.node(0).address
    agents = []
    for i in range(2):
        env = job_env(folder, scenario, GLOO_SOCKET_IFNAME="eth0", **extra)
        argv = [*TORCHRUN, "--nnodes", "2", "--node-rank", str(i), "--nproc-per-node", "2",
                "--master-addr", master, "--master-port", str(PORT), str(JOB)]
        agents.append(cluster.popen(i, argv, hostname=f"node{i}", env=env))
    return agents, wait_ready(folder, 4, agents)


def snapshot(cluster, i: int, out) -> dict:
    """`ncclcheck hang --out` inside node i (its namespace, its hostname), finding the job."""
    done = cluster.run(i, [sys.executable, "-m", "ncclcheck", "hang", "--format", "json",
                           "--out", str(out)], hostname=f"node{i}", timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_two_nodes_write_one_folder_and_explain_joins_them(netns_cluster, tmp_path):
    cluster = netns_cluster("hg", "198.18.35", nodes=2)
    folder, out = tmp_path / "job", tmp_path / "snapshots"
    folder.mkdir()
    agents, pids = start_nodes(cluster, folder, "outside", HANG_CULPRIT="3")
    try:
        alone = [snapshot(cluster, i, out) for i in range(2)]
        joined = explain_json(str(out))
    finally:
        for agent in agents:
            stop_job(agent, pids)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"hang-node{i}-{p['pid']}.json" for i, doc in enumerate(alone)
        for p in doc["hang"]["processes"])
    # node0 alone: its ranks wait, the one holding them up is on the other node
    assert [p["rank"] for p in alone[0]["hang"]["processes"]] == [0, 1]
    assert not [f for f in alone[0]["findings"] if f["category"]]
    assert "ranks 2-3 have no snapshot" in next(
        n["text"] for n in alone[0]["notes"] if n["id"] == "hang.incomplete")
    # node1 alone already names its own culprit
    assert alone[1]["findings"][0]["facts"]["ranks"] == [3]
    # joined: one verdict over both nodes
    root = joined["findings"][0]
    facts = root["facts"]
    assert root["root_cause"] and root["id"] == "hang.outside_collective"
    assert (facts["ranks"], root["host"]) == ([3], "node1")
    assert facts["where"]["function"] == "load_batch"
    assert facts["where"]["line"] == line_of("load-batch-line")
    assert [(g["ranks"], g["count"], g["state"], g["hosts"]) for g in facts["groups"]] == [
        ("3", 1, "stuck", ["node1"]), ("0-2", 3, "waiting", ["node0", "node1"])]


def test_every_rank_of_both_nodes_in_one_collective_is_a_timeout_once_joined(netns_cluster,
                                                                             tmp_path):
    cluster = netns_cluster("hg", "198.18.35", nodes=2)
    folder, out = tmp_path / "job", tmp_path / "snapshots"
    folder.mkdir()
    agents, pids = start_nodes(cluster, folder, "same")
    try:
        alone = snapshot(cluster, 0, out)
        snapshot(cluster, 1, out)
        joined = explain_json(str(out))
    finally:
        for agent in agents:
            stop_job(agent, pids)
    assert alone["hang"]["outcome"] == "incomplete"
    root = joined["findings"][0]
    assert (root["id"], root["category"]) == ("hang.collective_stuck", "timeout")
    assert [(g["ranks"], g["count"]) for g in root["facts"]["groups"]] == [("0-3", 4)]


def test_nothing_outlives_the_test(netns_cluster):
    """The jobs above leave no rank behind (each was stopped by its pids)."""
    left = subprocess.run(["pgrep", "-f", str(JOB)], capture_output=True, text=True).stdout
    assert left.strip() == ""
