"""The pure interface prediction, on hand-built interface lists (no privileges needed).

The same rules are checked against the real libnccl in test_interfaces_libs.py; here are the
cases that one library version or this machine cannot show: older NCCL rules, many
interfaces, NCCL_COMM_ID parsing, nccl.conf files, InfiniBand ports (faked as a sysfs tree:
no RDMA hardware exists here).
"""

from __future__ import annotations

import json
import sys

import pytest

from ncclcheck.ncclib.config_files import nccl_environment
from ncclcheck.network.interfaces import (Address, IbPort, IfList, Interface,
                                  explain_nccl_choice, fastest_ib_rate, gloo_interface_names,
                                  list_ib_ports, list_interfaces, parse_version,
                                  predict_gloo_interface, predict_gloo_interfaces,
                                  predict_nccl_bootstrap, predict_nccl_interfaces, propose_ifname,
                                  socket_family, socket_link_speed)


def iface(name, *addrs, up=True, running=None, loopback=False, mask="255.255.255.0"):
    addresses = tuple(Address("inet6" if ":" in a else "inet", a,
                              "ffff:ffff:ffff:ffff::" if ":" in a else mask) for a in addrs)
    return Interface(name, up, up if running is None else running, addresses, loopback=loopback)


HOST = [
    iface("lo", "127.0.0.1", "::1", loopback=True),
    iface("eth0", "10.0.0.5"),
    iface("eth1", "10.1.0.5", up=False),
    iface("docker0", "172.17.0.1"),
    iface("virbr0", "192.168.122.1"),
    iface("enp1s0", "fd00::5"),
    iface("ib0", "10.2.0.5", running=False),  # up, no carrier
]


def names(env, interfaces=HOST, version=None):
    return [c.name for c in predict_nccl_interfaces(env, interfaces, version)]


@pytest.mark.parametrize("value, exclude, exact, entries", [
    ("eth", False, False, ("eth",)),
    ("^eth,ib", True, False, ("eth", "ib")),
    ("^=eth0", True, True, ("eth0",)),
    ("=eth0,=eth1", False, True, ("eth0", "=eth1")),
    ("eth0:1234,:9,,ib", False, False, ("eth0", "ib")),
    ("=^eth0", False, True, ("^eth0",)),
])
def test_iflist_parsing(value, exclude, exact, entries):
    parsed = IfList.parse(value)
    assert (parsed.exclude, parsed.exact, parsed.entries) == (exclude, exact, entries)


def test_iflist_keeps_at_most_sixteen_entries():
    assert len(IfList.parse(",".join(f"e{i}" for i in range(20))).entries) == 16


def test_default_order_of_preference():
    assert names({}) == ["eth0", "enp1s0"]  # ib0 has no carrier; IPv4 before IPv6
    without = [i for i in HOST if i.name not in ("eth0", "enp1s0")]
    assert names({}, without) == ["docker0"]
    assert names({}, [i for i in without if i.name != "docker0"]) == ["lo"]
    assert names({}, [i for i in HOST if i.name in ("virbr0",)]) == ["virbr0"]


def test_rules_before_2_28_count_down_interfaces_and_skip_virbr():
    assert names({"NCCL_SOCKET_IFNAME": "=eth1"}, version="2.27.7") == ["eth1"]
    assert names({"NCCL_SOCKET_IFNAME": "=eth1"}, version="2.28.3") == []
    assert names({}, version=(2, 21, 5)) == ["ib0"]  # no carrier needed before 2.28
    only_virbr = [i for i in HOST if i.name in ("virbr0", "lo")]
    assert names({}, only_virbr, version=22707) == ["virbr0"]  # not excluded before 2.28
    assert names({}, only_virbr, version=None) == ["lo"]  # 2.28+: lo before virbr
    assert explain_nccl_choice({}, only_virbr, "2.27.7").rule == "^docker,lo (default)"


def test_exclude_exact_and_prefix_lists():
    assert names({"NCCL_SOCKET_IFNAME": "^docker,lo"}) == ["eth0", "virbr0", "enp1s0"]
    assert names({"NCCL_SOCKET_IFNAME": "^=docker"}) == ["lo", "eth0", "docker0", "virbr0",
                                                          "enp1s0"]
    assert names({"NCCL_SOCKET_IFNAME": "=eth"}) == []
    assert names({"NCCL_SOCKET_IFNAME": "e"}) == ["eth0", "enp1s0"]  # one character: unset
    assert names({"NCCL_SOCKET_IFNAME": ",,"})[0] == "lo"  # an empty list matches everything
    assert names({"NCCL_SOCKET_IFNAME": "^="}) == []


def test_socket_family():
    assert socket_family({"NCCL_SOCKET_FAMILY": "AF_INET6"}) == "inet6"
    assert socket_family({"NCCL_SOCKET_FAMILY": "inet6"}) is None
    assert names({"NCCL_SOCKET_FAMILY": "AF_INET6"}) == ["enp1s0"]  # ::1 never counts
    assert names({"NCCL_SOCKET_FAMILY": "AF_INET6", "NCCL_SOCKET_IFNAME": "lo"}) == []


def test_order_follows_getifaddrs_not_the_variable():
    ordered = [iface("eth1", "10.1.0.5"), iface("eth0", "10.0.0.5")]
    assert names({"NCCL_SOCKET_IFNAME": "eth0,eth1"}, ordered) == ["eth1", "eth0"]


def test_real_order_field_wins_over_list_order():
    a = Interface("eth0", True, True, (Address("inet", "10.0.0.5", "255.0.0.0", order=9),))
    b = Interface("eth1", True, True, (Address("inet", "10.1.0.5", "255.0.0.0", order=3),))
    assert names({"NCCL_SOCKET_IFNAME": "eth"}, [a, b]) == ["eth1", "eth0"]


def test_at_most_sixteen_interfaces():
    many = [iface(f"eth{i}", f"10.0.{i}.5") for i in range(20)]
    assert len(names({}, many)) == 16


def test_comm_id_subnet_for_bootstrap_and_hint():
    env = {"NCCL_COMM_ID": "172.17.0.9:29500", "NCCL_SOCKET_IFNAME": "eth0"}
    assert predict_nccl_bootstrap(env, HOST).name == "docker0"  # bootstrap ignores IFNAME
    assert names(env) == ["eth0"]  # the socket transport does not
    hint = {"NCCL_COMM_ID": "[fd00::9]:29500"}
    assert predict_nccl_bootstrap(hint, [i for i in HOST if i.name != "ib0"]).name == "enp1s0"
    assert predict_nccl_bootstrap({"NCCL_COMM_ID": "10.9.9.9:1"}, HOST) is None
    assert predict_nccl_bootstrap({"NCCL_COMM_ID": "node0:1"}, HOST,
                                  resolve=lambda host: "10.0.0.77").name == "eth0"


def test_gloo_names_and_choice():
    assert gloo_interface_names({"GLOO_SOCKET_IFNAME": "eth0,"}) == ["eth0"]
    assert gloo_interface_names({"GLOO_SOCKET_IFNAME": ",eth0"}) == ["", "eth0"]
    assert gloo_interface_names({"GLOO_SOCKET_IFNAME": "e"}) is None
    assert predict_gloo_interface({"GLOO_SOCKET_IFNAME": "eth1"}, HOST).address == "10.1.0.5"
    assert predict_gloo_interface({"GLOO_SOCKET_IFNAME": "eth"}, HOST) is None  # exact names
    both = predict_gloo_interfaces({"GLOO_SOCKET_IFNAME": "lo,eth9"}, HOST)
    assert both[0].name == "lo" and both[1] is None
    assert predict_gloo_interface({}, HOST, ["10.0.0.5"]).name == "eth0"
    assert predict_gloo_interface({}, HOST, ["127.0.1.1"]).name == "lo"  # Debian's /etc/hosts
    assert predict_gloo_interface({}, HOST, ["203.0.113.9"]).address == "127.0.0.1"


def test_propose_skips_loopback_bridges_and_link_local():
    host = HOST + [iface("eth2", "fe80::1"), iface("br-1a2b", "172.18.0.1")]
    assert propose_ifname(host) == "=eth0,enp1s0"
    assert propose_ifname([HOST[0]]) is None


def test_parse_version():
    assert parse_version("2.32.3") == (2, 32, 3)
    assert parse_version("2.21.5-1") == (2, 21, 5)
    assert parse_version(23203) == (2, 32, 3)
    assert parse_version(None) >= (2, 28, 0)


def test_nccl_conf_files_fill_unset_values_only(tmp_path):
    user = tmp_path / "user.conf"
    user.write_text("# comment\nNCCL_SOCKET_IFNAME==eth0\r\nNCCL_DEBUG=INFO\n")
    etc = tmp_path / "etc.conf"
    etc.write_text("NCCL_SOCKET_IFNAME=ib\nNCCL_SOCKET_FAMILY=AF_INET\nnot a setting\n")
    env = nccl_environment({"NCCL_CONF_FILE": str(user), "NCCL_DEBUG": "WARN"}, str(etc))
    assert env["NCCL_SOCKET_IFNAME"] == "=eth0" and env["NCCL_DEBUG"] == "WARN"
    assert env["NCCL_SOCKET_FAMILY"] == "AF_INET"
    home = tmp_path / "home"
    home.mkdir()
    (home / ".nccl.conf").write_text("NCCL_SOCKET_IFNAME=bond\n")
    assert nccl_environment({"HOME": str(home)}, str(etc))["NCCL_SOCKET_IFNAME"] == "bond"


def test_ib_ports_from_sysfs(tmp_path):
    """A fake /sys/class/infiniband tree (no RDMA hardware here)."""
    for dev, state, layer in (("mlx5_0", "4: ACTIVE", "InfiniBand"), ("mlx5_1", "1: DOWN",
                                                                       "Ethernet")):
        port = tmp_path / dev / "ports" / "1"
        port.mkdir(parents=True)
        (port / "state").write_text(state + "\n")
        (port / "phys_state").write_text("5: LinkUp\n")
        (port / "link_layer").write_text(layer + "\n")
        (port / "rate").write_text("200 Gb/sec (4X HDR)\n")
        (tmp_path / dev / "device" / "net" / f"ib{dev[-1]}").mkdir(parents=True)
    ports = list_ib_ports(tmp_path)
    assert [(p.device, p.port, p.state, p.link_layer) for p in ports] == [
        ("mlx5_0", 1, "ACTIVE", "InfiniBand"), ("mlx5_1", 1, "DOWN", "Ethernet")]
    assert ports[0].netdevs == ("ib0",) and ports[0].phys_state == "LinkUp"
    assert [p.active for p in ports] == [True, False]
    assert list_ib_ports(tmp_path / "missing") == []


def _write_port(root, device, state, rate):
    port = root / device / "ports" / "1"
    port.mkdir(parents=True)
    (port / "state").write_text(state + "\n")
    (port / "rate").write_text(rate + "\n")


def test_the_fastest_active_port_sets_the_rate(tmp_path):
    """A faster port that is down does not count: NCCL's IB transport skips it."""
    _write_port(tmp_path, "mlx5_0", "4: ACTIVE", "200 Gb/sec (4X HDR)")
    _write_port(tmp_path, "mlx5_1", "1: DOWN", "400 Gb/sec (4X NDR)")
    _write_port(tmp_path, "mlx5_2", "4: ACTIVE", "100 Gb/sec (4X EDR)")
    ports = list_ib_ports(tmp_path)
    assert [p.rate_gbit for p in ports] == [200.0, 400.0, 100.0]
    assert fastest_ib_rate(ports) == 200.0
    assert fastest_ib_rate(list_ib_ports(tmp_path / "none")) is None
    assert fastest_ib_rate([p for p in ports if not p.active]) is None


@pytest.mark.parametrize("rate, gbit", [("200 Gb/sec (4X HDR)", 200.0),
                                        ("2.5 Gb/sec (1X SDR)", 2.5), ("", None), (None, None),
                                        ("unknown", None)])
def test_port_rate_in_gbit(rate, gbit):
    assert IbPort("mlx5_0", 1, "ACTIVE", None, None, rate).rate_gbit == gbit


def test_link_speed_is_read_from_sysfs(tmp_path):
    """Every host has lo; a fake /sys/class/net gives it a speed the real one never reports."""
    (tmp_path / "lo").mkdir()
    (tmp_path / "lo" / "speed").write_text("1000\n")
    lo = next(i for i in list_interfaces(tmp_path) if i.name == "lo")
    assert lo.speed_mbps == 1000


def _fast(name, speed, loopback=False):
    return Interface(name, True, True, speed_mbps=speed, loopback=loopback)


LINKS = [_fast("lo", 200000, loopback=True), _fast("eth0", 25000), _fast("eth1", 100000),
         _fast("eth2", None), _fast("ib0", 200000)]


@pytest.mark.parametrize("ifname, speed", [
    (None, 200000),         # unset: the fastest non-loopback link
    ("eth", 25000),         # a prefix: the first matching interface, in the host's order
    ("eth1", 100000),
    ("=eth1", 100000),
    ("^ib,eth0", 100000),   # an exclude list: the first interface it leaves
    ("eth2", None),         # selected, but it reports no speed
    ("e", 200000),          # one character: NCCL ignores the variable, and so does this
])
def test_socket_link_speed_follows_nccl_socket_ifname(ifname, speed):
    env = {} if ifname is None else {"NCCL_SOCKET_IFNAME": ifname}
    assert socket_link_speed(env, LINKS) == speed


def test_this_host_enumeration_is_consistent():
    interfaces = list_interfaces()
    assert any(i.loopback for i in interfaces)
    orders = [a.order for i in interfaces for a in i.addresses]
    assert all(o is not None for o in orders) and len(set(orders)) == len(orders)
    lo = next(i for i in interfaces if i.loopback)
    assert "127.0.0.1" in lo.ipv4 and lo.mtu and lo.kind == "loopback"


def test_enumeration_falls_back_to_psutil(monkeypatch):
    """Without a usable libc getifaddrs the same facts come from psutil, in kernel order."""
    import ncclcheck.network.enumeration as interfaces

    def broken():
        raise OSError("no getifaddrs")
    monkeypatch.setattr(interfaces, "_getifaddrs", broken)
    fallback = interfaces.list_interfaces()
    monkeypatch.undo()
    real = interfaces.list_interfaces()
    assert [(i.name, i.up, i.running, i.ipv4) for i in fallback] == \
        [(i.name, i.up, i.running, i.ipv4) for i in real]
    assert predict_nccl_interfaces({}, fallback) == predict_nccl_interfaces({}, real)


_UP_BOTH_WAYS = """
import json, ncclcheck.network.enumeration as e
real = {i.name: i.up for i in e.list_interfaces()}
def broken():
    raise OSError("no getifaddrs")
e._getifaddrs = broken
print(json.dumps([real, {i.name: i.up for i in e.list_interfaces()}]))
"""


@pytest.mark.netns
@pytest.mark.slow
def test_an_interface_up_without_a_carrier_is_up_both_ways(netns_cluster):
    """A bridge whose ports are all down (docker0 after its containers stopped) is up for the
    kernel, with no carrier; psutil's isup also asks for a carrier, its flags do not: the
    fallback reads them (a real bridge in a namespace this test makes)."""
    cluster = netns_cluster("up", "198.18.41", nodes=1)
    netns = cluster.node(0).netns
    cluster.ns(netns, "ip", "link", "add", "dock0", "type", "bridge")
    cluster.ns(netns, "ip", "link", "add", "vport0", "type", "veth", "peer", "name", "vport1")
    cluster.ns(netns, "ip", "link", "set", "vport0", "master", "dock0")
    cluster.ns(netns, "ip", "link", "set", "dock0", "up")
    shown = cluster.ns(netns, "ip", "link", "show", "dock0").stdout
    assert "NO-CARRIER" in shown and ",UP" in shown
    out = cluster.ns(netns, sys.executable, "-c", _UP_BOTH_WAYS).stdout
    real, fallback = json.loads(out)
    assert real["dock0"] is True and fallback == real
