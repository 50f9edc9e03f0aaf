"""Test hosts in network namespaces: a bridge, N "nodes" with 198.18.x.y addresses, cleanup.

Only the test's own namespaces are ever addressed. Each namespace gets a veth pair whose
outer end hangs on a private bridge in the root namespace; the bridge itself has no address,
so nothing the tests do can leave the machine.

    with Cluster("nc4", subnet="198.18.4", nodes=2) as cluster:
        cluster.run(0, ["ip", "-br", "addr"])          # inside node 0's namespace
        proc = cluster.popen(1, [...], hostname="node1")  # own UTS namespace -> own hostname

Tests use the ``netns_cluster`` fixture (tests/conftest.py), which skips without privileges
locally and fails under CI=true, where a skip would hide a missing dependency.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field
from typing import Sequence


def netns_unavailable_reason() -> str | None:
    """Why namespace tests cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "network-namespace tests need root"
    for tool in ("ip", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"network-namespace tests need `{tool}` (iproute2 / util-linux)"
    probe = f"ncprobe{uuid.uuid4().hex[:6]}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=check, timeout=30)


@dataclass
class Node:
    index: int
    netns: str
    ifname: str
    address: str
    hostname: str


@dataclass
class Cluster:
    """N namespaces on one bridge. Addresses are ``{subnet}.{10 + i}/24``; node i's interface is
    named ``ifname`` (default eth0) inside its namespace."""

    prefix: str
    subnet: str = "198.18.0"
    nodes: int = 2
    ifname: str = "eth0"
    mtu: int | None = None
    members: list[Node] = field(default_factory=list)

    def __post_init__(self) -> None:
        tag = uuid.uuid4().hex[:4]
        self.tag = f"{self.prefix}{tag}"
        self.bridge = f"{self.tag}br"[:15]

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> "Cluster":
        try:
            _sh("ip", "link", "add", self.bridge, "type", "bridge")
            _sh("ip", "link", "set", self.bridge, "up")
            for i in range(self.nodes):
                self.add_node(i)
        except Exception:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add_node(self, i: int) -> Node:
        netns = f"{self.tag}n{i}"
        outer = f"{self.tag}v{i}"[:15]
        inner = f"{self.tag}i{i}"[:15]
        address = f"{self.subnet}.{10 + i}"
        node = Node(i, netns, self.ifname, address, f"node{i}")
        _sh("ip", "netns", "add", netns)
        self.members.append(node)  # registered first, so a failure below is still cleaned up
        _sh("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
        _sh("ip", "link", "set", inner, "netns", netns)
        _sh("ip", "link", "set", outer, "master", self.bridge)
        _sh("ip", "link", "set", outer, "up")
        self.ns(netns, "ip", "link", "set", inner, "name", self.ifname)
        if self.mtu:
            self.ns(netns, "ip", "link", "set", self.ifname, "mtu", str(self.mtu))
        self.ns(netns, "ip", "addr", "add", f"{address}/24", "dev", self.ifname)
        self.ns(netns, "ip", "link", "set", self.ifname, "up")
        self.ns(netns, "ip", "link", "set", "lo", "up")
        return node

    def close(self) -> None:
        for node in self.members:
            pids = _sh("ip", "netns", "pids", node.netns, check=False).stdout.split()
            for pid in pids:
                _sh("kill", "-9", pid, check=False)
            _sh("ip", "netns", "del", node.netns, check=False)
            _sh("ip", "link", "del", self.outer(node.index), check=False)
        _sh("ip", "link", "del", self.bridge, check=False)
        self.members = []

    # -- shaping (htb and tbf with u32 filters are what this kernel offers; not netem) --------
    def outer(self, i: int) -> str:
        """Node i's veth end on the bridge (traffic towards the node leaves through it)."""
        return f"{self.tag}v{i}"[:15]

    def slow_node(self, i: int, rate: str = "100mbit") -> None:
        """Every byte to and from node i at ``rate``: htb on its eth0 (what it sends) and on
        its bridge-side veth (what it receives)."""
        for netns, dev in ((self.members[i].netns, self.ifname), (None, self.outer(i))):
            prefix = ["ip", "netns", "exec", netns] if netns else []
            _sh(*prefix, "tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb",
                "default", "10")
            _sh(*prefix, "tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:10",
                "htb", "rate", rate, "ceil", rate)

    def slow_link(self, i: int, j: int, rate: str = "100mbit") -> None:
        """Only the traffic between nodes i and j at ``rate``: on each end an htb class at the
        rate, chosen by a u32 filter on the peer's address; everything else unshaped."""
        for me, peer in ((i, j), (j, i)):
            netns, address = self.members[me].netns, self.members[peer].address
            self.ns(netns, "tc", "qdisc", "add", "dev", self.ifname, "root", "handle", "1:",
                    "htb", "default", "10")
            self.ns(netns, "tc", "class", "add", "dev", self.ifname, "parent", "1:", "classid",
                    "1:10", "htb", "rate", "10gbit")
            self.ns(netns, "tc", "class", "add", "dev", self.ifname, "parent", "1:", "classid",
                    "1:20", "htb", "rate", rate, "ceil", rate)
            self.ns(netns, "tc", "filter", "add", "dev", self.ifname, "parent", "1:", "protocol",
                    "ip", "prio", "1", "u32", "match", "ip", "dst", f"{address}/32", "flowid",
                    "1:20")

    def unshape(self) -> None:
        """Every node back to full speed (no qdisc left by slow_node or slow_link)."""
        for node in self.members:
            self.ns(node.netns, "tc", "qdisc", "del", "dev", self.ifname, "root", check=False)
            _sh("tc", "qdisc", "del", "dev", self.outer(node.index), "root", check=False)

    # -- running things inside ---------------------------------------------------------------
    @staticmethod
    def ns(netns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return _sh("ip", "netns", "exec", netns, *args, check=check)

    def node(self, i: int) -> Node:
        return self.members[i]

    def command(self, i: int, argv: Sequence[str], hostname: str | None = None) -> list[str]:
        """argv wrapped to run inside node i's namespace (and own UTS namespace / hostname)."""
        node = self.members[i]
        wrapped = ["ip", "netns", "exec", node.netns]
        if hostname is not None:
            wrapped += ["unshare", "--uts", "sh", "-c", f'hostname "$0" && exec "$@"', hostname]
        return wrapped + list(argv)

    def run(self, i: int, argv: Sequence[str], hostname: str | None = None, timeout: float = 60,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(i, argv, hostname), capture_output=True, text=True,
                              timeout=timeout, env=env)

    def popen(self, i: int, argv: Sequence[str], hostname: str | None = None,
              env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(self.command(i, argv, hostname), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
