"""The benchmark across two hosts: two network namespaces on a private bridge, one torchrun
agent in each (static rendezvous on node 0), Gloo over the namespaces' eth0.

Real: torchrun, the cluster session's TCPStore, Gloo's TCP transport between namespaces.
Nothing leaves the machine: addresses are in 198.18.7.0/24 on a bridge without an address.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

pytestmark = [pytest.mark.netns, pytest.mark.slow]

TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")


def _torchrun(cluster, node: int, port: int, *extra: str) -> list[str]:
    return cluster.command(node, [
        TORCHRUN, "--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(node),
        "--master-addr", cluster.node(0).address, "--master-port", str(port),
        "-m", "ncclcheck", "bench", "--backend", "gloo", "--max-bytes", "256K", "--factor", "16",
        "--iters", "5", "--warmup", "1", "--timeout", "40", "--format", "json", *extra,
    ], hostname=f"node{node}")


def test_bench_across_two_namespaces(netns_cluster, clean_env):
    cluster = netns_cluster("nc7", "198.18.7")
    env = dict(os.environ, GLOO_SOCKET_IFNAME="eth0", TORCH_CPP_LOG_LEVEL="FATAL")
    port = 29571
    import subprocess
    procs = [subprocess.Popen(_torchrun(cluster, i, port), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for i in (0, 1)]
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=90))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    (out0, err0), (_, err1) = outputs
    assert procs[0].returncode == 0, err0[-3000:] + err1[-3000:]
    report = json.loads(out0)
    bench = report["bench"]
    assert bench["backend"] == "gloo" and bench["world_size"] == 2
    assert bench["hosts"] == ["node0", "node1"]
    assert [r["bytes"] for r in bench["rows"]] == [1024, 16384, 262144]
    assert all(r["wrong"] == 0 and r["time_us"] > 0 and r["busbw_gbps"] > 0 for r in bench["rows"])
    check = next(c for c in report["checks"] if c["id"] == "bench.allreduce")
    assert check["status"] == "pass", check
    assert "0 wrong values" in check["summary"]
