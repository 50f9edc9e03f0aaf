"""The net family's judgement and the mesh machinery, without namespaces.

Judgement runs on hand-built interface lists; the mesh runs for real on loopback: real
listeners, real connections, and real ClusterSessions over a real torch TCPStore.
"""

from __future__ import annotations

import json
import socket
import threading
from datetime import timedelta

import pytest
from click.testing import CliRunner

from ncclcheck.cli import cli
from ncclcheck.context import ProbeContext
from ncclcheck.network.interfaces import (Address, Interface, explain_nccl_choice,
                                  predict_gloo_interfaces, predict_nccl_bootstrap)
from ncclcheck.launchers import read_layout
from ncclcheck.network.master import (Resolution, classify, ephemeral_range, reach, reserved_ports,
                              resolve)
from ncclcheck.network.mesh import Attempt, Endpoint, Listener, MeshOutcome, dial, plan_peers, run_mesh
from ncclcheck.probes.net.facts import Facts, MasterFacts, master_role
from ncclcheck.probes.net.interfaces import check_gloo_interface, check_nccl_interface
from ncclcheck.probes.net.master import check_master_addr
from ncclcheck.probes.net.mesh import consistency, mesh_result


def iface(name, *addrs, up=True, running=None, loopback=False):
    addresses = tuple(Address("inet6" if ":" in a else "inet", a,
                              "ffff:ffff:ffff:ffff::" if ":" in a else "255.255.255.0")
                      for a in addrs)
    return Interface(name, up, up if running is None else running, addresses, loopback=loopback)


LO = iface("lo", "127.0.0.1", loopback=True)
HOST = [LO, iface("eth0", "10.0.0.5"), iface("eth1", "10.1.0.5", up=False),
        iface("eth2"), iface("eth3", "10.3.0.5", running=False), iface("eth4", "fd00::4"),
        iface("docker0", "172.17.0.1"), iface("eth5", "fe80::5")]


def facts(env=None, interfaces=HOST, multi_node=False, hostname_addresses=("10.0.0.5",)):
    env = dict(env or {})
    layout, _ = read_layout(env)
    return Facts(ProbeContext(env=env), env, layout, interfaces,
                 explain_nccl_choice(env, interfaces), predict_nccl_bootstrap(env, interfaces),
                 predict_gloo_interfaces(env, interfaces, list(hostname_addresses)), "node0",
                 Resolution("node0", [("ipv4", a) for a in hostname_addresses]), "2.32.3",
                 multi_node)


# -- NCCL / Gloo interface judgement ---------------------------------------------------------
def test_nothing_matches_names_every_reason_and_proposes_a_value():
    result = check_nccl_interface(facts({"NCCL_SOCKET_IFNAME": "eth1,eth2,eth3"}))
    assert result.status == "fail" and result.category == "interface"
    for reason in ("eth1 is down", "eth2 has no IP address", "eth3 is no-carrier"):
        assert reason in result.summary
    assert "ip link set eth1 up" in result.fix and "NCCL_SOCKET_IFNAME==eth0,eth4" in result.fix
    assert "eth0 (up, 10.0.0.5)" in result.fix
    assert result.details["nccl_interfaces"] == [] and result.details["gloo_interface"] == "eth0"


def test_family_without_addresses_is_explained():
    env = {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_FAMILY": "AF_INET6"}
    result = check_nccl_interface(facts(env))
    assert result.status == "fail" and "no IPv6 address" in result.summary


def test_choice_details_in_nccl_order():
    result = check_nccl_interface(facts({"NCCL_SOCKET_IFNAME": "eth"}))
    assert result.status == "pass"
    assert result.details["nccl_interfaces"] == ["eth0", "eth4", "eth5"]
    assert result.details["nccl_bootstrap"] == "eth0:10.0.0.5"
    assert result.details["nccl_rule"] == "NCCL_SOCKET_IFNAME=eth"


@pytest.mark.parametrize("env, words", [
    ({"NCCL_SOCKET_IFNAME": "lo"}, "loopback"),
    ({"NCCL_SOCKET_IFNAME": "docker"}, "docker"),
    ({"NCCL_SOCKET_IFNAME": "eth5"}, "link-local"),
])
def test_multi_node_warns_on_loopback_bridge_and_link_local(env, words):
    single = check_nccl_interface(facts(env))
    assert single.status == "pass"
    multi = check_nccl_interface(facts(env, multi_node=True))
    assert multi.status == "warn" and multi.category == "interface" and words in multi.summary
    assert "NCCL_SOCKET_IFNAME==eth0,eth4" in multi.fix


def test_gloo_on_loopback_warns_for_multi_node_and_bad_names_fail():
    debian = facts(multi_node=True, hostname_addresses=("127.0.1.1",))
    result = check_gloo_interface(debian)
    assert result.status == "warn" and "GLOO_SOCKET_IFNAME=eth0" in result.fix
    bad = check_gloo_interface(facts({"GLOO_SOCKET_IFNAME": "eth0,eth9"}))
    assert bad.status == "fail" and "'eth9'" in bad.summary and bad.category == "interface"
    assert check_gloo_interface(facts({"GLOO_SOCKET_IFNAME": "eth1"})).status == "pass"


# -- master ------------------------------------------------------------------------------------
@pytest.mark.parametrize("env, role", [
    ({"MASTER_ADDR": "node0"}, None),  # decided by whether MASTER_ADDR is this host
    ({}, True),  # one process: it is its own master
    ({"NODE_RANK": "0"}, True),
    ({"NODE_RANK": "1"}, False),
    ({"RANK": "0", "WORLD_SIZE": "4"}, True),
    ({"RANK": "3", "WORLD_SIZE": "4"}, False),
])
def test_master_role(env, role):
    assert master_role(read_layout(env)[0]) is role


def _master(f, address, role, local):
    return MasterFacts(address, 29500, resolve(address, 1.0), local, role)


def test_master_addr_must_be_this_host_on_rank_zero():
    f = facts({"MASTER_ADDR": "10.9.9.9", "NODE_RANK": "0"})
    result = check_master_addr(f, _master(f, "10.9.9.9", True, False))
    assert result.status == "fail" and result.category == "name_resolution"
    assert "must host the store" in result.summary and "10.0.0.5" in result.fix


def test_multi_node_loopback_master_fails_on_every_node():
    f = facts({"MASTER_ADDR": "127.0.0.1"}, multi_node=True)
    result = check_master_addr(f, _master(f, "127.0.0.1", False, True))
    assert result.status == "fail" and "loopback" in result.summary


def test_worker_claiming_to_be_the_master_fails():
    f = facts({"MASTER_ADDR": "10.0.0.5"}, multi_node=True)
    result = check_master_addr(f, _master(f, "10.0.0.5", False, True))
    assert result.status == "fail" and "rank 0 runs on another node" in result.summary


def test_unresolvable_master_addr(monkeypatch):
    def fail(*args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    monkeypatch.setattr(socket, "getaddrinfo", fail)
    f = facts({"MASTER_ADDR": "nowhere"})
    result = check_master_addr(f, MasterFacts("nowhere", 1, resolve("nowhere", 1.0), False, None))
    assert result.status == "fail" and result.category == "name_resolution"
    assert "Name or service not known" in result.summary


def test_ephemeral_and_reserved_port_files(tmp_path):
    (tmp_path / "range").write_text("32768\t60999\n")
    (tmp_path / "reserved").write_text("8000-8002,29500\n")
    assert ephemeral_range(str(tmp_path / "range")) == (32768, 60999)
    assert reserved_ports(str(tmp_path / "reserved")) == {8000, 8001, 8002, 29500}
    assert ephemeral_range(str(tmp_path / "missing")) is None


def test_connect_outcomes_are_told_apart():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    assert reach("127.0.0.1", port, 1.0).kind == "refused"
    assert classify(TimeoutError()) == "timeout"
    assert classify(OSError(113, "No route to host")) == "unreachable"
    assert classify(OSError(101, "Network is unreachable")) == "unreachable"
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert reach("127.0.0.1", server.getsockname()[1], 1.0).ok


# -- mesh ----------------------------------------------------------------------------------------
def test_plan_is_full_up_to_the_limit_then_ring_plus_random():
    assert plan_peers(2, range(5), full_max=8) == [0, 1, 3, 4]
    ranks = list(range(0, 400, 4))  # 100 node leaders
    plans = {r: plan_peers(r, ranks, full_max=32, random_peers=2, seed="job") for r in ranks}
    assert all(len(p) == 3 and r not in p for r, p in plans.items())
    assert plans == {r: plan_peers(r, ranks, full_max=32, random_peers=2, seed="job")
                     for r in ranks}  # every node computes the same plan
    dialled = {p for peers in plans.values() for p in peers}
    assert dialled == set(ranks)  # the ring reaches everyone
    assert all(plans[r][0] == ranks[(i + 1) % len(ranks)] for i, r in enumerate(ranks))


def test_listener_accepts_only_its_handshake():
    with Listener("127.0.0.1", rank=1) as listener:
        me = Endpoint(0, "a", "127.0.0.1", 0, "x")
        good = Endpoint(1, "b", "127.0.0.1", listener.port, listener.nonce)
        assert dial(me, good, 2.0).ok
        wrong = Endpoint(1, "b", "127.0.0.1", listener.port, "not-the-nonce")
        attempt = dial(me, wrong, 2.0)
        assert attempt.kind == "handshake"
        with socket.create_connection(("127.0.0.1", listener.port), timeout=2) as stranger:
            stranger.sendall(b"GET / HTTP/1.0\r\n\r\n")
            assert stranger.recv(100) == b""  # closed without an answer
        assert listener._sock.getsockname()[0] == "127.0.0.1"  # bound to that address only
    assert listener.accepted == {0: "127.0.0.1"} and len(listener.rejected) == 2
    assert dial(me, good, 1.0).kind == "refused"  # gone with the probe


def test_dial_to_a_non_mesh_server_is_a_handshake_failure():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        peer = Endpoint(1, "b", "127.0.0.1", server.getsockname()[1], "n")
        threading.Thread(target=lambda: server.accept()[0].sendall(b"SSH-2.0\n"),
                         daemon=True).start()
        assert dial(Endpoint(0, "a", "127.0.0.1", 0, "m"), peer, 2.0).kind == "handshake"


def test_run_mesh_over_a_real_store_ring_plus_random():
    """Three node leaders, each with its own ClusterSession on one real TCPStore; full_max=2
    forces the ring + random plan."""
    import torch.distributed as dist
    from ncclcheck.cluster.session import ClusterSession
    server = dist.TCPStore("127.0.0.1", 0, 3, True, timedelta(seconds=10),
                           wait_for_workers=False)
    sessions = [ClusterSession(server if r == 0 else
                               dist.TCPStore("127.0.0.1", server.port, 3, False,
                                             timedelta(seconds=10)),
                               r, 3, 0, r, f"node{r}", "127.0.0.1", server.port)
                for r in range(3)]
    for session in sessions:
        session.announce({"rank": session.rank})
    outcomes: dict[int, MeshOutcome] = {}
    threads = [threading.Thread(target=lambda s=s: outcomes.__setitem__(
        s.rank, run_mesh(s, "127.0.0.1", "lo", 65536, budget=10.0, full_max=2, random_peers=1,
                         connect_timeout=2.0))) for s in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert sorted(outcomes) == [0, 1, 2]
    for rank, outcome in outcomes.items():
        assert not outcome.full and len(outcome.attempts) == 2 and not outcome.failures
        assert outcome.late == [] and outcome.missing == []
        assert mesh_result(outcome).status == "pass"
    assert sum(len(o.accepted) for o in outcomes.values()) == 6
    checks = consistency(outcomes[0], 0)
    assert len(checks) == 1 and checks[0].status == "pass"
    assert consistency(outcomes[1], 1) == []  # reported once


def test_mesh_result_lists_only_failing_pairs():
    me = Endpoint(1, "node1", "10.0.0.6", 4000, "n")
    outcome = MeshOutcome(me, {0: me, 1: me, 2: me}, {0: "node0", 1: "node1", 2: "node2"})
    outcome.attempts = [
        Attempt(1, "node1", 0, "node0", "10.0.0.5", 4001, "ok", 0.01),
        Attempt(1, "node1", 2, "node2", "10.0.0.7", 4002, "timeout", 3.0, "timed out"),
    ]
    result = mesh_result(outcome)
    assert result.status == "fail" and result.category == "connection"
    assert [(f["src_host"], f["dst_host"], f["kind"]) for f in result.details["failures"]] == [
        ("node1", "node2", "timeout")]
    assert "node0" not in result.summary


# -- the command ----------------------------------------------------------------------------------
def test_net_command_json(clean_env):
    result = CliRunner().invoke(cli, ["net", "--format", "json", "--timeout", "20"])
    assert result.exit_code in (0, 1), result.output
    report = json.loads(result.stdout)
    choice = next(c for c in report["checks"] if c["id"] == "net.nccl_interface")
    assert isinstance(choice["details"]["nccl_interfaces"], list)
    assert "gloo_interface" in choice["details"]
    assert {c["id"] for c in report["checks"]} >= {
        "net.interfaces", "net.infiniband", "net.nccl_interface", "net.gloo_interface",
        "net.master_addr", "net.master_port", "net.mesh"}


def test_net_command_rejects_bad_options():
    result = CliRunner().invoke(cli, ["net", "--mesh-full-max", "1"])
    assert result.exit_code == 2


def test_list_entries_that_never_match_are_named():
    result = check_nccl_interface(facts({"NCCL_SOCKET_IFNAME": "eth0, eth4,=docker0,ETH5"}))
    assert result.status == "warn" and result.category == "interface"
    assert result.details["dead_entries"] == [" eth4", "=docker0", "ETH5"]
    assert "NCCL_SOCKET_IFNAME=eth0,eth4,docker0,eth5" in result.fix
    failing = check_nccl_interface(facts({"NCCL_SOCKET_IFNAME": " eth0"}))
    assert failing.status == "fail" and "spaces are kept" in failing.summary


def test_list_order_is_not_a_priority():
    result = check_nccl_interface(facts({"NCCL_SOCKET_IFNAME": "eth4,eth0"}))
    assert result.status == "pass" and result.details["nccl_bootstrap"] == "eth0:10.0.0.5"
    assert "no priority" in result.summary


def test_nodes_disagreeing_on_interface_name_warn_once():
    a = Endpoint(0, "node0", "10.0.0.5", 1, "n", "eth0", 9000)
    b = Endpoint(4, "node1", "10.0.0.6", 1, "n", "ens5", 9000)
    outcome = MeshOutcome(a, {0: a, 4: b}, {0: "node0", 4: "node1"})
    [result] = consistency(outcome, 0)
    assert result.status == "warn" and result.category == "interface"
    assert "node0=eth0" in result.summary and "node1=ens5" in result.summary
    assert "MTU" not in result.summary


def test_holder_command_lines_hide_secrets():
    from ncclcheck.network.master import safe_cmdline
    shown = safe_cmdline(["server", "--token", "abc123secret", "--api-key=xyz987654", "--port",
                          "29500"])
    assert "abc123secret" not in shown and "xyz987654" not in shown and "--port 29500" in shown


def test_tensorpipe_interface():
    from ncclcheck.probes.net.interfaces import check_tp_interface
    assert check_tp_interface(facts({"TP_SOCKET_IFNAME": "eth0"})).status == "pass"
    bad = check_tp_interface(facts({"TP_SOCKET_IFNAME": "eth9"}))
    assert bad.status == "fail" and "does not exist" in bad.summary and bad.category == "interface"


def test_infiniband_ports_judged_from_sysfs(tmp_path):
    """A fake /sys/class/infiniband (no RDMA hardware here): one port active, one down."""
    from ncclcheck.network.interfaces import list_ib_ports
    from ncclcheck.probes.net.interfaces import check_infiniband
    for dev, state in (("mlx5_0", "4: ACTIVE"), ("mlx5_1", "1: DOWN")):
        port = tmp_path / dev / "ports" / "1"
        port.mkdir(parents=True)
        (port / "state").write_text(state)
        (port / "link_layer").write_text("InfiniBand")
    result = check_infiniband(list_ib_ports(tmp_path))
    assert result.status == "warn" and result.category == "infiniband"
    assert "mlx5_1:1 (DOWN)" in result.summary and "NCCL_IB_HCA==mlx5_0:1" in result.fix
    none = check_infiniband(list_ib_ports(tmp_path / "no"))
    assert none.status == "skip"
