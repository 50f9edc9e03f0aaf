"""Which interface NCCL and Gloo will pick: pure rules, environment + interface list in, choice
out. They never load libnccl, so they work on a node where the library is missing, and tests
can hand them any interface list.

NCCL's rules (src/misc/socket.cc ``ncclFindInterfaces``, src/os/linux.cc
``ncclOsFindInterfaces``; the list grammar is ``iflist``):

* ``NCCL_SOCKET_IFNAME`` is used only when longer than one character.
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

import ipaddress
import socket
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

from ncclcheck.ncclib.version import rules_version
from ncclcheck.network.iflist import MAX_IFS, IfList, ifname_setting, socket_family
from ncclcheck.network.model import INET, INET6, Address, Interface, SocketChoice

LATEST_RULES = (2, 28, 0)  # the newest version where the selection rules changed


def parse_version(version: Any) -> tuple[int, int, int]:
    """The version whose selection rules apply: ``"2.27.7"``, ``(2, 27, 7)``, ``22707``
    (ncclGetVersion's code); None or unreadable means the latest rules."""
    return rules_version(version, LATEST_RULES)


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


def propose_ifname(interfaces: Sequence[Interface]) -> str | None:
    """A NCCL_SOCKET_IFNAME value worth trying: the running interfaces with a routable address
    that are neither loopback nor a container / VM bridge, as an exact list."""
    good = [i.name for i in interfaces
            if i.running and not i.loopback and not i.is_virtual_bridge
            and any(not a.is_link_local and not a.is_loopback for a in i.addresses)]
    return ("=" + ",".join(good)) if good else None


def socket_link_speed(env: Mapping[str, str], interfaces: Sequence[Interface]) -> int | None:
    """The link speed (Mb/s) NCCL's sockets can expect: that of the first interface
    NCCL_SOCKET_IFNAME selects (NCCL's list grammar) that reports one, else the fastest
    non-loopback interface that does. ``env`` is the environment as NCCL sees it (nccl.conf
    included); None when no interface reports a speed."""
    setting = ifname_setting(env)
    wanted = IfList.parse(setting) if setting is not None else None
    speeds = [i.speed_mbps for i in interfaces
              if i.speed_mbps and not (i.loopback or i.name == "lo")
              and (wanted is None or wanted.matches(i.name))]
    if not speeds:
        return None
    return speeds[0] if wanted is not None else max(speeds)
