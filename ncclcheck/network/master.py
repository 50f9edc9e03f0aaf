"""MASTER_ADDR and MASTER_PORT, the facts: what the address resolves to, which local interface
routes to it, whether the port can be bound here (and who holds it), whether it answers.

Every socket operation carries a timeout, and name resolution runs in a worker thread bounded by
the caller's deadline, because a resolver stuck on an unreachable DNS server must not hang us.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import psutil

from ncclcheck.network.interfaces import Interface, interface_for_address
from ncclcheck.redact import MASK, is_secret_name, redact_text

PORT_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
RESERVED_PORTS_FILE = "/proc/sys/net/ipv4/ip_local_reserved_ports"


@dataclass
class Resolution:
    """getaddrinfo(MASTER_ADDR) as torch's TCPStore client does it (TCP, any family)."""

    name: str
    addresses: list[tuple[str, str]] = field(default_factory=list)  # (family, address)
    error: str | None = None
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return bool(self.addresses)

    @property
    def families(self) -> list[str]:
        return sorted({fam for fam, _ in self.addresses})

    @property
    def first(self) -> str | None:
        return self.addresses[0][1] if self.addresses else None


def resolve(name: str, timeout: float) -> Resolution:
    """Resolve ``name`` within ``timeout`` seconds (IP literals need no resolver)."""
    result = Resolution(name)
    try:
        ip = ipaddress.ip_address(name.strip("[]").split("%")[0])
        result.addresses = [("ipv4" if ip.version == 4 else "ipv6", name.strip("[]"))]
        return result
    except ValueError:
        pass
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["infos"] = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError, OSError) as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=target, name="ncclcheck-resolve", daemon=True)
    worker.start()
    worker.join(max(0.1, timeout))
    if worker.is_alive():
        result.timed_out = True
        result.error = f"no answer from the resolver within {timeout:.1f} s"
        return result
    if "error" in outcome:
        exc = outcome["error"]
        gai = isinstance(exc, socket.gaierror) and exc.strerror
        result.error = exc.strerror if gai else str(exc)
        return result
    seen = set()
    for family, _, _, _, sockaddr in outcome["infos"]:
        fam = "ipv4" if family == socket.AF_INET else "ipv6" if family == socket.AF_INET6 else None
        if fam and sockaddr[0] not in seen:
            seen.add(sockaddr[0])
            result.addresses.append((fam, sockaddr[0]))
    if not result.addresses:
        result.error = "resolved to no IPv4/IPv6 address"
    return result


def is_local_address(address: str, interfaces: Sequence[Interface]) -> bool:
    """True when ``address`` is one of this host's own (loopback included)."""
    ip = ipaddress.ip_address(address.split("%")[0])
    return ip.is_loopback or interface_for_address(interfaces, address) is not None


def route_source(address: str, port: int = 9) -> str | None:
    """The local source address the kernel picks to reach ``address`` (no packet is sent:
    a UDP connect only consults the routing table), or None without a route."""
    ip = ipaddress.ip_address(address.split("%")[0])
    family = socket.AF_INET if ip.version == 4 else socket.AF_INET6
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.settimeout(1.0)
        try:
            sock.connect((address, port))
            return sock.getsockname()[0]
        except OSError:
            return None


def route_interface(address: str, interfaces: Sequence[Interface]) -> Interface | None:
    """The local interface traffic to ``address`` leaves through."""
    source = route_source(address)
    return interface_for_address(interfaces, source) if source else None


# --------------------------------------------------------------------------------------------
# the port on the master host
# --------------------------------------------------------------------------------------------
@dataclass
class Holder:
    """A process listening on a port."""

    pid: int | None
    name: str | None
    cmdline: str | None
    address: str | None
    relation: str | None = None  # "this process", "an ancestor (the launcher)", None

    def describe(self) -> str:
        who = f"{self.name or 'a process'}"
        if self.pid is not None:
            who += f" (pid {self.pid})"
        if self.cmdline:
            who += f": {self.cmdline[:120]}"
        return who


@dataclass
class PortCheck:
    port: int
    free: bool
    error: str | None = None
    holders: list[Holder] = field(default_factory=list)


def can_bind(port: int, family: int = socket.AF_INET) -> tuple[bool, str | None]:
    """Bind the wildcard address on ``port`` as a store server would (SO_REUSEADDR), and let go."""
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        return False, os.strerror(exc.errno) if exc.errno else str(exc)
    with sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        try:
            sock.bind(("0.0.0.0" if family == socket.AF_INET else "::", port))
            sock.listen(1)
            return True, None
        except OSError as exc:
            return False, os.strerror(exc.errno) if exc.errno else str(exc)


def port_holders(port: int) -> list[Holder]:
    """Processes listening on TCP ``port`` in this network namespace (psutil)."""
    try:
        conns = psutil.net_connections("tcp")
    except (psutil.AccessDenied, OSError):
        return [Holder(None, None, None, None)]
    me = os.getpid()
    ancestors = set()
    try:
        ancestors = {p.pid for p in psutil.Process(me).parents()}
    except psutil.Error:
        pass
    holders = []
    seen = set()
    for conn in conns:
        if conn.status != psutil.CONN_LISTEN or not conn.laddr or conn.laddr.port != port:
            continue
        if conn.pid in seen:
            continue
        seen.add(conn.pid)
        name = cmdline = None
        if conn.pid is not None:
            try:
                proc = psutil.Process(conn.pid)
                name = proc.name()
                cmdline = safe_cmdline(proc.cmdline())
            except psutil.Error:
                pass
        relation = ("this process" if conn.pid == me else
                    "an ancestor of this process (the launcher)" if conn.pid in ancestors else None)
        holders.append(Holder(conn.pid, name, cmdline, conn.laddr.ip, relation))
    return holders


def safe_cmdline(argv: Sequence[str]) -> str:
    """A command line fit for a report: the value after a secret-looking flag
    (``--token abc``) and secret ``NAME=value`` pairs become ``***``."""
    shown = []
    for i, arg in enumerate(argv):
        previous = argv[i - 1] if i else ""
        flag = previous.startswith("-") and "=" not in previous
        shown.append(MASK if flag and is_secret_name(previous.lstrip("-")) else arg)
    return redact_text(" ".join(shown))


def check_port(port: int) -> PortCheck:
    """Free for both families a store server may bind (IPv4, and IPv6 where the kernel has it)."""
    free, error = can_bind(port)
    if free and socket.has_ipv6:
        free6, error6 = can_bind(port, socket.AF_INET6)
        if not free6 and error6 != os.strerror(errno.EAFNOSUPPORT) and \
                error6 != os.strerror(errno.EADDRNOTAVAIL):
            free, error = free6, error6
    result = PortCheck(port, free, error)
    if not free:
        result.holders = port_holders(port)
    return result


def ephemeral_range(path: str = PORT_RANGE_FILE) -> tuple[int, int] | None:
    try:
        low, high = Path(path).read_text().split()[:2]
        return int(low), int(high)
    except (OSError, ValueError):
        return None


def reserved_ports(path: str = RESERVED_PORTS_FILE) -> set[int]:
    """ip_local_reserved_ports ("8000-8010,29500"): ports outgoing connections never take."""
    ports: set[int] = set()
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return ports
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        try:
            ports.update(range(int(low), int(high or low) + 1))
        except ValueError:
            continue
    return ports


# --------------------------------------------------------------------------------------------
# reaching a port from another host
# --------------------------------------------------------------------------------------------
@dataclass
class Reach:
    """One TCP connect attempt: ``kind`` is ok, refused, timeout, unreachable or error."""

    address: str
    port: int
    kind: str
    seconds: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


UNREACHABLE = {errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EADDRNOTAVAIL, errno.ENETDOWN}


def classify(exc: BaseException) -> str:
    """refused / timeout / unreachable / error, from a connect() failure."""
    if isinstance(exc, ConnectionRefusedError):
        return "refused"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timeout"
    if isinstance(exc, OSError) and exc.errno in UNREACHABLE:
        return "unreachable"
    if isinstance(exc, OSError) and exc.errno == errno.ETIMEDOUT:
        return "timeout"
    return "error"


def open_connection(address: str, port: int, timeout: float,
                    source: str | None = None) -> tuple[socket.socket | None, Reach]:
    """connect() with a deadline; returns the socket on success (the caller closes it)."""
    ip = ipaddress.ip_address(address.split("%")[0])
    family = socket.AF_INET if ip.version == 4 else socket.AF_INET6
    started = time.monotonic()
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.settimeout(max(0.05, timeout))
    try:
        if source:
            sock.bind((source, 0))
        target: tuple[Any, ...] = (address, port)
        if family == socket.AF_INET6:
            target = socket.getaddrinfo(address, port, family, socket.SOCK_STREAM,
                                        flags=socket.AI_NUMERICHOST)[0][4]
        sock.connect(target)
    except (OSError, socket.gaierror) as exc:
        sock.close()
        code = getattr(exc, "errno", None)
        reason = os.strerror(code) if code else (str(exc) or "timed out")
        return None, Reach(address, port, classify(exc), time.monotonic() - started, reason)
    return sock, Reach(address, port, "ok", time.monotonic() - started)


def reach(address: str, port: int, timeout: float) -> Reach:
    """Can a TCP connection to address:port be opened within ``timeout``?"""
    sock, result = open_connection(address, port, timeout)
    if sock is not None:
        sock.close()
    return result
