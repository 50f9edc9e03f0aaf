"""The node-to-node mesh: can every node open a TCP connection to every other node, on the
address NCCL will use?

Each node leader listens on its NCCL interface address only (an ephemeral port), for the
probe's lifetime only, and answers only the probe's own handshake (a per-listener random nonce
that travels through the cluster store). It publishes ``Endpoint`` through the store, then
connects to its peers: all of them up to ``full_max`` nodes, above that the next node on a ring
plus ``random_peers`` others, so the work per node stays constant and every node is both
dialled and dialling. Each node reports its own outgoing failures, so a blocked direction
shows up exactly once, on the node that could not connect.
"""

from __future__ import annotations

import random
import secrets
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

from ncclcheck.network.master import open_connection

MAGIC = "ncclcheck-mesh/1"
FULL_MESH_MAX = 32
RANDOM_PEERS = 2
MAX_LINE = 256
WAIT_MAX_S = 10.0  # longest wait for other leaders at each step of the mesh
JOIN_MAX_S = 30.0  # ... except the first: every rank must have joined the session


@dataclass(frozen=True)
class Endpoint:
    """What a node leader publishes: where its listener is and what it runs on."""

    rank: int
    host: str
    address: str
    port: int
    nonce: str
    ifname: str | None = None
    mtu: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Endpoint":
        return cls(int(data["rank"]), str(data["host"]), str(data["address"]),
                   int(data["port"]), str(data["nonce"]), data.get("ifname"), data.get("mtu"))


@dataclass
class Attempt:
    """One directed connection: this node -> ``peer``."""

    src_rank: int
    src_host: str
    dst_rank: int
    dst_host: str
    address: str
    port: int
    kind: str  # ok, refused, timeout, unreachable, handshake, error
    seconds: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["seconds"] = round(self.seconds, 3)
        return data

    def describe(self) -> str:
        return (f"{self.src_host} (rank {self.src_rank}) -> {self.dst_host} (rank {self.dst_rank}) "
                f"{self.address}:{self.port}: {self.kind}")


def plan_peers(me: int, ranks: Sequence[int], full_max: int = FULL_MESH_MAX,
               random_peers: int = RANDOM_PEERS, seed: str = "") -> list[int]:
    """The peers ``me`` dials: everyone up to ``full_max`` nodes, else ring successor plus
    ``random_peers`` others chosen by a seed every node shares (so the plan is reproducible)."""
    nodes = sorted(set(ranks))
    others = [r for r in nodes if r != me]
    if len(nodes) <= full_max or me not in nodes:
        return others
    pos = nodes.index(me)
    successor = nodes[(pos + 1) % len(nodes)]
    rng = random.Random(f"{seed}/{me}")
    pool = [r for r in others if r != successor]
    return [successor] + sorted(rng.sample(pool, min(random_peers, len(pool))))


class Listener:
    """A TCP listener on one address that accepts only the mesh handshake with its nonce."""

    def __init__(self, address: str, rank: int, timeout: float = 2.0) -> None:
        self.address = address
        self.rank = rank
        self.nonce = secrets.token_hex(16)
        self.timeout = timeout
        self.accepted: dict[int, str] = {}  # peer rank -> peer address
        self.rejected: list[str] = []
        self._stop = threading.Event()
        info = socket.getaddrinfo(address, 0, type=socket.SOCK_STREAM,
                                  flags=socket.AI_NUMERICHOST)[0]
        self._sock = socket.socket(info[0], socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(info[4])
        self._sock.listen(128)
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, name="ncclcheck-mesh", daemon=True)
        self._lock = threading.Lock()

    def __enter__(self) -> "Listener":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        try:
            self._sock.close()
        finally:
            if self._thread.is_alive():
                self._thread.join(2.0)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = self._sock.accept()
            except (socket.timeout, TimeoutError):
                continue
            except OSError:
                return  # closed
            threading.Thread(target=self._answer, args=(conn, peer[0]), daemon=True).start()

    def _answer(self, conn: socket.socket, peer: str) -> None:
        with conn:
            conn.settimeout(self.timeout)
            try:
                line = _read_line(conn)
                parts = line.split()
                if len(parts) == 3 and parts[0] == MAGIC and parts[1] == self.nonce:
                    with self._lock:  # recorded before answering: once the dialler has its
                        self.accepted[int(parts[2])] = peer  # answer, the accept is counted
                    conn.sendall(f"{MAGIC} ok {self.rank}\n".encode())
                    return
            except (OSError, ValueError, UnicodeDecodeError):
                pass
            with self._lock:
                self.rejected.append(peer)


def _read_line(conn: socket.socket) -> str:
    data = b""
    while b"\n" not in data and len(data) < MAX_LINE:
        chunk = conn.recv(MAX_LINE - len(data))
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0].decode("ascii")


def dial(me: Endpoint, peer: Endpoint, timeout: float) -> Attempt:
    """Connect to ``peer``'s listener from ``me``'s address and complete the handshake."""
    started = time.monotonic()
    sock, reach = open_connection(peer.address, peer.port, timeout)  # NCCL binds no source

    def attempt(kind: str, error: str | None = None) -> Attempt:
        return Attempt(me.rank, me.host, peer.rank, peer.host, peer.address, peer.port, kind,
                       time.monotonic() - started, error)

    if sock is None:
        return attempt(reach.kind, reach.error)
    with sock:
        try:
            sock.settimeout(max(0.05, timeout - (time.monotonic() - started)))
            sock.sendall(f"{MAGIC} {peer.nonce} {me.rank}\n".encode())
            reply = _read_line(sock).split()
        except (OSError, UnicodeDecodeError) as exc:
            return attempt("handshake", f"no mesh answer: {exc or 'timed out'}")
    if reply[:2] != [MAGIC, "ok"]:
        return attempt("handshake", "the listener did not answer the mesh handshake "
                       "(another process on that address and port?)")
    return attempt("ok")


def dial_all(me: Endpoint, peers: Iterable[Endpoint], timeout: float) -> list[Attempt]:
    """Dial every peer at once (bounded pool); the whole call lasts about one ``timeout``."""
    peers = list(peers)
    if not peers:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(peers))) as pool:
        return list(pool.map(lambda p: dial(me, p, timeout), peers))


@dataclass
class MeshOutcome:
    """This node's view of the mesh."""

    me: Endpoint
    endpoints: dict[int, Endpoint] = field(default_factory=dict)  # every leader that published
    leaders: dict[int, str] = field(default_factory=dict)  # every leader the session knows
    attempts: list[Attempt] = field(default_factory=list)
    accepted: dict[int, str] = field(default_factory=dict)
    rejected: list[str] = field(default_factory=list)
    late: list[int] = field(default_factory=list)  # leaders that never finished the mesh
    full: bool = True

    @property
    def failures(self) -> list[Attempt]:
        return [a for a in self.attempts if not a.ok]

    @property
    def missing(self) -> list[int]:
        """Leaders that never published an endpoint."""
        return sorted(r for r in self.leaders if r not in self.endpoints)


def run_mesh(session: Any, address: str, ifname: str | None, mtu: int | None, budget: float,
             full_max: int = FULL_MESH_MAX, random_peers: int = RANDOM_PEERS,
             connect_timeout: float | None = None) -> MeshOutcome:
    """The whole mesh on this node leader, within ``budget`` seconds.

    Phases: listen and publish; gather the other leaders' endpoints; dial the planned peers;
    wait (barrier) until every leader has dialled, so no listener closes under a peer; close."""
    deadline = time.monotonic() + budget
    left = lambda: max(0.0, deadline - time.monotonic())  # noqa: E731
    with Listener(address, session.rank) as listener:
        me = Endpoint(session.rank, session.host, address, listener.port, listener.nonce,
                      ifname, mtu)
        session.publish("net/mesh/endpoint", me.to_dict())
        leaders = session.node_leaders(timeout=min(JOIN_MAX_S, left() * 0.4))
        if session.rank not in leaders:
            leaders[session.rank] = session.host
        found = session.gather("net/mesh/endpoint", ranks=list(leaders),
                               timeout=min(WAIT_MAX_S, left() * 0.3))
        endpoints = {r: Endpoint.from_dict(v) for r, v in found.items()}
        outcome = MeshOutcome(me, endpoints, dict(leaders), full=len(leaders) <= full_max)
        seed = ",".join(str(r) for r in sorted(leaders))
        targets = [endpoints[r] for r in plan_peers(session.rank, list(leaders), full_max,
                                                    random_peers, seed) if r in endpoints]
        per_dial = connect_timeout if connect_timeout is not None else min(5.0, left() * 0.3)
        per_dial = max(0.1, min(per_dial, left() * 0.5))
        outcome.attempts = dial_all(me, targets, per_dial)
        # keep listening while the others dial; a leader that died is not waited for long
        linger = min(left() - 0.2, 2 * per_dial + WAIT_MAX_S)
        outcome.late = session.barrier("net/mesh/dialled", timeout=max(0.1, linger),
                                       ranks=list(endpoints))
        outcome.accepted = dict(listener.accepted)
        outcome.rejected = list(listener.rejected)
    return outcome
