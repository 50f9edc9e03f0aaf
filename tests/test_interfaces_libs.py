"""The interface prediction against the real libraries, case by case, in a network namespace.

One namespace holds eth0 (a veth on the test bridge), ib0, enp1s0, docker0, virbr0, bond0 and an
IPv6-only enp2s0 (dummy links standing in for NICs, which cannot exist here), eth1 (down, with
an address) and eth2 (up, no address). For each environment a child process inside the
namespace first predicts with ncclcheck.network.interfaces, then loads the nvidia-nccl-cu12 wheel's
libnccl.so.2 and calls ncclGetUniqueId with NCCL_DEBUG=INFO, whose "Bootstrap: Using <if>:<addr>"
line (or "no socket interface found") is NCCL's own answer. Gloo's choice is read from the
listening socket of a real torch ProcessGroupGloo.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.netns

PY = sys.executable

NCCL_CHILD = r"""
import ctypes, json, os, sys
from ncclcheck.network.interfaces import (getaddrinfo_first, list_interfaces, predict_nccl_bootstrap,
                                  predict_nccl_interfaces)
ifs = list_interfaces()
env = dict(os.environ)
boot = predict_nccl_bootstrap(env, ifs, resolve=getaddrinfo_first)
found = predict_nccl_interfaces(env, ifs, resolve=getaddrinfo_first)
print("PREDICTED " + json.dumps({
    "bootstrap": str(boot) if boot else None, "bootstrap_name": boot.name if boot else None,
    "list": [str(c) for c in found], "names": [c.name for c in found]}), flush=True)
import nvidia.nccl
lib = ctypes.CDLL(os.path.join(nvidia.nccl.__path__[0], "lib", "libnccl.so.2"))
rc = lib.ncclGetUniqueId(ctypes.create_string_buffer(128))
sys.stdout.flush()
print("RC %d" % rc, flush=True)
"""

GLOO_CHILD = r"""
import datetime, json, os, socket, sys
import psutil
import torch.distributed as dist
from ncclcheck.network.interfaces import list_interfaces, predict_gloo_interfaces
ifs = list_interfaces()
me = psutil.Process()
def listening():
    return {(c.laddr.ip, c.laddr.port) for c in me.net_connections("tcp")
            if c.status == "LISTEN"}
out = []
for value in json.loads(sys.argv[1]):
    env = {"GLOO_SOCKET_IFNAME": value}
    try:
        mine = [a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None,
                                                     type=socket.SOCK_STREAM)]
    except OSError:
        mine = []
    predicted = [str(c) if c else None for c in predict_gloo_interfaces(env, ifs, mine)]
    os.environ["GLOO_SOCKET_IFNAME"] = value
    before = listening()
    try:
        pg = dist.ProcessGroupGloo(dist.HashStore(), 0, 1, datetime.timedelta(seconds=5))
        actual = sorted(ip for ip, _ in listening() - before)
        error = None
    except RuntimeError as exc:
        actual, error = [], str(exc)
    out.append({"value": value, "predicted": predicted, "actual": actual, "error": error})
print("GLOO " + json.dumps(out))
"""

# (links to set down before the group, [(environment, NCCL's bootstrap interface; None: none)])
# The expected names are what NCCL 2.32 was observed to choose; the test checks the prediction
# against the library itself, and the library against these names, so neither can drift.
# "a|b": either, when the order depends on interface indexes the kernel hands out.
GROUPS: list[tuple[list[str], list[tuple[dict[str, str], str | None]]]] = [
    ([], [
        ({}, "ib0"),                                              # unset: IPoIB first
        ({"NCCL_SOCKET_IFNAME": "eth"}, "eth0"),                  # prefix; eth1 down, eth2 bare
        ({"NCCL_SOCKET_IFNAME": "=eth1"}, None),                  # exact, but down
        ({"NCCL_SOCKET_IFNAME": "=eth2"}, None),                  # exact, but no address
        ({"NCCL_SOCKET_IFNAME": "eth1,eth2"}, None),
        ({"NCCL_SOCKET_IFNAME": "=eth"}, None),                   # exact needs the whole name
        ({"NCCL_SOCKET_IFNAME": "eth9"}, None),                   # names nothing
        ({"NCCL_SOCKET_IFNAME": "ETH0"}, None),                   # case-sensitive
        ({"NCCL_SOCKET_IFNAME": " eth0"}, None),                  # spaces are part of the name
        ({"NCCL_SOCKET_IFNAME": "eth0:1234"}, "eth0"),            # ":port" ignored
        ({"NCCL_SOCKET_IFNAME": "eth0,bond0"}, "bond0"),          # list order is no priority
        ({"NCCL_SOCKET_IFNAME": "=enp1s0,=docker0"}, "enp1s0"),   # "=" only at the front
        ({"NCCL_SOCKET_IFNAME": "=enp1s0:1"}, "enp1s0"),          # ":1" is a port, not a label
        ({"NCCL_SOCKET_IFNAME": "^lo,ib,enp1s0,docker,virbr,bond,eth"}, "enp2s0"),
        ({"NCCL_SOCKET_IFNAME": "^=lo,ib0,enp1s0,docker0,virbr0,bond0,eth0"}, "enp1s0:1"),
        ({"NCCL_SOCKET_IFNAME": "docker"}, "docker0"),
        ({"NCCL_SOCKET_IFNAME": "=virbr0"}, "virbr0"),
        ({"NCCL_SOCKET_IFNAME": "lo"}, "lo"),
        ({"NCCL_SOCKET_IFNAME": "^ib"}, "lo"),                    # exclude list
        ({"NCCL_SOCKET_IFNAME": "^lo,ib,eth,enp"}, "docker0"),
        ({"NCCL_SOCKET_IFNAME": "^=lo,eth0,ib0"}, "enp1s0"),
        ({"NCCL_SOCKET_IFNAME": "^=lo,ib"}, "ib0"),               # exact exclude keeps ib0
        ({"NCCL_SOCKET_IFNAME": "^lo,docker,virbr,ib,eth,enp,bond"}, None),
        ({"NCCL_SOCKET_IFNAME": "e"}, "ib0"),                     # one character: ignored
        ({"NCCL_SOCKET_IFNAME": "^"}, "ib0"),
        ({"NCCL_SOCKET_IFNAME": "^="}, None),                     # empty exclude: nothing
        ({"NCCL_SOCKET_IFNAME": ",,"}, "lo"),                     # empty list: everything
        ({"NCCL_SOCKET_IFNAME": "=="}, None),
        ({"NCCL_SOCKET_IFNAME": "enp2"}, "enp2s0"),               # IPv6-only interface
        ({"NCCL_SOCKET_IFNAME": "enp2", "NCCL_SOCKET_FAMILY": "AF_INET"}, None),
        ({"NCCL_SOCKET_IFNAME": "enp", "NCCL_SOCKET_FAMILY": "AF_INET6"}, "enp2s0"),
        ({"NCCL_SOCKET_FAMILY": "AF_INET6"}, "eth0|enp2s0"),      # ib0 has no IPv6; by ifindex
        ({"NCCL_SOCKET_FAMILY": "AF_INET"}, "ib0"),
        ({"NCCL_SOCKET_FAMILY": "inet6"}, "ib0"),                 # unknown value: ignored
        ({"NCCL_COMM_ID": "198.19.5.50:29500"}, "docker0"),       # bootstrap: COMM_ID subnet
        ({"NCCL_COMM_ID": "198.19.5.99:29500"}, "eth1"),          # ... even a down link
        ({"NCCL_COMM_ID": "198.19.5.50"}, "docker0"),             # no port
        ({"NCCL_COMM_ID": "[2001:2:0:5::99]:29500"}, "enp2s0"),   # IPv6 in brackets
        ({"NCCL_COMM_ID": "localhost:29500"}, "lo"),              # a host name
        ({"NCCL_COMM_ID": "198.20.5.1:29500"}, None),             # no interface in that subnet
        ({"NCCL_SOCKET_IFNAME": ""}, "ib0"),                      # empty: unset
        ({"NCCL_SOCKET_IFNAME": "\u00e9"}, None),                 # one character, two bytes
        ({"NCCL_SOCKET_IFNAME": ",".join(f"x{i}" for i in range(16)) + ",eth0"}, None),
        ({"NCCL_SOCKET_IFNAME": ",".join(f"x{i}" for i in range(15)) + ",eth0"}, "eth0"),
        ({"NCCL_SOCKET_IFNAME": "docker", "NCCL_SOCKET_FAMILY": "AF_INET6"}, None),
    ]),
    (["carrier:bond0"], [({"NCCL_SOCKET_IFNAME": "bond"}, None),  # up, no carrier
                          ({"NCCL_SOCKET_IFNAME": "^lo,ib,eth,enp,docker"}, "virbr0")]),
    (["ib0"], [({}, "enp1s0"), ({"NCCL_SOCKET_IFNAME": "ib"}, None)]),
    (["eth0", "enp1s0", "bond0", "enp2s0"], [({}, "docker0"),
                                             ({"NCCL_SOCKET_FAMILY": "AF_INET6"}, None)]),
    (["docker0"], [({}, "lo"), ({"NCCL_SOCKET_IFNAME": "^lo"}, "virbr0")]),
    (["lo"], [({}, "virbr0")]),                                   # virbr last (2.28+)
    (["virbr0"], [({}, None), ({"NCCL_SOCKET_IFNAME": "eth1"}, None)]),
]

LINKS = [  # name, addresses (none: up without address), set up?
    ("ib0", ["198.19.5.1/28"]),
    ("enp1s0", ["198.19.5.33/28", "198.19.5.34/28 label enp1s0:1"]),  # an alias label
    ("docker0", ["198.19.5.49/28"]),
    ("virbr0", ["198.19.5.65/28"]),
    ("bond0", ["198.19.5.81/28"]),
    ("eth1", ["198.19.5.97/28"]),
    ("eth2", []),
    ("enp2s0", ["2001:2:0:5::1/64"]),
]


@pytest.fixture
def host(netns_cluster):
    """One namespace with the links above (veth pairs whose peers wait, up, in a second
    namespace, so each link has carrier); eth1 is left down."""
    cluster = netns_cluster("nc5", "198.18.5", nodes=1)
    ns = cluster.node(0).netns
    sink = ns + "p"
    subprocess.run(["ip", "netns", "add", sink], check=True, capture_output=True, timeout=30)
    try:
        for i, (name, addrs) in enumerate(LINKS):
            peer = f"{sink}{i}"[:15]
            cluster.ns(ns, "ip", "link", "add", name, "type", "veth", "peer", "name", peer)
            cluster.ns(ns, "ip", "link", "set", peer, "netns", sink)
            cluster.ns(sink, "ip", "link", "set", peer, "up")
            cluster.ns(ns, "ip", "link", "set", name, "addrgenmode", "none")
            for addr in addrs:
                addr, *label = addr.split()
                extra = ["nodad"] if ":" in addr else []
                cluster.ns(ns, "ip", "addr", "add", addr, "dev", name, *extra, *label)
            if name != "eth1":
                cluster.ns(ns, "ip", "link", "set", name, "up")
        yield cluster
    finally:
        subprocess.run(["ip", "netns", "del", sink], capture_output=True, timeout=30)


def _set_down(cluster, name: str) -> None:
    """``name`` down, or with ``carrier:name`` up but without carrier (its peer down)."""
    ns = cluster.node(0).netns
    if name.startswith("carrier:"):
        index = [n for n, _ in LINKS].index(name.split(":", 1)[1])
        cluster.ns(ns + "p", "ip", "link", "set", f"{ns}p{index}"[:15], "down")
    else:
        cluster.ns(ns, "ip", "link", "set", name, "down")


def _child_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NCCL_", "GLOO_", "TP_SOCKET"))}
    env.update({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "BOOTSTRAP,ENV",
                "HOME": "/nonexistent-nc5"}, **extra)  # no ~/.nccl.conf
    return env


def _nccl(cluster, env: dict[str, str]) -> tuple[dict, str | None, str]:
    done = cluster.run(0, [PY, "-c", NCCL_CHILD], env=_child_env(env), timeout=60)
    out = done.stdout + done.stderr
    line = next((x for x in done.stdout.splitlines() if x.startswith("PREDICTED ")), None)
    assert line, out
    predicted = json.loads(line[len("PREDICTED "):])
    used = re.search(r"Bootstrap: Using (\S+?):(\S+)<0>", out)
    if used:
        actual = f"{used.group(1)}:{used.group(2)}"
    else:
        assert re.search(r"no socket interface found|No usable listening interface", out), out
        actual = None
    return predicted, actual, out


def test_prediction_table_matches_real_libnccl(host):
    """Every case: predicted bootstrap == libnccl's, and libnccl's == the observed name."""
    mismatches = []
    checked = 0
    for down, cases in GROUPS:
        for name in down:
            _set_down(host, name)
        for env, expected_name in cases:
            predicted, actual, out = _nccl(host, env)
            checked += 1
            # names may hold a colon (alias labels): take the name from the prediction when
            # the whole "<name>:<address>" agrees, else the text before the first colon
            actual_name = (predicted["bootstrap_name"] if actual == predicted["bootstrap"]
                           else actual.split(":", 1)[0] if actual else None)
            if predicted["bootstrap"] != actual:
                mismatches.append(f"{env} (down {down}): predicted {predicted['bootstrap']}, "
                                  f"libnccl {actual}")
            elif (expected_name or None) != actual_name and actual_name not in (
                    expected_name or "").split("|"):
                mismatches.append(f"{env}: libnccl chose {actual_name}, table says "
                                  f"{expected_name}")
            if predicted["list"]:
                assert predicted["list"][0] == predicted["bootstrap"] or "NCCL_COMM_ID" in env
    assert not mismatches, "\n".join(mismatches)
    assert checked >= 40


def test_prediction_order_matches_real_libnccl(host):
    """NCCL's order beyond the first interface: excluding the first k predicted interfaces
    exactly must make libnccl bootstrap on the (k+1)-th. (The alias label goes first: a name
    with a colon cannot be excluded, NCCL reads ":1" as a port.)"""
    host.ns(host.node(0).netns, "ip", "addr", "del", "198.19.5.34/28", "dev", "enp1s0")
    full, _, _ = _nccl(host, {"NCCL_SOCKET_IFNAME": "^lo"})
    names = full["names"]
    assert len(names) >= 6, full
    for k in range(1, len(names)):
        env = {"NCCL_SOCKET_IFNAME": "^=lo," + ",".join(names[:k])}
        predicted, actual, out = _nccl(host, env)
        assert actual == full["list"][k] == predicted["bootstrap"], (env, out)


@pytest.mark.parametrize("hosts_line", ["198.19.5.33 nc5gloo", None])
def test_gloo_prediction_matches_real_torch(host, hosts_line):
    """GLOO_SOCKET_IFNAME values, and unset ("e" is one character): then the host name
    decides, resolved through the namespace's own /etc/hosts (ip netns exec mounts
    /etc/netns/<ns>/hosts), or not at all (loopback fallback)."""
    values = ["eth0", "eth1", "eth2", "enp2s0", "ib0,eth0", "eth0,", ",eth0", "eth", "e", "lo"]
    if hosts_line is None:
        values = ["e"]
    etc = f"/etc/netns/{host.node(0).netns}"
    made_parent = not os.path.isdir("/etc/netns")
    os.makedirs(etc, exist_ok=True)
    try:
        with open(f"{etc}/hosts", "w") as hosts:
            hosts.write("127.0.0.1 localhost\n" + (hosts_line or "") + "\n")
        done = host.run(0, [PY, "-c", GLOO_CHILD, json.dumps(values)], env=_child_env({}),
                        timeout=120, hostname="nc5gloo")
    finally:
        shutil.rmtree(etc, ignore_errors=True)
        if made_parent:
            try:
                os.rmdir("/etc/netns")  # only if still empty
            except OSError:
                pass
    line = next((x for x in done.stdout.splitlines() if x.startswith("GLOO ")), None)
    assert line, done.stdout + done.stderr
    cases = json.loads(line[5:])
    unset = next(c for c in cases if c["value"] == "e")
    assert unset["actual"] == (["198.19.5.33"] if hosts_line else ["127.0.0.1"]), unset
    for case in cases:
        predicted = case["predicted"]
        if None in predicted:
            assert case["error"], case  # torch refused, as predicted
        else:
            assert case["error"] is None, case
            assert sorted(p.split(":", 1)[1] for p in predicted) == case["actual"], case
