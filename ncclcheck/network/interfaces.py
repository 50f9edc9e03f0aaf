"""Network interfaces, and which of them NCCL and Gloo will pick.

Two halves:

* enumeration (``list_interfaces``, ``list_ib_ports``) reads this host: ``getifaddrs()`` (the
  very call NCCL and Gloo make, so the address order is theirs), psutil for speed, and
  /sys/class/net, /sys/class/infiniband for MTU, kind and RDMA ports;
* prediction (``predict_nccl_interfaces``, ``predict_nccl_bootstrap``, ``predict_gloo_interface``)
  is pure: environment + interface list in, choice out. It never loads libnccl, so it works on a
  node where the library is missing, and tests can hand it any interface list.

NCCL's rules (src/misc/socket.cc ``ncclFindInterfaces``, src/os/linux.cc
``ncclOsFindInterfaces``, src/misc/utils.cc ``parseStringList`` / ``matchIfList``):

* ``NCCL_SOCKET_IFNAME`` is used only when longer than one character. A leading ``^`` turns the
  whole list into an exclude list; after it, a leading ``=`` makes every entry an exact name,
  otherwise entries are prefixes. Entries are comma separated (empty ones dropped, at most 16,
  anything after a ``:`` in an entry is a port and ignored for IP interfaces). An empty list
  matches every interface (so ``^=`` matches none).
* Unset: the first non-empty of ``ib`` prefixes; the interface in the subnet of
  ``NCCL_COMM_ID``; ``^docker,lo`` (``^docker,lo,virbr`` from 2.28); ``docker``; ``lo``;
  ``virbr`` (2.28+).
* Candidates are walked in ``getifaddrs()`` order (every IPv4 address, then every IPv6 one),
  one per interface name, up to 16; only AF_INET / AF_INET6 addresses, never ``::1``,
  optionally one family (``NCCL_SOCKET_FAMILY`` = ``AF_INET`` / ``AF_INET6`` exactly), and from
  2.28 only interfaces that are IFF_RUNNING (up with carrier). The order of names inside the
  variable gives no priority.
* Bootstrap uses the first candidate, except with ``NCCL_COMM_ID`` set, where it takes the first
  address (any state) in that address's subnet.

Gloo's rules (gloo/transport/tcp/device.cc): ``GLOO_SOCKET_IFNAME`` (longer than one character)
is a comma list of exact names, one device each, bound to the first IPv4/IPv6 address of that
name in ``getifaddrs()`` order, whatever the link state. Unset, torch binds the address the
host name resolves to (the first that binds), else falls back to loopback.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import ipaddress
import os
import re
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

INET = "inet"
INET6 = "inet6"
MAX_IFS = 16  # NCCL's MAX_IFS: most interfaces one search returns
LATEST_RULES = (2, 28, 0)  # the newest version where the selection rules changed

_IFF_UP = 0x1
_IFF_LOOPBACK = 0x8
_IFF_RUNNING = 0x40

VIRTUAL_BRIDGE_PREFIXES = ("docker", "virbr", "br-", "cni", "flannel", "cali", "lxcbr", "lxdbr",
                           "podman", "vmnet", "vboxnet", "weave", "kube-bridge", "tunl")


# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------
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

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["netdevs"] = list(self.netdevs)
        return data


# --------------------------------------------------------------------------------------------
# NCCL_SOCKET_IFNAME and friends
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class IfList:
    """A parsed NCCL interface list: ``^`` exclude, ``=`` exact, entries (prefixes or names)."""

    entries: tuple[str, ...]
    exclude: bool = False
    exact: bool = False

    @classmethod
    def parse(cls, value: str) -> "IfList":
        exclude = value.startswith("^")
        if exclude:
            value = value[1:]
        exact = value.startswith("=")
        if exact:
            value = value[1:]
        entries = []
        for token in value.split(","):
            prefix = token.split(":", 1)[0]
            if prefix:  # empty tokens and ":port" entries are dropped, as NCCL does
                entries.append(prefix[:63])
            if len(entries) == MAX_IFS:
                break
        return cls(tuple(entries), exclude, exact)

    def matches(self, name: str) -> bool:
        if not self.entries:
            hit = True  # an empty list matches everything
        elif self.exact:
            hit = name in self.entries
        else:
            hit = any(name.startswith(e) for e in self.entries)
        return hit != self.exclude

    def __str__(self) -> str:
        return ("^" if self.exclude else "") + ("=" if self.exact else "") + ",".join(self.entries)


def dead_entries(value: str, interfaces: Sequence[Interface] = ()) -> list[tuple[str, str]]:
    """Entries of an NCCL interface list that can never match anything, and why: NCCL does
    not trim spaces, reads ``^`` / ``=`` only at the start of the whole list, and compares
    names case-sensitively."""
    parsed = IfList.parse(value)
    dead = []
    for entry in parsed.entries:
        if entry != entry.strip():
            dead.append((entry, "spaces are kept as part of the name"))
        elif entry[0] in "^=":
            dead.append((entry, f"'{entry[0]}' only counts at the very start of the list"))
        elif not any(i.name.startswith(entry) for i in interfaces) and any(
                i.name.lower().startswith(entry.lower()) for i in interfaces):
            dead.append((entry, "names are case-sensitive"))
    return dead


def parse_version(version: Any) -> tuple[int, int, int]:
    """``"2.27.7"``, ``(2, 27, 7)``, ``22707`` (ncclGetVersion's code) or None (latest)."""
    if version is None:
        return LATEST_RULES
    if isinstance(version, int):
        if version >= 10000:
            return (version // 10000, version // 100 % 100, version % 100)
        return (version // 1000, version // 100 % 10, version % 100)
    if isinstance(version, str):
        match = re.match(r"\s*(\d+)\.(\d+)(?:\.(\d+))?", version)
        if not match:
            return LATEST_RULES
        return (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))
    return tuple((list(version) + [0, 0, 0])[:3])  # type: ignore[return-value]


def socket_family(env: Mapping[str, str]) -> str | None:
    """NCCL_SOCKET_FAMILY, as NCCL reads it: exactly AF_INET or AF_INET6, anything else ignored."""
    value = env.get("NCCL_SOCKET_FAMILY")
    return {"AF_INET": INET, "AF_INET6": INET6}.get(value) if value is not None else None


def ifname_setting(env: Mapping[str, str], name: str = "NCCL_SOCKET_IFNAME") -> str | None:
    """The variable's value when the library honours it (longer than one character), else None."""
    value = env.get(name)
    if value is None or len(value.encode("utf-8", "surrogateescape")) <= 1:  # C strlen
        return None
    return value


def _in_order(interfaces: Sequence[Interface]) -> Iterator[tuple[Interface, Address]]:
    """(interface, address) pairs in getifaddrs() order: every IPv4, then every IPv6.

    Enumerated lists carry the real order; hand-built ones get the kernel's (by interface,
    IPv4 before IPv6)."""
    pairs = [(iface, addr, (0 if addr.family == INET else 1, i, j))
             for i, iface in enumerate(interfaces) for j, addr in enumerate(iface.addresses)]
    if all(addr.order is not None for _, addr, _ in pairs):
        pairs.sort(key=lambda p: p[1].order)  # type: ignore[arg-type,return-value]
    else:
        pairs.sort(key=lambda p: p[2])
    for iface, addr, _ in pairs:
        yield iface, addr


def _choice(iface: Interface, addr: Address) -> SocketChoice:
    """A scoped (link-local) IPv6 address carries its zone, as getnameinfo prints it."""
    text = addr.address
    if addr.family == INET6 and addr.scope_id and "%" not in text:
        text = f"{text}%{iface.name}"
    return SocketChoice(iface.name, text, addr.family)


def _find(iflist: IfList, interfaces: Sequence[Interface], family: str | None,
          version: tuple[int, int, int], max_ifs: int = MAX_IFS) -> list[SocketChoice]:
    """One ``ncclOsFindInterfaces`` pass."""
    found: list[SocketChoice] = []
    for iface, addr in _in_order(interfaces):
        if len(found) >= max_ifs:
            break
        if addr.family not in (INET, INET6):
            continue
        if version >= (2, 28, 0) and not iface.running:
            continue
        if family is not None and addr.family != family:
            continue
        if addr.family == INET6 and addr.is_loopback:
            continue
        if not iflist.matches(iface.name):
            continue
        if any(c.name == iface.name for c in found):
            continue
        found.append(_choice(iface, addr))
    return found


def _same_subnet(addr: Address, remote: Address) -> bool:
    """NCCL's matchSubnet: same family, same masked bits (and same IPv6 scope)."""
    mask = addr.mask_bits
    if addr.family != remote.family or mask is None:
        return False
    same = (int(addr.ip) & mask) == (int(remote.ip) & mask)
    return same and (addr.family == INET or addr.scope_id == remote.scope_id)


def _comm_id_address(value: str, resolve: Callable[[str], str | None] | None) -> Address | None:
    """The address in NCCL_COMM_ID, read as NCCL reads it: ``[ipv6%if]:port`` in brackets,
    otherwise everything before the first ``:`` (or ``,``) is an IPv4 address or a host name,
    resolved with getaddrinfo (pass ``resolve``; without it host names count as unresolved)."""
    if value.startswith("["):
        if "]" not in value:
            return None
        host = value[1:].split("]", 1)[0].split("%", 1)[0]
    else:
        entries = IfList.parse(value).entries  # NCCL parses it as a one-entry list
        if not entries or value.startswith(("^", "=")):
            return None
        host = entries[0]
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        resolved = resolve(host) if resolve else None
        if not resolved:
            return None
        ip = ipaddress.ip_address(resolved.split("%", 1)[0])
    return Address(INET if ip.version == 4 else INET6, str(ip))


def getaddrinfo_first(host: str) -> str | None:
    """What NCCL's getaddrinfo call returns first for a host name (any family); blocking, so
    callers with a deadline wrap it."""
    try:
        return socket.getaddrinfo(host, None, socket.AF_UNSPEC, socket.SOCK_STREAM)[0][4][0]
    except (OSError, UnicodeError, IndexError):
        return None


@dataclass(frozen=True)
class NcclPrediction:
    """What NCCL will use, and the rule that decided it (for the report and the fix)."""

    interfaces: tuple[SocketChoice, ...]
    rule: str  # "NCCL_SOCKET_IFNAME=...", "ib (default)", "^docker,lo,virbr (default)", ...
    ifname: str | None  # the NCCL_SOCKET_IFNAME value NCCL honours, None when unset/ignored
    family: str | None
    version: tuple[int, int, int]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.interfaces]


def explain_nccl_choice(env: Mapping[str, str], interfaces: Sequence[Interface],
                        version: Any = None,
                        resolve: Callable[[str], str | None] | None = None) -> NcclPrediction:
    """NCCL's interface list (``ncclFindInterfaces``) and which step of its rules produced it."""
    ver = parse_version(version)
    family = socket_family(env)
    ifname = ifname_setting(env)
    if ifname is not None:
        found = _find(IfList.parse(ifname), interfaces, family, ver)
        return NcclPrediction(tuple(found), f"NCCL_SOCKET_IFNAME={ifname}", ifname, family, ver)
    found = _find(IfList.parse("ib"), interfaces, family, ver)
    if found:
        return NcclPrediction(tuple(found), "ib (default: IPoIB first)", None, family, ver)
    comm_id = env.get("NCCL_COMM_ID")
    if comm_id and len(comm_id) > 1:
        remote = _comm_id_address(comm_id, resolve)
        if remote is not None:
            for iface, addr in _in_order(interfaces):
                if _same_subnet(addr, remote):
                    return NcclPrediction((_choice(iface, addr),),
                                          "NCCL_COMM_ID subnet", None, family, ver)
    steps = (["^docker,lo,virbr", "docker", "lo", "virbr"] if ver >= (2, 28, 0)
             else ["^docker,lo", "docker", "lo"])
    for step in steps:
        found = _find(IfList.parse(step), interfaces, family, ver)
        if found:
            return NcclPrediction(tuple(found), f"{step} (default)", None, family, ver)
    return NcclPrediction((), "default: nothing usable", None, family, ver)


def predict_nccl_interfaces(env: Mapping[str, str], interfaces: Sequence[Interface],
                            version: Any = None,
                            resolve: Callable[[str], str | None] | None = None
                            ) -> list[SocketChoice]:
    """The interfaces NCCL's socket code will use, in NCCL's order ([] when none matches).

    ``version``: the NCCL version whose rules apply (``"2.27.7"``, ``(2, 27, 7)``, ``22707``);
    None means the current rules (2.28 and later). ``resolve``: host name -> first address,
    for a NCCL_COMM_ID that names a host (e.g. ``getaddrinfo_first``)."""
    return list(explain_nccl_choice(env, interfaces, version, resolve).interfaces)


def predict_nccl_bootstrap(env: Mapping[str, str], interfaces: Sequence[Interface],
                           version: Any = None,
                           resolve: Callable[[str], str | None] | None = None
                           ) -> SocketChoice | None:
    """The one interface NCCL's bootstrap uses ("Bootstrap: Using <if>:<addr>"), or None when
    it will fail with "no socket interface found"."""
    comm_id = env.get("NCCL_COMM_ID")
    if comm_id is not None:  # bootstrap goes straight to the subnet of NCCL_COMM_ID
        remote = _comm_id_address(comm_id, resolve)
        if remote is None:
            return None
        for iface, addr in _in_order(interfaces):
            if _same_subnet(addr, remote):
                return _choice(iface, addr)
        return None
    found = explain_nccl_choice(env, interfaces, version, resolve).interfaces
    return found[0] if found else None


def gloo_interface_names(env: Mapping[str, str]) -> list[str] | None:
    """GLOO_SOCKET_IFNAME as torch splits it, or None when unset (or one character)."""
    value = ifname_setting(env, "GLOO_SOCKET_IFNAME")
    if value is None:
        return None
    names = value.split(",")
    if names[-1] == "":  # torch's split drops one trailing empty token, keeps the others
        names.pop()
    return names


def _gloo_lookup(name: str, interfaces: Sequence[Interface]) -> SocketChoice | None:
    for iface, addr in _in_order(interfaces):
        if iface.name == name:
            return _choice(iface, addr)
    return None


def _bindable(address: str, interfaces: Sequence[Interface]) -> SocketChoice | None:
    """The local interface owning ``address`` (what bind() would accept), or None."""
    ip = ipaddress.ip_address(address.split("%")[0])
    for iface, addr in _in_order(interfaces):
        if addr.ip == ip:
            return _choice(iface, addr)
    if ip.version == 4 and ip.is_loopback:  # all of 127/8 binds on the loopback device
        lo = next((i for i in interfaces if i.loopback or i.name == "lo"), None)
        return SocketChoice(lo.name if lo else "lo", str(ip), INET)
    return None


def predict_gloo_interfaces(env: Mapping[str, str], interfaces: Sequence[Interface],
                            hostname_addresses: Sequence[str] | None = None
                            ) -> list[SocketChoice | None]:
    """One entry per Gloo device: GLOO_SOCKET_IFNAME's names (None where a name has no
    address or is empty: torch raises "Unable to find address for: <name>" / "interface or
    hostname can't be empty"), or, unset, the device
    torch builds from the host name (``hostname_addresses``: what it resolves to)."""
    names = gloo_interface_names(env)
    if names is not None:
        return [_gloo_lookup(name, interfaces) for name in names]
    for address in hostname_addresses or ():
        choice = _bindable(address, interfaces)
        if choice is not None:
            return [choice]
    return [_bindable("127.0.0.1", interfaces)]


def predict_gloo_interface(env: Mapping[str, str], interfaces: Sequence[Interface],
                           hostname_addresses: Sequence[str] | None = None
                           ) -> SocketChoice | None:
    """Gloo's (first) device interface; None when GLOO_SOCKET_IFNAME names one that has no
    address. Unset, it follows the host name (pass ``hostname_addresses``), else loopback."""
    return predict_gloo_interfaces(env, interfaces, hostname_addresses)[0]


def tp_interface_name(env: Mapping[str, str]) -> str | None:
    """TP_SOCKET_IFNAME (TensorPipe, torch RPC): one exact interface name, used as given."""
    value = env.get("TP_SOCKET_IFNAME")
    return value or None


def with_nccl_conf(env: Mapping[str, str], etc_conf: str = "/etc/nccl.conf") -> dict[str, str]:
    """The environment as libnccl sees it: the values from NCCL_CONF_FILE (else ~/.nccl.conf),
    then /etc/nccl.conf, added where the process environment (or an earlier file) has none."""
    merged = dict(env)
    first = env.get("NCCL_CONF_FILE") or (os.path.join(env["HOME"], ".nccl.conf")
                                          if env.get("HOME") else None)
    for path in (first, etc_conf):
        if not path:
            continue
        try:
            lines = Path(path).read_text(errors="replace").split("\n")
        except OSError:
            continue
        # no trimming: NCCL takes the text on either side of the first "=" as it is
        for line in (x[:-1] if x.endswith("\r") else x for x in lines):
            if line.startswith("#") or "=" not in line:
                continue
            name, value = line.split("=", 1)
            if name and name not in merged:
                merged[name] = value
    return merged


def propose_ifname(interfaces: Sequence[Interface]) -> str | None:
    """A NCCL_SOCKET_IFNAME value worth trying: the running interfaces with a routable address
    that are neither loopback nor a container / VM bridge, as an exact list."""
    good = [i.name for i in interfaces
            if i.running and not i.loopback and not i.is_virtual_bridge
            and any(not a.is_link_local and not a.is_loopback for a in i.addresses)]
    return ("=" + ",".join(good)) if good else None


# --------------------------------------------------------------------------------------------
# enumeration
# --------------------------------------------------------------------------------------------
class _Sockaddr(ctypes.Structure):
    _fields_ = [("sa_family", ctypes.c_ushort), ("sa_data", ctypes.c_ubyte * 14)]


class _Ifaddrs(ctypes.Structure):
    pass


_Ifaddrs._fields_ = [
    ("ifa_next", ctypes.POINTER(_Ifaddrs)),
    ("ifa_name", ctypes.c_char_p),
    ("ifa_flags", ctypes.c_uint),
    ("ifa_addr", ctypes.POINTER(_Sockaddr)),
    ("ifa_netmask", ctypes.POINTER(_Sockaddr)),
    ("ifa_ifu", ctypes.POINTER(_Sockaddr)),
    ("ifa_data", ctypes.c_void_p),
]


def _sockaddr(ptr: Any) -> tuple[str, str, int] | None:
    """(family, address, scope_id) of a sockaddr pointer, for AF_INET / AF_INET6 only."""
    if not ptr:
        return None
    fam = ptr.contents.sa_family
    if fam == socket.AF_INET:
        raw = ctypes.string_at(ctypes.addressof(ptr.contents), 16)
        return INET, socket.inet_ntop(socket.AF_INET, raw[4:8]), 0
    if fam == socket.AF_INET6:
        raw = ctypes.string_at(ctypes.addressof(ptr.contents), 28)
        scope = int.from_bytes(raw[24:28], "little")
        return INET6, socket.inet_ntop(socket.AF_INET6, raw[8:24]), scope
    return None


@dataclass
class _RawEntry:
    name: str
    flags: int
    family: str | None
    address: str | None
    netmask: str | None
    scope_id: int


def _getifaddrs() -> list[_RawEntry]:
    """getifaddrs(3) through libc, in its order; raises OSError when unavailable."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    head = ctypes.POINTER(_Ifaddrs)()
    if libc.getifaddrs(ctypes.byref(head)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    entries: list[_RawEntry] = []
    try:
        node = head
        while node:
            ifa = node.contents
            addr = _sockaddr(ifa.ifa_addr)
            mask = _sockaddr(ifa.ifa_netmask) if addr else None
            entries.append(_RawEntry(ifa.ifa_name.decode(errors="replace"), ifa.ifa_flags,
                                     addr[0] if addr else None, addr[1] if addr else None,
                                     mask[1] if mask else None, addr[2] if addr else 0))
            node = ifa.ifa_next
    finally:
        libc.freeifaddrs(head)
    return entries


def _psutil_entries() -> list[_RawEntry]:
    """Fallback without a usable libc getifaddrs: psutil (same data, kernel order rebuilt)."""
    import psutil
    stats = psutil.net_if_stats()
    entries: list[_RawEntry] = []
    v6: list[_RawEntry] = []
    def index(name: str) -> int:
        try:
            return socket.if_nametoindex(name.split(":", 1)[0])
        except OSError:
            return 1 << 30

    for name, addrs in sorted(psutil.net_if_addrs().items(), key=lambda kv: index(kv[0])):
        st = stats.get(name)
        flag_words = set((getattr(st, "flags", "") or "").split(",")) if st else set()
        flags = ((_IFF_UP if st and st.isup else 0)
                 | (_IFF_RUNNING if "running" in flag_words else 0)
                 | (_IFF_LOOPBACK if "loopback" in flag_words else 0))
        entries.append(_RawEntry(name, flags, None, None, None, 0))
        for a in addrs:
            if a.family == socket.AF_INET:
                entries.append(_RawEntry(name, flags, INET, a.address, a.netmask, 0))
            elif a.family == socket.AF_INET6:
                host, _, scope = a.address.partition("%")
                scope_id = socket.if_nametoindex(scope) if scope else 0
                v6.append(_RawEntry(name, flags, INET6, host, a.netmask, scope_id))
    return entries + v6


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


_ARPHRD = {"1": "ethernet", "32": "infiniband", "772": "loopback", "776": "sit",
           "768": "tunnel", "769": "tunnel6", "65534": "none"}


def _kind(name: str, sys_net: Path) -> tuple[str, bool | None]:
    base = sys_net / name
    if not base.exists():
        return "unknown", None
    virtual = not (base / "device").exists()
    uevent = _read(base / "uevent") or ""
    devtype = next((line.split("=", 1)[1] for line in uevent.splitlines()
                    if line.startswith("DEVTYPE=")), None)
    if (base / "bridge").exists():
        return "bridge", virtual
    if (base / "bonding").exists():
        return "bond", virtual
    if devtype:
        return devtype, virtual  # vlan, wlan, veth is not set here, ...
    kind = _ARPHRD.get(_read(base / "type") or "", "other")
    return kind, virtual


def list_interfaces(sys_net: str | os.PathLike[str] = "/sys/class/net") -> list[Interface]:
    """Every interface of this host (this network namespace), addresses in getifaddrs() order."""
    try:
        raw = _getifaddrs()
    except (OSError, AttributeError):
        raw = _psutil_entries()
    sys_path = Path(sys_net)
    speeds: dict[str, int] = {}
    try:
        import psutil
        speeds = {n: s.speed for n, s in psutil.net_if_stats().items() if s.speed}
    except Exception:  # speed is a nicety; never a reason to fail enumeration
        pass
    order: list[str] = []
    flags: dict[str, int] = {}
    addrs: dict[str, list[Address]] = {}
    for pos, entry in enumerate(raw):
        if entry.name not in flags:
            order.append(entry.name)
            addrs[entry.name] = []
        flags[entry.name] = entry.flags
        if entry.family is not None and entry.address is not None:
            addrs[entry.name].append(Address(entry.family, entry.address, entry.netmask,
                                             entry.scope_id, pos))
    result = []
    for name in order:
        kind, virtual = _kind(name, sys_path)
        speed = _int(_read(sys_path / name / "speed")) or speeds.get(name)
        result.append(Interface(
            name=name, up=bool(flags[name] & _IFF_UP), running=bool(flags[name] & _IFF_RUNNING),
            addresses=tuple(addrs[name]), index=_int(_read(sys_path / name / "ifindex")),
            mtu=_int(_read(sys_path / name / "mtu")),
            speed_mbps=speed if speed and speed > 0 else None, kind=kind, virtual=virtual,
            loopback=bool(flags[name] & _IFF_LOOPBACK)))
    return result


def list_ib_ports(sys_ib: str | os.PathLike[str] = "/sys/class/infiniband") -> list[IbPort]:
    """InfiniBand / RoCE ports (state, link layer, rate); [] when there is no RDMA device."""
    root = Path(sys_ib)
    ports: list[IbPort] = []
    if not root.is_dir():
        return ports
    for dev in sorted(root.iterdir()):
        netdevs = tuple(sorted(p.name for p in (dev / "device" / "net").glob("*")))
        for port_dir in sorted((dev / "ports").glob("*"), key=lambda p: _int(p.name) or 0):
            state = _read(port_dir / "state") or "unknown"
            phys = _read(port_dir / "phys_state")
            ports.append(IbPort(
                device=dev.name, port=_int(port_dir.name) or 0,
                state=state.split(":", 1)[-1].strip(),
                phys_state=phys.split(":", 1)[-1].strip() if phys else None,
                link_layer=_read(port_dir / "link_layer"), rate=_read(port_dir / "rate"),
                netdevs=netdevs))
    return ports


def find(interfaces: Iterable[Interface], name: str) -> Interface | None:
    return next((i for i in interfaces if i.name == name), None)


def interface_for_address(interfaces: Iterable[Interface], address: str) -> Interface | None:
    """The local interface holding ``address``."""
    ip = ipaddress.ip_address(address.split("%")[0])
    for iface in interfaces:
        if any(a.ip == ip for a in iface.addresses):
            return iface
    return None


__all__ = [
    "Address", "Interface", "IbPort", "IfList", "SocketChoice", "NcclPrediction", "dead_entries",
    "list_interfaces", "list_ib_ports", "explain_nccl_choice", "predict_nccl_interfaces",
    "predict_nccl_bootstrap", "predict_gloo_interface", "predict_gloo_interfaces",
    "gloo_interface_names", "tp_interface_name", "propose_ifname", "parse_version",
    "socket_family", "ifname_setting", "interface_for_address", "find", "with_nccl_conf",
    "getaddrinfo_first",
]
