"""The cluster session: every rank's connection to one TCPStore hosted by rank 0.

The store is torch's TCPStore, never NCCL: NCCL may be the very thing that is broken, and the
store needs nothing but TCP to MASTER_ADDR. Every key this module writes starts with
``ncclcheck/``, so probe families can build their own process groups on the same store through
``torch.distributed.PrefixStore`` without colliding with it.

Waiting is done by the store server (``wait`` on keys), not by polling every key, so a gather
over N ranks costs O(N) and a barrier costs one counter per rank.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Iterable

from ncclcheck.model import Category

from .reach import port_is_free, reach
from .store_errors import StoreUnavailable, unresolved

PREFIX = "ncclcheck"
POLL_S = 0.05
CHUNK = 512  # keys per store request (see _chunks)
ACK_WAIT_S = 2.0  # rank 0 keeps the store up this long for ranks still reading the verdict
STORE_THREAD = "ncclcheck-store"  # the thread that opens the store (it may outlive its deadline)


def key(*parts: object) -> str:
    return "/".join((PREFIX,) + tuple(str(p) for p in parts))


def _chunks(keys: list[str]) -> list[list[str]]:
    """Keys in slices of CHUNK: the store's server takes far longer than N times as long for a
    request of N times as many keys (100k keys in one wait: seconds; in chunks: 0.2 s)."""
    return [keys[i:i + CHUNK] for i in range(0, len(keys), CHUNK)]


def _seconds(value: float) -> timedelta:
    return timedelta(seconds=max(0.001, value))


@dataclass
class ClusterSession:
    """One rank's handle on the job (see docs/cluster.md for the protocol).

    ``store`` is the live TCPStore; wrap it in a PrefixStore to build a process group.
    """

    store: Any
    rank: int
    world_size: int
    local_rank: int
    node_rank: int | None
    host: str
    address: str
    port: int
    slot: int = 0
    reporting: bool = False  # this process prints the job report (the first rank 0)
    nodes: int | None = None  # how many nodes the launch has, when it says
    relayed: bool = False  # ``store`` is this node's leader's, which relays to rank 0's

    @property
    def is_node_leader(self) -> bool:
        return self.local_rank == 0 and not self.relayed

    # -- the interface probe families use ------------------------------------------------
    def publish(self, name: str, value: Any) -> None:
        """Publish a JSON value under ``name`` for this rank."""
        self.store.set(key("data", name, self.rank), json.dumps(value))

    def gather(self, name: str, ranks: Iterable[int] | None = None,
               timeout: float = 30.0) -> dict[int, Any]:
        """Values published under ``name`` by ``ranks`` (default all); late ranks are absent."""
        wanted = self._ranks(ranks)
        keys = [key("data", name, r) for r in wanted]
        values = self.read_present(keys, timeout)
        return {r: json.loads(values[k]) for r, k in zip(wanted, keys) if k in values}

    def barrier(self, name: str, timeout: float, ranks: Iterable[int] | None = None) -> list[int]:
        """Wait for ``ranks`` (default all) to arrive; returns those that did not ([] if all did)."""
        wanted = self._ranks(ranks)
        opened = key("barrier", name, "open")
        if self.rank in wanted:
            self.store.set(key("barrier", name, self.rank), "1")
            if self.store.add(key("barrier", name, "count"), 1) >= len(wanted):
                self.store.set(opened, "1")
        if self.wait([opened], timeout):
            return []
        return [r for r in wanted if not self.store.check([key("barrier", name, r)])]

    def node_leaders(self, timeout: float) -> dict[int, str]:
        """rank -> host of every node leader (LOCAL_RANK 0) that connected within ``timeout``."""
        deadline = time.monotonic() + timeout
        # every rank announced, or (when the other ranks of a node reach rank 0 through their
        # leader) every node's leader did
        while (self.store.add(key("hellos"), 0) < self.world_size
               and not (self.nodes and self.store.add(key("leaders"), 0) >= self.nodes)
               and time.monotonic() < deadline):
            time.sleep(POLL_S)
        count = self.store.add(key("leaders"), 0)
        values = self.read_present([key("leader", i) for i in range(1, count + 1)], 0)
        leaders = (json.loads(v) for v in values.values())
        return {entry["rank"]: entry["host"] for entry in sorted(leaders, key=lambda e: e["rank"])}

    # -- store helpers ---------------------------------------------------------------------
    def wait(self, keys: list[str], timeout: float) -> bool:
        """True when every key exists before ``timeout`` seconds (the server does the waiting,
        a chunk of keys at a time)."""
        deadline = time.monotonic() + timeout
        for part in _chunks(keys):
            if not self._wait(part, deadline - time.monotonic()):
                return False
        return True

    def _wait(self, keys: list[str], timeout: float) -> bool:
        if timeout <= 0:
            return bool(self.store.check(keys))
        try:
            self.store.wait(keys, _seconds(timeout))
            return True
        except RuntimeError as exc:  # DistStoreError: wait timeout (a RuntimeError subclass)
            if "timeout" in str(exc).lower() or "timed out" in str(exc).lower():
                return False
            raise

    def read_present(self, keys: list[str], timeout: float) -> dict[str, bytes]:
        """The keys that exist within ``timeout`` and their values, a chunk per multi_get."""
        present = keys if self.wait(keys, timeout) else [
            k for part in _chunks(keys) for k in self._present(part)]
        values: dict[str, bytes] = {}
        for part in _chunks(present):
            values.update(zip(part, self.store.multi_get(part)))
        return values

    def _present(self, keys: list[str]) -> list[str]:
        """The keys that exist, halving the list where one is missing: a few round trips per
        missing key, not one per key."""
        if not keys or self.store.check(keys):
            return keys
        if len(keys) == 1:
            return []
        half = len(keys) // 2
        return self._present(keys[:half]) + self._present(keys[half:])

    def _ranks(self, ranks: Iterable[int] | None) -> list[int]:
        return list(range(self.world_size)) if ranks is None else sorted(set(ranks))

    # -- joining the job -------------------------------------------------------------------
    def announce(self, identity: dict[str, Any]) -> None:
        """Say who this process is as soon as it is connected, so that rank 0 can name it
        even if it dies before reporting."""
        if self.is_node_leader:
            seq = self.store.add(key("leaders"), 1)
            self.store.set(key("leader", seq), json.dumps({"rank": self.rank, "host": self.host}))
        self.slot = self.store.add(key("slots"), 1)
        self.store.set(key("hello", self.slot), json.dumps(identity))
        self.store.add(key("hellos"), 1)

    def deliver(self, results: list[dict[str, Any]], node: dict[str, Any] | None = None,
                filled: Iterable[int] = ()) -> None:
        """Publish this process's report under its own slot (slots never collide), and a node
        leader's ``node`` summary of the other ranks of its node, then mark the ranks filled
        (this one and ``filled``, the node's that reported): rank 0 stops waiting early only
        when every rank 0..N-1 is filled, so a duplicated, negative or out-of-range rank never
        completes the job."""
        report: dict[str, Any] = {"rank": self.rank, "results": results}
        if node is not None:
            report["node"] = node
        self.store.set(key("report", self.slot), json.dumps(report))
        marks = sorted({r for r in [self.rank, *filled] if r >= 0})
        if marks:
            self.store.multi_set([key("filled", r) for r in marks], [str(self.slot)] * len(marks))
        self.store.add(key("reported"), 1)

    def close_job(self, code: int, status: str, included: list[int]) -> None:
        """Rank 0, once the job report is out: publish the job's verdict (exit code, status,
        the slots in the report), then keep the store, which lives in this process, up until
        the other ranks in the report have read it."""
        self.store.set(key("done"), json.dumps({"exit": code, "status": status,
                                                "included": included}))
        waiting, stop = len(included) - 1, time.monotonic() + ACK_WAIT_S
        while waiting > 0 and time.monotonic() < stop:
            if self.store.add(key("left"), 0) >= waiting:
                return
            time.sleep(0.02)


def join_store(address: str, port: int, rank: int, timeout: float,
               reach_until: float | None = None) -> tuple[Any, bool]:
    """The store for this rank, and whether this process is the one that reports.

    Other ranks first reach the port with a plain socket until ``reach_until`` (quietly: a
    TCPStore client that retries prints C++ warnings and stack dumps). Rank 0 hosts the store.
    A second process that also claims rank 0 (RANK exported as 0 on every node is a classic)
    joins the first one's store as an ordinary member, so the job report shows rank 0 claimed
    twice instead of two half reports."""
    if rank != 0:
        until = reach_until if reach_until is not None else time.monotonic() + timeout
        reach(address, port, until)
        # deferred: torch takes seconds on a loaded host, which must not count as the store's time
        import torch.distributed  # noqa: F401
        # Reached: the store answers at once unless what listens is not a store (or it died).
        return open_store(address, port, False, min(10.0, max(1.0, until - time.monotonic()))), False
    if not port_is_free(port):
        existing = _job_store(address, port, min(3.0, timeout))
        if existing is None:
            raise _store_error(address, port, True, timeout, OSError("EADDRINUSE"))
        return existing, False
    try:
        store = open_store(address, port, True, timeout)
    except StoreUnavailable as exc:
        if exc.category != Category.PORT_IN_USE:
            raise
        existing = _job_store(address, port, min(3.0, timeout))
        if existing is None:
            raise
        return existing, False
    # On another host a "rank 0" binds its own server but its client reaches MASTER_ADDR's.
    return store, store.add(key("servers"), 1) == 1


def _job_store(address: str, port: int, timeout: float) -> Any | None:
    """The ncclcheck store already listening on the port, or None when the port is held by
    something else (then it is simply taken)."""
    try:
        reach(address, port, time.monotonic() + min(1.0, timeout))
        store = open_store(address, port, False, timeout)
        store.wait([key("servers")], _seconds(min(1.0, timeout)))
        return store
    except (StoreUnavailable, RuntimeError):
        return None


def open_store(address: str, port: int, is_server: bool, timeout: float) -> Any:
    """Open (rank 0) or reach (others) the TCPStore, bounded by ``timeout`` even when the
    client's own retries would run longer; raises StoreUnavailable with the reason."""
    # deferred: torch takes seconds; imported first, so a slow import is not taken for a silent store
    import torch.distributed as dist

    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            outcome["error"] = unresolved(address, exc)
            return
        try:
            outcome["store"] = dist.TCPStore(address, port, None, is_server, _seconds(timeout),
                                             wait_for_workers=False)
        except BaseException as exc:  # a store failure is a finding, not a traceback
            outcome["error"] = exc

    worker = threading.Thread(target=target, name=STORE_THREAD, daemon=True)
    worker.start()
    worker.join(timeout + 1.0)
    error = outcome.get("error")
    if isinstance(error, StoreUnavailable):
        raise error
    if "store" in outcome:
        return outcome["store"]
    raise _store_error(address, port, is_server, timeout, error)


def _store_error(address: str, port: int, is_server: bool, timeout: float,
                 exc: BaseException | None) -> StoreUnavailable:
    text = str(exc).strip().splitlines()[0] if exc is not None and str(exc).strip() else ""
    details = {"address": address, "port": port, "error": text or None}
    if is_server and ("EADDRINUSE" in text or "address already in use" in text.lower()):
        return StoreUnavailable(
            Category.PORT_IN_USE,
            f"rank 0 cannot open the store: TCP port {port} is already in use on this host",
            f"Free port {port} (see `ss -ltnp 'sport = :{port}'`) or choose another one for every "
            "rank: --store-port PORT (or a different MASTER_PORT).", **details)
    if is_server:
        return StoreUnavailable(
            Category.CONNECTION,
            f"rank 0 cannot open the store at {address}:{port}: "
            f"{text or f'its own connection to {address}:{port} got no answer within {timeout:.1f} s'}",
            f"MASTER_ADDR={address} must name this (rank-0) host and port {port} must be "
            "free: fix MASTER_ADDR or pass --store-port PORT on every rank.", **details)
    reason = text or (f"the port accepts connections but gave no store answer within "
                      f"{timeout:.0f} s (something other than rank 0's store listens there, or "
                      "rank 0 stopped)")
    return StoreUnavailable(
        Category.CONNECTION,
        f"cannot reach the rank-0 store at {address}:{port}: {reason}",
        f"Make sure rank 0 runs on MASTER_ADDR={address}, that this node can open TCP port {port} "
        "there (firewall, security group) and that every rank uses the same MASTER_ADDR, "
        "MASTER_PORT and --store-port.", **details)
