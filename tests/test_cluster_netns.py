"""Cluster mode across "nodes": network namespaces on a private bridge (198.18.4.0/24), each
with its own hostname (unshare --uts), each running docs/cluster.md's multi-node torchrun
recipe with two real ranks. Only the machines are simulated; torchrun, the TCPStore and every
rank are real.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys

import pytest
from test_cluster_recipes import recipe
from procs import collect

pytestmark = [pytest.mark.netns, pytest.mark.slow]

TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
STRIP = ("RANK", "WORLD_SIZE", "LOCAL_", "NODE_RANK", "GROUP_", "MASTER_", "SLURM", "OMPI_",
         "PMI_", "MPI_LOCAL", "PET_", "JSM_", "LSB_", "TORCHELASTIC", "NCCL_", "TORCH_NCCL",
         "GLOO_", "ROLE_")
PORT = 29400


def node_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(STRIP)}
    env.update(extra)
    return env


def node_command(nodes: int, node_rank: int, master: str, timeout: float) -> list[str]:
    """docs/cluster.md's multi-node torchrun recipe for one node, with 2 ranks per node, the
    ranks family only and JSON output."""
    text = recipe("torchrun-multi").replace("\\\n", " ")
    values = {"NNODES": str(nodes), "NODE_RANK": str(node_rank), "MASTER_ADDR": master,
              "MASTER_PORT": str(PORT)}
    argv = [re.sub(r"\$(\w+)", lambda m: values[m.group(1)], a) for a in shlex.split(text)]
    assert argv[0] == "torchrun"
    argv[argv.index("--nproc-per-node") + 1] = "2"
    argv[argv.index("--timeout") + 1] = str(timeout)
    return TORCHRUN + argv[1:] + ["--checks", "ranks", "--format", "json"]


def run_job(cluster, nodes: int, envs: list[dict[str, str]], timeout: float = 40):
    """torchrun on every node (node 0 hosts rank 0); returns [(code, stdout, stderr)] per node."""
    master = cluster.node(0).address
    procs = []
    for i in range(nodes):
        argv = node_command(nodes, i, master, timeout)
        procs.append(cluster.popen(i, argv, hostname=f"node{i}", env=envs[i]))
    return collect(procs, timeout + 60)


def check(doc: dict, check_id: str) -> dict:
    return next(c for c in doc["checks"] if c["id"] == check_id)


def test_two_nodes_under_torchrun_one_job_report(netns_cluster):
    cluster = netns_cluster("nc4", "198.18.4", nodes=2)
    outs = run_job(cluster, 2, [node_env(), node_env()])
    assert [code for code, _, _ in outs] == [0, 0], [err[-1500:] for _, _, err in outs]
    doc = json.loads(outs[0][1])  # node 0's torchrun carries rank 0's stdout
    assert outs[1][1].strip() == ""  # node 1's ranks print no report
    assert doc["status"] == "pass"
    rank_entries = [c for c in doc["checks"] if c["id"] == "ranks.rank"]
    assert [(c["ranks"], c["hosts"]) for c in rank_entries] == [("0-3", 2)]  # grouped
    assert doc["context"]["cluster"]["ranks_by_host"] == {"node0": "0-1", "node1": "2-3"}
    # node1's rank 3 reported through its leader (rank 2), node0's ranks to rank 0 directly
    assert doc["context"]["cluster"]["relayed_hosts"] == 1
    assert check(doc, "cluster.hosts")["summary"] == "2 hosts, 2 ranks each"
    assert doc["context"]["cluster"]["hosts"] == "node0: ranks 0-1; node1: ranks 2-3"
    store = check(doc, "cluster.store")["details"]
    assert (store["address"], store["port"]) == (cluster.node(0).address, PORT + 1)


def test_node_with_a_different_nccl_setting_is_named(netns_cluster):
    cluster = netns_cluster("nc4", "198.18.4", nodes=2)
    outs = run_job(cluster, 2, [node_env(NCCL_SOCKET_IFNAME="eth0"),
                                node_env(NCCL_SOCKET_IFNAME="eth1")])
    assert [code for code, _, _ in outs] == [1, 1], [err[-1500:] for _, _, err in outs]
    doc = json.loads(outs[0][1])
    settings = check(doc, "cluster.settings")
    assert settings["status"] == "fail" and settings["category"] == "configuration"
    assert settings["details"]["differences"] == [
        {"name": "NCCL_SOCKET_IFNAME", "reference": "eth0", "value": "eth1",
         "where": "node1: ranks 2-3", "hosts": ["node1"], "ranks": [2, 3]}]
    assert "NCCL_SOCKET_IFNAME=eth0" in settings["fix"]


MOTIVATING_TIMEOUT = 60  # generous: 8 interpreters importing torch on a loaded 2-core host


def motivating_env(rank: int, master: str, port: int) -> dict[str, str]:
    """The motivating case: 2 nodes x 4 processes, every one told WORLD_SIZE=4."""
    return node_env(RANK=str(rank), WORLD_SIZE="4", LOCAL_RANK=str(rank % 4),
                    NODE_RANK=str(rank // 4), MASTER_ADDR=master, MASTER_PORT=str(port))


@pytest.mark.parametrize("order", [list(range(7, -1, -1)), list(range(8))],
                         ids=["7..0", "0..7"])
def test_motivating_launch_names_ranks_4_to_7_and_proposes_8(netns_cluster, order):
    import time
    cluster = netns_cluster("nc12", "198.18.12", nodes=2)
    master = cluster.node(0).address
    argv = [sys.executable, "-m", "ncclcheck", "ranks", "--nodes", "2", "--gpus-per-node", "4",
            "--format", "json", "--timeout", str(MOTIVATING_TIMEOUT)]
    began = time.monotonic()
    procs = {r: cluster.popen(r // 4, argv, hostname=f"node{r // 4}",
                              env=motivating_env(r, master, PORT + 7)) for r in order}
    outs = dict(zip(procs, collect(list(procs.values()), MOTIVATING_TIMEOUT + 30)))
    elapsed = time.monotonic() - began
    doc = json.loads(outs[0][1])
    assert elapsed < MOTIVATING_TIMEOUT + 5 + 3, (elapsed, [e[-300:] for _, _, e in outs.values()],
                                                 doc["context"]["cluster"]["processes"])
    ids = check(doc, "cluster.rank_ids")
    assert ids["details"]["outside_ranks"] == [4, 5, 6, 7]
    assert "node1: ranks 4-7 outside 0..3" in ids["summary"]
    world = check(doc, "cluster.world_size")
    assert world["status"] == "fail" and world["details"]["proposed_world_size"] == 8
    assert "the world size must be 8" in world["summary"]
    assert "WORLD_SIZE=8" in world["fix"] and "Trainer(num_nodes=2, devices=4)" in world["fix"]
    assert check(doc, "cluster.reported")["status"] == "pass"  # no rank that ran is missing
    processes = doc["context"]["cluster"]["processes"]  # those with a problem, each once
    assert sorted((p["host"], p["rank"], p["problems"]) for p in processes) == [
        ("node1", r, ["outside"]) for r in range(4, 8)]
    assert doc["context"]["cluster"]["connected"] == 8
    for rank in range(1, 8):
        code, out, err = outs[rank]
        assert code == 1 and out.strip() == "", err[-800:]
        assert "reported to rank 0; job status fail" in err
