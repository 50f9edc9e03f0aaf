"""Enumeration: this host's interfaces and InfiniBand ports, read once, for every family.

``getifaddrs()`` (the very call NCCL and Gloo make, so the address order is theirs), psutil
for speed (and as the fallback without a usable libc), /sys/class/net for MTU and kind,
/sys/class/infiniband for RDMA ports. Nothing here judges what it reads.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from ncclcheck.network.model import INET, INET6, Address, IbPort, Interface

# Where the kernel describes this host's interfaces and RDMA ports (tests pass fake trees).
SYS_CLASS_NET = "/sys/class/net"
SYS_CLASS_INFINIBAND = "/sys/class/infiniband"

_IFF_UP = 0x1
_IFF_LOOPBACK = 0x8
_IFF_RUNNING = 0x40


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
        # psutil's isup is IFF_UP and IFF_RUNNING: an interface that is up without a carrier
        # (docker0 with no container) is up for the kernel; its flags say so where psutil
        # gives them (5.9.3 on)
        up = "up" in flag_words if flag_words - {""} else bool(st and st.isup)
        flags = ((_IFF_UP if up else 0)
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


def list_interfaces(sys_net: str | os.PathLike[str] = SYS_CLASS_NET) -> list[Interface]:
    """Every interface of this host (this network namespace), addresses in getifaddrs() order."""
    try:
        raw = _getifaddrs()
    except (OSError, AttributeError):
        raw = _psutil_entries()
    sys_path = Path(sys_net)
    speeds: dict[str, int] = {}
    try:
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


def list_ib_ports(sys_ib: str | os.PathLike[str] = SYS_CLASS_INFINIBAND) -> list[IbPort]:
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


def list_ib_devices(sys_ib: str | os.PathLike[str] = SYS_CLASS_INFINIBAND) -> list[str]:
    """The RDMA device names (mlx5_0, ...) that have ports; [] when there is none."""
    return sorted({port.device for port in list_ib_ports(sys_ib)})
