"""``bench --isolate`` on a launched job: each round's pair tests, all at once, as subgroups of
the sweep's process group, with rank 0 planning and the job's store carrying plans and times.

Keys, under the store prefix "bench/isolate": ``plan/K`` (round K's pairs of node indices and
the seconds each pair may measure, the set-up with round 0, or ``{"stop": ...}`` to end),
``K/t/RANK`` (a member's measurement, or its error) and the counter ``K/n``. A pair measures
what goes through within its budget (pair_budget.py: a smaller message or fewer iterations
when it is slow), and no all-reduce outlives the budget: Gloo's own per-operation timeout,
NCCL's work polled against it. Every rank creates every pair's subgroup of
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
from .pair_budget import BoundedPair, PairMeasurement
from .sizes import DTYPES

PREFIX = "isolate"
STOP = json.dumps({"stop": True})
PAIR_ITERS = 5  # "a few": a pair's busbw is read from the fastest of these
FAIR = 3.0      # a pair's budget is at least this many times a healthy pair's whole test
FIRST_OVERHEAD_S = 1.0  # a round's set-up (subgroups, store) before any round has shown its own
GRACE_S = 2.0   # rank 0 waits this long past a pair's budget for its members' times
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
    healthy_s: float = 0.0  # the sweep's time per all-reduce of ``nbytes`` (the whole job)


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
    nbytes = pair_bytes(rows)
    healthy = next((r.time_us for r in rows if r.bytes == nbytes), 0.0) / 1e6
    return PairSetup(nodes, hosts, nbytes, result.dtype, min(iters, PAIR_ITERS),
                     max(1, min(warmup, 2)), timeout, healthy)


def pair_budget(setup: PairSetup, share: float, overhead: float) -> float:
    """The seconds each pair of a round may measure: the round's share less its set-up, at
    least ``FAIR`` times a healthy pair's whole test (so a healthy pair is never cut short
    and judged slow for it), at most the set-up's collective timeout."""
    healthy = FAIR * (setup.iters + setup.warmup + 2) * setup.healthy_s
    return max(0.5, min(setup.timeout, max(share - overhead, healthy)))


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

    overheads: list[float] = []

    def measure(index: int, rnd: Round, share: float) -> tuple[list[PairTest], float]:
        started = time.monotonic()
        overhead = max(overheads, default=FIRST_OVERHEAD_S)
        budget = pair_budget(setup, share, overhead)
        plan: dict[str, Any] = {"pairs": [list(p) for p in rnd.pairs], "budget_s": budget}
        if index == 0:
            plan["setup"] = asdict(setup)
        store.set(f"plan/{index}", json.dumps(plan))
        _run_round(store, setup, index, rnd.pairs, int(session.rank), budget)
        tests, spent = _collect(store, setup, index, rnd,
                                min(end, started + overhead + budget + GRACE_S), budget)
        seconds = time.monotonic() - started
        overheads.append(max(0.0, seconds - spent))
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
        _run_round(store, setup, index, [tuple(p) for p in plan["pairs"]], int(session.rank),
                   float(plan.get("budget_s", setup.timeout)))
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


def _run_round(store: Any, setup: PairSetup, index: int, pairs: Any, rank: int,
               budget: float) -> None:
    """Create the round's subgroups (all of them, in order) and measure this rank's pair."""
    import torch.distributed as dist  # deferred: seconds to import; only a sweep needs it
    mine = None
    for a, b in pairs:
        ranks = sorted(setup.nodes[a] + setup.nodes[b])
        group = dist.new_group(ranks, timeout=timedelta(seconds=budget + GRACE_S))
        if rank in ranks:
            mine = group
    if mine is None:
        return
    try:
        outcome: dict[str, Any] = _measured(_time_pair(dist, mine, setup, budget))
    except Exception as exc:  # reported as the pair's error: the pair is slow, not the job
        outcome = {"error": _error_text(exc, budget)}
    store.set(f"{index}/t/{rank}", json.dumps(outcome))
    store.add(f"{index}/n", 1)
    try:
        dist.destroy_process_group(mine)
    except Exception:
        pass


def _error_text(exc: BaseException, budget: float) -> str:
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    what = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return f"could not finish an all-reduce within its {budget:.3g} s ({what})"


def _measured(m: PairMeasurement) -> dict[str, Any]:
    return {"time_s": m.time_s, "bytes": m.nbytes, "iters": m.iters, "spent_s": m.spent_s,
            "reduced": m.reduced}


class _Cut(Exception):
    """An all-reduce of the pair did not finish before the pair's limit."""


def _time_pair(dist: Any, group: Any, setup: PairSetup, budget: float) -> PairMeasurement:
    """This pair's measurement within ``budget`` seconds (pair_budget.py decides the steps).

    Every step is followed by a one-element MAX all-reduce of its time, so all members feed
    the planner the same time (the pair's slowest rank's) and run the same steps. A step cut
    short by the limit ends the test: what was measured before it stands, and with nothing
    measured the pair failed. The slowest rank's fastest iteration is the pair's time:
    contention from other work only ever adds time, while a slow NIC, link or PCIe path slows
    every iteration."""
    import torch  # deferred: seconds to import; only a sweep needs it
    on_gpu = dist.get_backend(group) == "nccl"
    device = torch.device("cuda", torch.cuda.current_device()) if on_gpu else torch.device("cpu")
    elem = DTYPES[setup.dtype][0]
    buf = torch.zeros(max(1, setup.nbytes // elem), dtype=getattr(torch, setup.dtype),
                      device=device)
    clock = torch.zeros(1, dtype=torch.float64, device=device)
    limit = time.monotonic() + budget
    _all_reduce(dist, group, clock, on_gpu, limit, max_op=False)  # both ends are here
    bounded = BoundedPair(setup.nbytes, elem, setup.iters, setup.warmup,
                          max(0.0, limit - time.monotonic()))
    step = bounded.next_step()
    while step is not None:
        try:
            start = time.perf_counter()
            _all_reduce(dist, group, buf[:step.nbytes // elem], on_gpu, limit)
            clock.fill_(time.perf_counter() - start)
            _all_reduce(dist, group, clock, on_gpu, limit, max_op=True)
        except Exception:
            measured = bounded.result()
            if measured is None:
                raise
            return measured
        bounded.record(float(clock.item()))
        step = bounded.next_step()
    measured = bounded.result()
    if measured is None:  # a budget of 0: not even one step
        raise _Cut("no time left for a single all-reduce")
    return measured


def _all_reduce(dist: Any, group: Any, tensor: Any, on_gpu: bool, limit: float,
                max_op: bool = False) -> None:
    """One all-reduce that never outlives ``limit``: Gloo is given the time left as the
    operation's own timeout; NCCL work is polled against it."""
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.MAX if max_op else dist.ReduceOp.SUM
    left = limit - time.monotonic()
    if left <= 0:
        raise _Cut("the pair's time ran out")
    opts.timeout = timedelta(seconds=left)
    work = group.allreduce([tensor], opts)
    if not on_gpu:
        work.wait()
        return
    while not work.is_completed():
        if time.monotonic() > limit:
            raise _Cut("the pair's all-reduce did not complete in time")
        time.sleep(0.0002)


def _collect(store: Any, setup: PairSetup, index: int, rnd: Round, limit: float,
             budget: float) -> tuple[list[PairTest], float]:
    """Rank 0: every member's outcome of round ``index`` (until ``limit``) -> one test per
    pair, timed by its slowest rank, and the longest time a pair spent measuring. A pair
    with an error or a missing rank is a failed test (the slowest result there is)."""
    members = [r for a, b in rnd.pairs for r in setup.nodes[a] + setup.nodes[b]]
    while int(store.add(f"{index}/n", 0)) < len(members) and time.monotonic() < limit:
        time.sleep(0.01)
    keys = {r: f"{index}/t/{r}" for r in members}
    present = [r for r in members if store.check([keys[r]])]
    values = store.multi_get([keys[r] for r in present]) if present else []
    times = {r: json.loads(v) for r, v in zip(present, values)}
    tests = []
    spent = 0.0
    for a, b in rnd.pairs:
        ranks = setup.nodes[a] + setup.nodes[b]
        got = [times.get(r) for r in ranks]
        errors = [g.get("error") for g in got if g and g.get("error")]
        if errors or any(g is None for g in got):
            missing = [r for r, g in zip(ranks, got) if g is None]
            error = errors[0] if errors else (f"no result from rank(s) {missing} within the "
                                              f"pair's {budget:.3g} s and the round's grace")
            tests.append(PairTest(a, b, 0.0, index, rnd.reference, 0.0, error))
            spent = max(spent, budget)
            continue
        slowest = max(g["time_s"] for g in got)
        nbytes = min(int(g.get("bytes", setup.nbytes)) for g in got)
        iters = min(int(g.get("iters", setup.iters)) for g in got)
        spent = max(spent, *(float(g.get("spent_s", 0.0)) for g in got))
        busbw = bandwidths(nbytes, slowest, len(ranks))[1]
        tests.append(PairTest(a, b, busbw, index, rnd.reference, slowest, nbytes=nbytes,
                              iters=iters, reduced=any(g.get("reduced") for g in got)))
    return tests, spent
