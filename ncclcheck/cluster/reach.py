"""Plain-socket looks at the store's port before torch's TCPStore touches it.

A TCPStore client that cannot connect retries inside torch and logs C++ warnings (and, when
it gives up, a stack dump) on stderr; a plain socket answers the same questions quietly and
says precisely why (refused, timed out, no route), so the one line or row a user reads is
ours.
"""

from __future__ import annotations

import errno
import socket
import time

from ncclcheck.model import Category

from .store_errors import StoreUnavailable, unresolved

RETRY_S = 0.2


def port_is_free(port: int) -> bool:
    """Whether this host could listen on ``port`` (as the store server would)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("", port))
        except OSError as exc:
            return exc.errno != errno.EADDRINUSE
    return True


def is_local_address(address: str) -> bool:
    """Whether ``address`` names this host (MASTER_ADDR on rank 0's own node): a socket can
    be bound to it only here. A name that does not resolve is not this host."""
    try:
        infos = socket.getaddrinfo(address, None, type=socket.SOCK_DGRAM)
    except (socket.gaierror, UnicodeError):
        return False
    for family, _, _, _, sockaddr in infos:
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as sock:
                sock.bind((sockaddr[0], 0))
            return True
        except OSError:
            continue
    return False


def _reason(exc: OSError) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (nothing listens there: rank 0 has not started, or is not on MASTER_ADDR)"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "connection timed out (a firewall drops it, or the address is wrong)"
    return exc.strerror or str(exc)


def reach(address: str, port: int, until: float) -> None:
    """Return once a TCP connection to ``address:port`` succeeds; retry until ``until``
    (time.monotonic()), then raise StoreUnavailable naming the address, port and reason."""
    began, last = time.monotonic(), None
    while True:
        left = until - time.monotonic()
        try:
            with socket.create_connection((address, port), timeout=max(0.2, min(2.0, left))):
                return
        except socket.gaierror as exc:
            raise unresolved(address, exc) from None
        except OSError as exc:
            last = exc
        if time.monotonic() + RETRY_S >= until:
            break
        time.sleep(RETRY_S)
    waited = time.monotonic() - began
    reason = _reason(last) if last is not None else "no answer"
    raise StoreUnavailable(
        Category.CONNECTION,
        f"cannot reach the rank-0 store at {address}:{port}: {reason}; tried for {waited:.0f} s",
        f"Make sure rank 0 runs on MASTER_ADDR={address}, that this node can open TCP port "
        f"{port} there (firewall, security group) and that every rank uses the same "
        "MASTER_ADDR, MASTER_PORT and --store-port; a rank 0 that starts much later needs a "
        "larger --timeout.", address=address, port=port, error=reason)
