"""torch's debug server, where the training script started it
(``torch.distributed.debug.start_debug_server()``): every rank then runs a small HTTP worker
server that answers with its own stacks (faulthandler's text) and its flight recorder (JSON).

The worker binds an ephemeral port and publishes it only in the job's TCPStore, so it is found
from the process itself: it runs threads named ``pt_workerserver``, and among the process's
listening sockets (its /proc fds, readable by its user or with ptrace rights) the one bound to
every address. Before asking anything, the port must answer ``GET /`` with the worker's own
page: no other listener of a training process (Gloo's pairs, NCCL's bootstrap, a TCPStore) is
ever sent a byte it did not expect. This is the one source that needs no ptrace rights to read
another process's stacks.
"""

from __future__ import annotations

import http.client
import os
import re
from dataclasses import dataclass

from ncclcheck.hang.faulttext import parse
from ncclcheck.hang.model import ThreadStack
from ncclcheck.hang.procstate import thread_names

WORKER_THREAD = "pt_workerserver"
BANNER = b"torch.distributed.WorkerServer"
_LISTEN = "0A"
_SOCKET = re.compile(r"socket:\[(\d+)\]")


@dataclass
class DebugServer:
    """A rank's worker server: where it listens."""

    host: str
    port: int

    def _request(self, method: str, path: str, timeout: float) -> bytes | None:
        try:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=max(0.2, timeout))
            try:
                conn.request(method, path)
                response = conn.getresponse()
                body = response.read(64 << 20)
                return body if response.status == 200 else None
            finally:
                conn.close()
        except (OSError, http.client.HTTPException):
            return None

    def stacks(self, timeout: float) -> list[ThreadStack]:
        """Every thread's stack, as the rank's faulthandler writes them."""
        body = self._request("POST", "/handler/dump_traceback", timeout)
        return parse(body.decode("utf-8", "replace")) if body else []

    def flight_recorder(self, timeout: float) -> bytes | None:
        """The rank's flight-recorder dump as JSON bytes, when it holds entries."""
        body = self._request("POST", "/handler/fr_trace_json", timeout)
        return body if body and b'"entries"' in body else None


def _listening(pid: int) -> list[tuple[str, int]]:
    """(family, port) of the process's sockets listening on every address."""
    try:
        inodes = set()
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                found = _SOCKET.match(os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                continue
            if found:
                inodes.add(found.group(1))
    except OSError:
        return []
    ports = []
    for family in ("tcp6", "tcp"):
        try:
            with open(f"/proc/{pid}/net/{family}", encoding="ascii", errors="replace") as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) < 10 or cols[3] != _LISTEN or cols[9] not in inodes:
                continue
            address, _, port = cols[1].partition(":")
            if address.strip("0") == "":  # every address (0.0.0.0 or ::)
                ports.append((family, int(port, 16)))
    return ports


def find(pid: int, avoid_ports: set[int], timeout: float) -> DebugServer | None:
    """The worker server of ``pid`` when it runs one, confirmed by its own page; None else."""
    if WORKER_THREAD not in thread_names(pid).values():
        return None
    for family, port in _listening(pid):
        if port in avoid_ports:
            continue
        server = DebugServer("::1" if family == "tcp6" else "127.0.0.1", port)
        page = server._request("GET", "/", timeout)
        if page is not None and BANNER in page:
            return server
        if family == "tcp6":  # a dual-stack socket also answers on IPv4's loopback
            server = DebugServer("127.0.0.1", port)
            page = server._request("GET", "/", timeout)
            if page is not None and BANNER in page:
                return server
    return None
