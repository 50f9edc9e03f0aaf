"""Two nodes whose NCCL tells its peers the same address (nccl.peers_same_address).

An address that two hosts both announce is private to each (containers on their own bridge, a
NAT, a VM's default 10.0.2.15): a peer that connects to it reaches its own host or nothing. The
quick tests read NCCL's INFO lines as written; the netns test makes them with the real libnccl
in two namespaces that each hold 198.18.7.10 on a link of their own (no GPU needed: the
bootstrap interface is chosen when ncclGetUniqueId runs), then appends the failure NCCL printed
in a public thread (world/dev/c23-002, its host and address changed to the namespaces').
"""

from __future__ import annotations

import os
import re
import sys

import pytest

from ncclcheck.explain.engine import explain

CONNECT_FAILED = ("{host}:8969:8969 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: "
                  "Connect to {address}<46417> failed : Software caused connection abort")
GENERIC = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
           "ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for "
           "details), NCCL version 2.21.5")


def _root(tmp_path, lines: list[str]):
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n", "utf-8")
    return explain([str(log)]).root


def test_two_hosts_announcing_one_address_explain_the_failed_connect(tmp_path):
    root = _root(tmp_path, [
        "nodeA:3301:3301 [0] NCCL INFO Bootstrap : Using eth0:10.0.2.15<0>",
        "nodeB:4410:4410 [0] NCCL INFO Bootstrap : Using eth0:10.0.2.15<0>",
        CONNECT_FAILED.format(host="nodeB", address="10.0.2.15"), GENERIC])
    assert root.signature.id == "nccl.peers_same_address"
    assert root.signature.category.value == "connection"
    assert root.first.facts["address"] == "10.0.2.15"


@pytest.mark.parametrize("announced", [
    ["nodeA:3301:3301 [0] NCCL INFO Bootstrap : Using eth0:10.0.2.15<0>",
     "nodeB:4410:4410 [0] NCCL INFO Bootstrap : Using eth0:10.0.2.16<0>"],
    # one host, two ranks: the same address is its own
    ["nodeA:3301:3301 [0] NCCL INFO Bootstrap : Using eth0:10.0.2.15<0>",
     "nodeA:3302:3302 [1] NCCL INFO Bootstrap : Using eth0:10.0.2.15<0>"],
], ids=["different addresses", "one host"])
def test_no_shared_address_no_such_cause(tmp_path, announced):
    root = _root(tmp_path, [*announced, CONNECT_FAILED.format(host="nodeB", address="10.0.2.15"),
                            GENERIC])
    assert root is not None and root.signature.id != "nccl.peers_same_address"


def test_a_shared_address_in_a_run_that_shows_no_failure_is_no_finding(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("nodeA:3301:3301 [0] NCCL INFO Bootstrap : Using eth0:10.0.2.15<0>\n"
                   "nodeB:4410:4410 [0] NCCL INFO Bootstrap : Using eth0:10.0.2.15<0>\n"
                   "nodeA:3301:3301 [0] NCCL INFO comm 0x5 rank 0 nranks 2 - Init COMPLETE\n",
                   "utf-8")
    assert explain([str(log)]).findings == []


NCCL_CHILD = r"""
import ctypes, os, nvidia.nccl
lib = ctypes.CDLL(os.path.join(nvidia.nccl.__path__[0], "lib", "libnccl.so.2"))
print("RC %d" % lib.ncclGetUniqueId(ctypes.create_string_buffer(128)), flush=True)
"""


@pytest.mark.netns
def test_real_libnccl_in_two_namespaces_with_one_address(netns_cluster, tmp_path):
    pytest.importorskip("nvidia.nccl")
    first = netns_cluster("sa", "198.18.7", nodes=1)   # each on a bridge of its own:
    second = netns_cluster("sb", "198.18.7", nodes=1)  # the same 198.18.7.10, two networks
    assert first.node(0).address == second.node(0).address == "198.18.7.10"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "GLOO_"))}
    env.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,BOOTSTRAP,ENV",
               HOME="/nonexistent-sa")
    lines: list[str] = []
    for cluster, host in ((first, "nodeA"), (second, "nodeB")):
        done = cluster.run(0, [sys.executable, "-c", NCCL_CHILD], hostname=host, env=env,
                           timeout=60)
        out = done.stdout + done.stderr
        assert "RC 0" in out, out
        announced = [x for x in out.splitlines() if re.search(r"Bootstrap ?: ?Using", x)]
        assert announced and announced[0].startswith(f"{host}:"), out
        assert "198.18.7.10" in announced[0], out
        lines += out.splitlines()
    root = _root(tmp_path, [*lines, CONNECT_FAILED.format(host="nodeB", address="198.18.7.10"),
                            GENERIC])
    assert root.signature.id == "nccl.peers_same_address", lines
    assert root.first.facts["address"] == "198.18.7.10"
