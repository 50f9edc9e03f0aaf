"""``bench --isolate`` on a launched job: each round's pair tests, all at once, as subgroups of
the sweep's process group, with rank 0 planning and the job's store carrying plans and times.

Keys, under the store prefix "bench/isolate": ``plan/K`` (round K's pairs of node indices, the
set-up with round 0, or ``{"stop": ...}`` to end), ``K/t/RANK`` (a member's fastest all-reduce,
or its error) and the counter ``K/n``. Every rank creates every pair's subgroup of
a round, in the plan's order (torch numbers groups by creation, so all ranks must create the
same ones), and only the members of a pair run its all-reduces. Nothing waits past the
deadline: rank 0 gives up on a round's missing times, the others on a plan that never comes.
torch is imported in the functions that run the tests only.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any, Callable

from .analysis import SweepResult
from .isolate import Isolation, PairTest, Round, isolate
from .metrics import SizeRow, bandwidths
from .sizes import DTYPES

PREFIX = "isolate"
STOP = json.dumps({"stop": True})
PAIR_ITERS = 5  # "a few": a pair's busbw is read from the fastest of these
OnRound = Callable[[int, Round, list[PairTest], float], None]


@dataclass
class PairSetup:
    """What every rank needs to run the rounds: the nodes (their ranks), the message and the
    time one round may take."""

    nodes: list[list[int]]
    hosts: list[str]
    nbytes: int
    dtype: str
    iters: int
    warmup: int
    timeout: float


@dataclass
class Isolated:
    """Rank 0's outcome: the rounds run (None when they could not be) and why not."""

    isolation: Isolation | None
    hosts: list[str] = field(default_factory=list)
    nbytes: int = 0
    reason: str = ""


def pair_bytes(rows: list[SizeRow]) -> int:
    """The message of the pair tests: the largest size of the sweep within 10% of its peak
    busbw, where the all-reduce was bound by bandwidth rather than latency."""
    peak = max(r.busbw_gbps for r in rows)
    return max(r.bytes for r in rows if r.busbw_gbps >= 0.9 * peak)


def node_ranks(hosts: dict[int, str | None]) -> tuple[list[str], list[list[int]]]:
    """Hosts in the order of their first rank, and each host's ranks."""
    by_host: dict[str, list[int]] = {}
    for rank in sorted(hosts):
        by_host.setdefault(hosts[rank] or f"rank{rank}", []).append(rank)
    return list(by_host), list(by_host.values())


def plan_setup(result: SweepResult, rows: list[SizeRow], iters: int, warmup: int,
               timeout: float) -> PairSetup | str:
    """The set-up of the pair tests, or why they cannot run after this sweep."""
    if result.missing or any(o.get("error") for o in result.outcomes.values()):
        return "the sweep did not complete on every rank"
    if not rows or all(r.busbw_gbps <= 0 for r in rows):
        return "the sweep measured no size"
    hosts, nodes = node_ranks(result.hosts)
    if len(nodes) < 2:
        return f"every rank runs on one node ({hosts[0] if hosts else 'this host'})"
    return PairSetup(nodes, hosts, pair_bytes(rows), result.dtype, min(iters, PAIR_ITERS),
                     max(1, min(warmup, 2)), timeout)


def _store(session: Any) -> Any:
    import torch.distributed as dist  # deferred: seconds to import; only a sweep needs it
    return dist.PrefixStore(f"bench/{PREFIX}", session.store)


def lead(session: Any, setup: PairSetup | str, mode: str, threshold: float,
         min_busbw: float | None, end: float, on_round: OnRound | None = None) -> Isolated:
    """Rank 0: plan and run the rounds (isolate.py decides which), then tell the others to
    stop. ``setup`` is a reason when nothing can run; the others are told so at once."""
    store = _store(session)
    if isinstance(setup, str):
        store.set("plan/0", json.dumps({"stop": True, "failed": True}))
        return Isolated(None, reason=setup)

    def measure(index: int, rnd: Round) -> tuple[list[PairTest], float]:
        started = time.monotonic()
        plan: dict[str, Any] = {"pairs": [list(p) for p in rnd.pairs]}
        if index == 0:
            plan["setup"] = asdict(setup)
        store.set(f"plan/{index}", json.dumps(plan))
        _run_round(store, setup, index, rnd.pairs, int(session.rank))
        tests = _collect(store, setup, index, rnd, min(end, started + setup.timeout + 2.0))
        seconds = time.monotonic() - started
        if on_round is not None:
            on_round(index, rnd, tests, seconds)
        return tests, seconds

    try:
        iso = isolate(mode, len(setup.nodes), measure, threshold=threshold, min_busbw=min_busbw,
                      time_left=lambda: end - time.monotonic())
    finally:
        store.set(f"plan/{_next_plan(store)}", STOP)
        _release(failed=False)
    return Isolated(iso, setup.hosts, setup.nbytes)


def _next_plan(store: Any) -> int:
    index = 0
    while store.check([f"plan/{index}"]):
        index += 1
    return index


def follow(session: Any, end: float) -> None:
    """Every rank but 0: run the rounds rank 0 publishes until it says stop or ``end``."""
    store = _store(session)
    setup: PairSetup | None = None
    index = 0
    failed = False
    while time.monotonic() < end:
        try:
            store.wait([f"plan/{index}"], timedelta(seconds=max(0.01, end - time.monotonic())))
        except Exception:  # rank 0 never published: the deadline passed
            break
        plan = json.loads(store.get(f"plan/{index}"))
        if plan.get("stop"):
            failed = bool(plan.get("failed"))
            break
        if "setup" in plan:
            setup = PairSetup(**plan["setup"])
        if setup is None:
            break
        _run_round(store, setup, index, [tuple(p) for p in plan["pairs"]], int(session.rank))
        index += 1
    _release(failed)


def _release(failed: bool) -> None:
    """Take down the sweep's group once the rounds are over; after a failed sweep it is left
    as the sweep leaves it (a broken NCCL communicator may hang on clean-up)."""
    import torch.distributed as dist  # deferred: seconds to import; only a sweep needs it
    if failed or not dist.is_initialized():
        return
    try:
        dist.destroy_process_group()
    except Exception:
        pass


def _run_round(store: Any, setup: PairSetup, index: int, pairs: Any, rank: int) -> None:
    """Create the round's subgroups (all of them, in order) and time this rank's pair."""
    import torch.distributed as dist  # deferred: seconds to import; only a sweep needs it
    mine = None
    for a, b in pairs:
        ranks = sorted(setup.nodes[a] + setup.nodes[b])
        group = dist.new_group(ranks, timeout=timedelta(seconds=setup.timeout))
        if rank in ranks:
            mine = group
    if mine is None:
        return
    try:
        outcome: dict[str, Any] = {"time_s": _time_pair(dist, mine, setup)}
    except Exception as exc:  # reported as the pair's error: the pair is slow, not the job
        outcome = {"error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
                   if str(exc).strip() else type(exc).__name__}
    store.set(f"{index}/t/{rank}", json.dumps(outcome))
    store.add(f"{index}/n", 1)
    try:
        dist.destroy_process_group(mine)
    except Exception:
        pass


def _time_pair(dist: Any, group: Any, setup: PairSetup) -> float:
    """This rank's fastest all-reduce of the set-up's message within its pair: contention
    from other work (other pairs on shared CPUs, the OS) only ever adds time, while a slow
    NIC, link or PCIe path slows every iteration."""
    import torch  # deferred: seconds to import; only a sweep needs it
    on_gpu = dist.get_backend(group) == "nccl"
    device = torch.device("cuda", torch.cuda.current_device()) if on_gpu else torch.device("cpu")
    count = max(1, setup.nbytes // DTYPES[setup.dtype][0])
    buf = torch.zeros(count, dtype=getattr(torch, setup.dtype), device=device)
    limit = time.monotonic() + setup.timeout
    for _ in range(setup.warmup):
        _wait(dist.all_reduce(buf, group=group, async_op=True), on_gpu, limit)
    _wait(dist.all_reduce(torch.zeros(1, device=device), group=group, async_op=True), on_gpu,
          limit)
    times = []
    for _ in range(setup.iters):
        start = time.perf_counter()
        _wait(dist.all_reduce(buf, group=group, async_op=True), on_gpu, limit)
        times.append(time.perf_counter() - start)
    return min(times)


def _wait(work: Any, on_gpu: bool, limit: float) -> None:
    """Gloo's group timeout bounds ``wait``; NCCL work is polled against ``limit``."""
    if not on_gpu:
        work.wait()
        return
    while not work.is_completed():
        if time.monotonic() > limit:
            raise TimeoutError("the pair's all-reduce did not complete in time")
        time.sleep(0.0002)


def _collect(store: Any, setup: PairSetup, index: int, rnd: Round,
             limit: float) -> list[PairTest]:
    """Rank 0: every member's time of round ``index`` (until ``limit``) -> one test per pair,
    timed by its slowest rank; a pair with an error or a missing rank is a failed test."""
    members = [r for a, b in rnd.pairs for r in setup.nodes[a] + setup.nodes[b]]
    while int(store.add(f"{index}/n", 0)) < len(members) and time.monotonic() < limit:
        time.sleep(0.01)
    keys = {r: f"{index}/t/{r}" for r in members}
    present = [r for r in members if store.check([keys[r]])]
    values = store.multi_get([keys[r] for r in present]) if present else []
    times = {r: json.loads(v) for r, v in zip(present, values)}
    tests = []
    for a, b in rnd.pairs:
        ranks = setup.nodes[a] + setup.nodes[b]
        got = [times.get(r) for r in ranks]
        errors = [g.get("error") for g in got if g and g.get("error")]
        if errors or any(g is None for g in got):
            missing = [r for r, g in zip(ranks, got) if g is None]
            error = errors[0] if errors else f"no time from rank(s) {missing} before the deadline"
            tests.append(PairTest(a, b, 0.0, index, rnd.reference, 0.0, error))
            continue
        slowest = max(g["time_s"] for g in got)
        busbw = bandwidths(setup.nbytes, slowest, len(ranks))[1]
        tests.append(PairTest(a, b, busbw, index, rnd.reference, slowest))
    return tests
