"""The facts about network interfaces, as plain data: addresses in getifaddrs() order,
interfaces with their state and kind, the socket a library binds, InfiniBand ports.

Enumeration (``enumeration``) fills these in from this host; the rules (``selection``) and the
probes only read them, so tests can build any host they like.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import asdict, dataclass
from typing import Any, Iterable

INET = "inet"
INET6 = "inet6"

VIRTUAL_BRIDGE_PREFIXES = ("docker", "virbr", "br-", "cni", "flannel", "cali", "lxcbr", "lxdbr",
                           "podman", "vmnet", "vboxnet", "weave", "kube-bridge", "tunl")


@dataclass(frozen=True)
class Address:
    """One IP address of an interface. ``order`` is its position in ``getifaddrs()``."""

    family: str  # INET or INET6
    address: str
    netmask: str | None = None
    scope_id: int = 0
    order: int | None = None

    @property
    def ip(self) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
        return ipaddress.ip_address(self.address.split("%")[0])

    @property
    def mask_bits(self) -> int | None:
        """The netmask as an integer (None when unknown)."""
        if not self.netmask:
            return None
        try:
            return int(ipaddress.ip_address(self.netmask.split("/")[0]))
        except ValueError:
            return None

    @property
    def prefixlen(self) -> int | None:
        bits = self.mask_bits
        return None if bits is None else bin(bits).count("1")

    @property
    def is_loopback(self) -> bool:
        return self.ip.is_loopback

    @property
    def is_link_local(self) -> bool:
        return self.ip.is_link_local

    def with_prefix(self) -> str:
        plen = self.prefixlen
        return f"{self.address}/{plen}" if plen is not None else self.address


@dataclass
class Interface:
    """One network interface as the libraries see it, plus what a person needs to judge it."""

    name: str
    up: bool
    running: bool
    addresses: tuple[Address, ...] = ()
    index: int | None = None
    mtu: int | None = None
    speed_mbps: int | None = None
    kind: str = "unknown"  # loopback, ethernet, infiniband, bridge, bond, vlan, veth, dummy, ...
    virtual: bool | None = None
    loopback: bool = False

    @property
    def ipv4(self) -> list[str]:
        return [a.address for a in self.addresses if a.family == INET]

    @property
    def ipv6(self) -> list[str]:
        return [a.address for a in self.addresses if a.family == INET6]

    @property
    def is_virtual_bridge(self) -> bool:
        """docker0, virbr0, cni0 and other container / VM bridges: no path to other hosts.
        Judged by name, as NCCL does: a host bridge such as br0 may well carry the uplink."""
        return self.name.startswith(VIRTUAL_BRIDGE_PREFIXES)

    @property
    def state(self) -> str:
        if not self.up:
            return "down"
        return "up" if self.running else "no-carrier"

    def describe(self) -> str:
        """``eth0 (up, 10.0.0.5, fe80::1)`` for fixes and summaries."""
        addrs = ", ".join(a.address for a in self.addresses) or "no address"
        return f"{self.name} ({self.state}, {addrs})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "state": self.state, "up": self.up, "running": self.running,
            "ipv4": [a.with_prefix() for a in self.addresses if a.family == INET],
            "ipv6": [a.with_prefix() for a in self.addresses if a.family == INET6],
            "mtu": self.mtu, "speed_mbps": self.speed_mbps, "kind": self.kind,
            "virtual": self.virtual,
        }


@dataclass(frozen=True)
class SocketChoice:
    """An interface a library will use, with the address it binds."""

    name: str
    address: str
    family: str

    def __str__(self) -> str:
        return f"{self.name}:{self.address}"


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")


@dataclass(frozen=True)
class IbPort:
    """One InfiniBand / RoCE port from /sys/class/infiniband."""

    device: str
    port: int
    state: str  # e.g. "ACTIVE", "DOWN", "INIT"
    phys_state: str | None
    link_layer: str | None  # "InfiniBand" or "Ethernet" (RoCE)
    rate: str | None  # e.g. "200 Gb/sec (4X HDR)"
    netdevs: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        """Up and usable: the only state in which NCCL's IB transport uses the port."""
        return self.state.upper() == "ACTIVE"

    @property
    def rate_gbit(self) -> float | None:
        """The link rate in Gb/s (``"200 Gb/sec (4X HDR)"`` -> 200.0); None when unreadable."""
        found = _RATE.match(self.rate or "")
        return float(found.group(1)) if found else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["netdevs"] = list(self.netdevs)
        return data


def find(interfaces: Iterable[Interface], name: str) -> Interface | None:
    return next((i for i in interfaces if i.name == name), None)


def interface_for_address(interfaces: Iterable[Interface], address: str) -> Interface | None:
    """The local interface holding ``address``."""
    ip = ipaddress.ip_address(address.split("%")[0])
    for iface in interfaces:
        if any(a.ip == ip for a in iface.addresses):
            return iface
    return None


def fastest_ib_rate(ports: Iterable[IbPort]) -> float | None:
    """The rate (Gb/s) of the fastest ACTIVE InfiniBand / RoCE port, None when none is."""
    rates = [port.rate_gbit for port in ports if port.active and port.rate_gbit]
    return max(rates) if rates else None
