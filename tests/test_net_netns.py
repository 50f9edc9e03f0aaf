"""`ncclcheck net` end to end in network namespaces: the real CLI, real sockets, real iptables.

Nodes are namespaces on a private bridge (198.18.5.0/24); extra links are veth pairs whose
peers wait in a side namespace. Nothing leaves the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.netns

PY = sys.executable
SUBNET = "198.18.5"


def child_env(**extra: str) -> dict[str, str]:
    """This environment without launcher / NCCL / Gloo variables, plus ``extra``."""
    drop = ("RANK", "WORLD_SIZE", "LOCAL_", "NODE_RANK", "GROUP_", "MASTER_", "SLURM", "OMPI_",
            "PMI_", "TORCHELASTIC", "NCCL_", "GLOO_", "TP_SOCKET", "PET_", "JSM_", "LSB_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["HOME"] = "/nonexistent-nc5"  # no ~/.nccl.conf
    env.update(extra)
    return env


def net_json(cluster, node: int, timeout: float = 60, args: tuple[str, ...] = (),
             **env: str) -> dict:
    done = cluster.run(node, [PY, "-m", "ncclcheck", "net", "--format", "json", *args],
                       hostname=f"node{node}", env=child_env(**env), timeout=timeout)
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout)


def check(report: dict, check_id: str, host: str | None = None) -> dict:
    found = [c for c in report["checks"] if c["id"] == check_id
             and (host is None or c.get("host") == host)]
    assert len(found) == 1, (check_id, host, [c["id"] for c in report["checks"]])
    return found[0]


def add_link(cluster, node: int, sink: str, name: str, address: str | None, up: bool) -> None:
    """A veth ``name`` in node's namespace; its peer waits, up, in ``sink`` (carrier on)."""
    ns = cluster.node(node).netns
    peer = f"{ns}{name}"[-15:]
    cluster.ns(ns, "ip", "link", "add", name, "type", "veth", "peer", "name", peer)
    cluster.ns(ns, "ip", "link", "set", peer, "netns", sink)
    cluster.ns(sink, "ip", "link", "set", peer, "up")
    if address:
        cluster.ns(ns, "ip", "addr", "add", address, "dev", name)
    if up:
        cluster.ns(ns, "ip", "link", "set", name, "up")


@pytest.fixture
def one_node(netns_cluster):
    """node0 with eth0 (bridge), eth1 (down, with an address) and docker0 (up)."""
    cluster = netns_cluster("nc5", SUBNET, nodes=1)
    sink = cluster.node(0).netns + "s"
    subprocess.run(["ip", "netns", "add", sink], check=True, capture_output=True, timeout=30)
    try:
        add_link(cluster, 0, sink, "eth1", "198.19.5.97/28", up=False)
        add_link(cluster, 0, sink, "docker0", "198.19.5.49/28", up=True)
        yield cluster
    finally:
        subprocess.run(["ip", "netns", "del", sink], capture_output=True, timeout=30)


def test_interface_down_fails_and_says_so(one_node):
    report = net_json(one_node, 0, NCCL_SOCKET_IFNAME="eth1")
    result = check(report, "net.nccl_interface")
    assert result["status"] == "fail" and result["category"] == "interface"
    assert "eth1 is down" in result["summary"]
    assert result["details"]["nccl_interfaces"] == []
    assert "ip link set eth1 up" in result["fix"]
    assert f"eth0 (up, {SUBNET}.10" in result["fix"] and "NCCL_SOCKET_IFNAME==eth0" in result["fix"]
    assert report["status"] == "fail"


def test_ifname_naming_a_missing_interface_fails_with_real_interfaces(one_node):
    report = net_json(one_node, 0, NCCL_SOCKET_IFNAME="eth9", GLOO_SOCKET_IFNAME="eth9")
    result = check(report, "net.nccl_interface")
    assert result["status"] == "fail" and result["category"] == "interface"
    assert "eth9" in result["summary"] and "no socket interface found" in result["summary"]
    fix = result["fix"]
    assert f"eth0 (up, {SUBNET}.10" in fix and "docker0 (up, 198.19.5.49" in fix
    assert "eth1 (down, 198.19.5.97)" in fix
    assert "NCCL_SOCKET_IFNAME==eth0" in fix  # docker0 is not proposed
    gloo = check(report, "net.gloo_interface")
    assert gloo["status"] == "fail" and gloo["category"] == "interface"
    assert "Unable to find address" in gloo["summary"]


def test_default_choice_and_multi_node_warning_for_docker(one_node):
    report = net_json(one_node, 0)
    result = check(report, "net.nccl_interface")
    assert result["status"] == "pass", result
    assert result["details"]["nccl_interfaces"] == ["eth0"]  # docker0 only as a last resort
    warned = net_json(one_node, 0, args=("--nodes", "2"), NCCL_SOCKET_IFNAME="docker")
    result = check(warned, "net.nccl_interface")
    assert result["status"] == "warn" and result["category"] == "interface"
    assert "docker" in result["summary"] and "NCCL_SOCKET_IFNAME==eth0" in result["fix"]


def test_master_port_held_by_another_process_names_it(one_node):
    port = 29517
    holder = subprocess.Popen(one_node.command(0, [
        PY, "-c", "import socket,sys,time; s=socket.socket();"
        " s.bind(('0.0.0.0', int(sys.argv[1]))); s.listen(); print('ready', flush=True);"
        " time.sleep(60)", str(port), "nc5-port-holder"]),
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        report = net_json(one_node, 0, MASTER_ADDR=f"{SUBNET}.10", MASTER_PORT=str(port))
        result = check(report, "net.master_port")
        assert result["status"] == "fail" and result["category"] == "port_in_use"
        assert f"python (pid {holder.pid})" in result["summary"]  # ip netns exec execs python
        holders = result["details"]["holders"]
        assert [h["pid"] for h in holders] == [holder.pid]
        assert "nc5-port-holder" in holders[0]["cmdline"]
        assert "MASTER_PORT=" in result["fix"]
        addr = check(report, "net.master_addr")
        assert addr["status"] == "pass" and addr["details"]["is_this_host"] is True
    finally:
        holder.kill()
        holder.wait(10)
    low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    report = net_json(one_node, 0, MASTER_ADDR=f"{SUBNET}.10", MASTER_PORT=str(low + 17))
    result = check(report, "net.master_port")
    assert result["status"] == "warn" and "ephemeral range" in result["summary"]


def test_master_addr_that_does_not_resolve(one_node):
    report = net_json(one_node, 0, MASTER_ADDR="nc5-no-such-host.invalid", MASTER_PORT="29517")
    result = check(report, "net.master_addr")
    assert result["status"] == "fail" and result["category"] == "name_resolution"
    assert "nc5-no-such-host.invalid" in result["summary"]
    assert check(report, "net.master_port")["status"] == "skip"


def test_master_port_from_a_worker_refused_timeout_and_no_route(netns_cluster):
    cluster = netns_cluster("nc5", SUBNET, nodes=2)
    master = cluster.node(0).address
    worker = dict(NODE_RANK="1", MASTER_ADDR=master)
    refused = check(net_json(cluster, 1, MASTER_PORT="29518", **worker), "net.master_port")
    assert refused["status"] == "warn" and refused["details"]["kind"] == "refused"
    cluster.ns(cluster.node(0).netns, "iptables", "-A", "INPUT", "-p", "tcp", "--dport", "29519",
               "-j", "DROP")
    dropped = check(net_json(cluster, 1, args=("--timeout", "10"), MASTER_PORT="29519", **worker),
                    "net.master_port")
    assert dropped["status"] == "fail" and dropped["details"]["kind"] == "timeout"
    assert dropped["category"] == "connection"
    report = net_json(cluster, 1, NODE_RANK="1", MASTER_ADDR="198.19.5.200", MASTER_PORT="29518")
    no_route = check(report, "net.master_port")
    assert no_route["status"] == "fail" and no_route["details"]["kind"] == "unreachable"
    assert check(report, "net.master_addr")["category"] == "connection"


def test_mesh_reports_exactly_the_blocked_pair_and_direction(netns_cluster):
    """3 nodes in cluster mode; node2 drops NEW connections from node1. Only node1 -> node2 may
    fail; the five other directed pairs must pass. node2 also gets another MTU."""
    cluster = netns_cluster("nc5", SUBNET, nodes=3)
    n1, n2 = cluster.node(1), cluster.node(2)
    cluster.ns(n2.netns, "iptables", "-A", "INPUT", "-s", n1.address, "-p", "tcp", "-m",
               "conntrack", "--ctstate", "NEW", "-j", "DROP")
    cluster.ns(n2.netns, "ip", "link", "set", "eth0", "mtu", "1400")
    port = "29533"
    procs = []
    for i in range(3):
        env = child_env(RANK=str(i), WORLD_SIZE="3", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                        NODE_RANK=str(i), MASTER_ADDR=cluster.node(0).address, MASTER_PORT=port)
        procs.append(cluster.popen(i, [PY, "-m", "ncclcheck", "net", "--format", "json",
                                       "--per-rank", "--timeout", "60",
                                       "--mesh-connect-timeout", "3"],
                                   hostname=f"node{i}", env=env))
    outs = []
    for proc in procs:
        try:
            outs.append(proc.communicate(timeout=100))
        finally:
            proc.kill()
    report = json.loads(outs[0][0])
    meshes = {c["host"]: c for c in report["checks"] if c["id"] == "net.mesh"}
    assert set(meshes) == {"node0", "node1", "node2"}, outs[0][1]
    assert meshes["node0"]["status"] == "pass" and meshes["node2"]["status"] == "pass"
    bad = meshes["node1"]
    assert bad["status"] == "fail" and bad["category"] == "connection"
    failures = bad["details"]["failures"]
    assert [(f["src_host"], f["dst_host"], f["kind"]) for f in failures] == \
        [("node1", "node2", "timeout")]
    attempts = [a for m in meshes.values() for a in m["details"]["attempts"]]
    assert len(attempts) == 6 and sum(not a["kind"] == "ok" for a in attempts) == 1
    assert "node2" in bad["summary"] and "node0" not in bad["summary"]
    consistency = [c for c in report["checks"] if c["id"] == "net.consistency"]
    assert len(consistency) == 1 and consistency[0]["status"] == "warn"
    assert "MTU" in consistency[0]["summary"] and "node2=1400" in consistency[0]["summary"]
    for proc in procs:
        assert proc.returncode == 1  # the job failed: every rank exits with rank 0's verdict


def test_master_reached_through_another_interface_than_nccl_uses(netns_cluster):
    """node1 reaches the master over eth0, but NCCL_SOCKET_IFNAME points at eth1."""
    cluster = netns_cluster("nc5", SUBNET, nodes=2)
    sink = cluster.node(1).netns + "s"
    subprocess.run(["ip", "netns", "add", sink], check=True, capture_output=True, timeout=30)
    try:
        add_link(cluster, 1, sink, "eth1", "198.19.5.113/28", up=True)
        report = net_json(cluster, 1, NODE_RANK="1", NCCL_SOCKET_IFNAME="eth1",
                          MASTER_ADDR=cluster.node(0).address, MASTER_PORT="29518")
    finally:
        subprocess.run(["ip", "netns", "del", sink], capture_output=True, timeout=30)
    result = check(report, "net.master_addr")
    assert result["status"] == "warn" and result["category"] == "interface"
    assert result["details"]["route_interface"] == "eth0"
    assert result["details"]["nccl_interface"] == "eth1"
    assert result["details"]["route_is_nccl_interface"] is False
