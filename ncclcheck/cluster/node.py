"""A node's ranks reach rank 0 through their node leader: rank 0's store holds one connection
per node and rank 0 reads one summary per node, however many ranks a node runs.

When the launch says a node runs more than one rank, rank 0's store is on another host and
the bench family (one process group over rank 0's store, for every rank) is not asked for,
the node's LOCAL_RANK 0 opens a store of its own on this host, on the port of rank 0's, and
the other ranks of the node join it instead: they announce, report and wait for the verdict
there exactly as they would at rank 0. The leader waits for them (every local rank reported,
or its deadline), folds their reports into one summary, delivers it with its own report, and
passes rank 0's verdict on. Anything that goes wrong falls back to the direct road: a leader
that cannot open its store, or a rank that finds no leader in time, joins rank 0's store.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Iterable

from ncclcheck.model import CheckResult
from ncclcheck.probes.cluster.store import STORE

from .fold import fold
from .membership import Variants, split_identity
from .reach import is_local_address, port_is_free, reach
from .session import ACK_WAIT_S, POLL_S, ClusterSession, key, open_store
from .state import Findings, Job
from .store_errors import StoreUnavailable

NODE_MARK = key("node_store")  # set by a leader in its own store: "this is a node store"
CHECK_S = 1.0  # how long a rank waits for that mark before it takes the port for something else


def relays(job: Job) -> bool:
    """Whether this job's ranks go through their node leaders (see the module's docstring)."""
    layout = job.layout
    return ("bench" not in job.families and (layout.local_world_size or 0) > 1
            and bool(layout.master_addr) and not is_local_address(layout.master_addr))


def summarize(members: Iterable[tuple[dict[str, Any], list[dict[str, Any]] | None]],
              host: str, per_rank: bool = False,
              own: tuple[int, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """One node's summary as its leader delivers it: each member's own identity (its
    settings and versions shared as variants, whether it reported) and their results folded
    with the leader's ``own`` (rank, results). ``members``: (identity, results or None when
    it never reported)."""
    variants, listed, reported = Variants(), [], [] if own is None else [own]
    for identity, results in members:
        own, variant = split_identity(identity)
        listed.append(dict(own, variant=variants.number(variant), reported=results is not None))
        if results is not None:
            rank = own.get("rank")
            reported.append((rank if isinstance(rank, int) else 1 << 30, results))
    reported.sort(key=lambda pair: pair[0])
    folded = fold((CheckResult.from_dict(d) for _, results in reported for d in results),
                  per_rank)
    return {"host": host, "variants": variants.values, "members": listed,
            "fold": folded.to_dict()}


def filled_ranks(summary: dict[str, Any]) -> list[int]:
    """The ranks a node summary fills: those of its members that reported."""
    return [m["rank"] for m in summary["members"] if m.get("reported")
            and isinstance(m.get("rank"), int) and not isinstance(m.get("rank"), bool)]


@dataclass
class NodeHub:
    """The leader's own store, which the other ranks of its node join."""

    session: ClusterSession  # the leader's handle on its node store
    expected: int  # how many other ranks the node runs

    def collect(self, deadline: float, per_rank: bool,
                own: list[dict[str, Any]]) -> tuple[dict[str, Any], list[int]]:
        """Wait until every other rank of the node reported (and every one that joined did),
        or ``deadline``; then their summary with the leader's ``own`` results, and the slots
        of this store it holds."""
        store = self.session.store
        while time.monotonic() < deadline:
            done = store.add(key("reported"), 0)
            if done >= self.expected and done >= store.add(key("slots"), 0):
                break
            time.sleep(POLL_S)
        slots = store.add(key("slots"), 0)
        hellos = self.session.read_present([key("hello", s) for s in range(1, slots + 1)], 0)
        reports = self.session.read_present([key("report", s) for s in range(1, slots + 1)], 0)
        members, included = [], []
        for slot in range(1, slots + 1):
            if key("hello", slot) not in hellos:
                continue
            raw = reports.get(key("report", slot))
            members.append((json.loads(hellos[key("hello", slot)]),
                            None if raw is None else json.loads(raw)["results"]))
            if raw is not None:
                included.append(slot)
        return summarize(members, self.session.host, per_rank,
                         (self.session.rank, own)), included

    def close(self, verdict: dict[str, Any]) -> None:
        """Pass rank 0's verdict (or why there is none) on, then keep this store up until the
        ranks it names have read it."""
        store = self.session.store
        store.set(key("done"), json.dumps(verdict))
        waiting, stop = len(verdict.get("included") or []), time.monotonic() + ACK_WAIT_S
        while waiting and time.monotonic() < stop:
            if store.add(key("left"), 0) >= waiting:
                return
            time.sleep(0.02)

    def pass_on(self, found: Findings, included: list[int]) -> None:
        """The leader's own outcome, for its node: rank 0's verdict, or why it has none."""
        if found.verdict is not None:
            self.close({"exit": found.verdict.code, "status": found.verdict.status,
                        "included": included})
            return
        row = next((c for c in found.checks if c.id == STORE.id), None)
        self.close({"exit": 1, "included": [],
                    "why": row.summary if row else (found.alone or "no job report"),
                    "category": row.category.value if row and row.category else "connection"})


def open_hub(job: Job, session_args: dict[str, Any], port: int) -> NodeHub | None:
    """The leader's store on this host (None: the port is taken here; go direct)."""
    if not port_is_free(port):
        return None
    try:
        store = open_store("127.0.0.1", port, True, min(10.0, job.clock.left()))
    except StoreUnavailable:
        return None
    store.set(NODE_MARK, job.ctx.host)
    session = ClusterSession(store, address="127.0.0.1", port=port, **session_args)
    return NodeHub(session, int(job.layout.local_world_size or 1) - 1)


def join_hub(port: int, until: float) -> Any | None:
    """This node's leader's store, reached before ``until`` (None: no leader; go direct)."""
    try:
        reach("127.0.0.1", port, until)
        store = open_store("127.0.0.1", port, False, 3.0)
        store.wait([NODE_MARK], timedelta(seconds=CHECK_S))
        return store
    except (StoreUnavailable, RuntimeError):
        return None
