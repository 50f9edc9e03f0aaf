"""The real libnccl's own bootstrap interface choice, inside a network namespace whose
interfaces the test controls (eth0 = 198.18.6.10 and lo): what NCCL picks, and the failure,
with the real interfaces listed, when NCCL_SOCKET_IFNAME names one that is not there."""

from __future__ import annotations

import json
import sys

import pytest

pytestmark = pytest.mark.netns


def run_nccl(cluster, env_extra):
    env = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "HOME": "/nonexistent", **env_extra}
    done = cluster.run(0, [sys.executable, "-m", "ncclcheck", "nccl", "--format", "json",
                           "--timeout", "40"], hostname="node0", timeout=90, env=env)
    assert done.stdout.strip(), done.stderr
    report = json.loads(done.stdout)
    return {c["id"]: c for c in report["checks"]}, done.returncode


def test_bootstrap_choice_and_missing_interface_in_a_namespace(netns_cluster):
    cluster = netns_cluster("nc6", "198.18.6", nodes=1)
    address = cluster.node(0).address

    checks, _ = run_nccl(cluster, {})
    boot = checks["nccl.bootstrap_interface"]
    assert boot["status"] == "pass", boot
    assert boot["details"]["nccl_interfaces"] == ["eth0"] and boot["details"]["address"] == address

    checks, code = run_nccl(cluster, {"NCCL_SOCKET_IFNAME": "ens9", "NCCL_DEBUG": "INFO"})
    boot = checks["nccl.bootstrap_interface"]
    assert code == 1
    assert boot["status"] == "fail" and boot["category"] == "interface"
    assert "no socket interface" in boot["summary"] and "ens9" in boot["summary"]
    assert f"eth0 ({address}" in boot["fix"] and "lo (127.0.0.1" in boot["fix"]
    assert boot["details"]["nccl_interfaces"] == []
    setting = checks["nccl.setting.NCCL_SOCKET_IFNAME"]
    assert setting["status"] == "fail" and f"eth0 ({address}" in setting["fix"]
    assert checks["nccl.setting.NCCL_DEBUG"]["status"] == "pass"


def test_prefix_and_exclude_lists_in_a_namespace(netns_cluster):
    cluster = netns_cluster("nc6", "198.18.6", nodes=1, ifname="ens5")
    checks, _ = run_nccl(cluster, {"NCCL_SOCKET_IFNAME": "^lo"})
    boot = checks["nccl.bootstrap_interface"]
    assert boot["status"] == "pass" and boot["details"]["nccl_interfaces"] == ["ens5"]
    # the network probe's own prediction (ncclcheck.network.interfaces) agrees with the library
    assert boot["details"]["predicted"] == "ens5"
