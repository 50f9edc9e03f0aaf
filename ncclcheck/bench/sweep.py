"""Run the sweep on the job and collect every rank's outcome into one SweepResult.

Two ways in: standalone (this process starts the ranks itself, see launcher.py) and cluster mode
(every rank of a launched job runs its part in-process and rank 0 collects through the job's
TCPStore). Both end by a deadline and name the ranks that did not report.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any, Callable

from .analysis import SweepResult
from .launcher import launch, progress_mark
from .worker import RankSweep, SweepConfig


def _result(config: SweepConfig, world_size: int, fault: str | None) -> SweepResult:
    return SweepResult(config.backend, world_size, config.dtype, config.iters, config.warmup,
                       list(config.sizes), config.collective_timeout, fault=fault or None)


def run_standalone(config: SweepConfig, nproc: int, env: dict[str, str], deadline: float,
                   on_event: Callable[[dict[str, Any]], None] | None = None) -> SweepResult:
    launched = launch(config, nproc, env, deadline, on_event)
    result = _result(config, nproc, config.faults)
    result.outcomes = launched.outcomes
    result.torn_down = sorted(launched.torn_down)
    result.exited = dict(launched.exited)
    result.stderr_tail = dict(launched.stderr_tail)
    result.progress = dict(launched.progress)
    return result


def run_on_cluster(config: SweepConfig, session: Any, deadline: float,
                   on_event: Callable[[dict[str, Any]], None] | None = None,
                   keep_group: bool = False) -> SweepResult | None:
    """This rank's part of the sweep; rank 0 returns the job's result, the others None.
    ``keep_group``: leave the default process group up for the pair tests (pairs.py).

    Keys live under the store prefix "bench": device/R (NCCL device identity), pg/* (the
    process group), progress/R (last size started), result/R (the rank's outcome).
    """
    import torch.distributed as dist  # deferred: seconds to import; only a sweep needs it

    store = dist.PrefixStore("bench", session.store)
    rank, world = int(session.rank), int(session.world_size)

    def emit(event: dict[str, Any]) -> None:
        mark = progress_mark(event)
        if mark is not None:
            store.set(f"progress/{rank}", str(mark))
        if on_event is not None and rank == 0:
            on_event(event)

    outcome = RankSweep(config, store, rank, world, int(session.local_rank or 0),
                        str(session.host), emit, keep_group).run()
    store.set(f"result/{rank}", json.dumps(outcome.to_dict()))
    store.add("results", 1)
    if rank != 0:
        return None
    result = _result(config, world, config.faults)
    if outcome.error is not None:  # the others fail or hang too: do not wait out the deadline
        deadline = min(deadline, time.monotonic() + 3.0)
    while store.add("results", 0) < world and time.monotonic() < deadline:
        time.sleep(0.05)
    keys = {r: f"result/{r}" for r in range(world)}
    present = [r for r in keys if store.check([keys[r]])] if store.add("results", 0) < world \
        else list(keys)
    for r, raw in zip(present, store.multi_get([keys[r] for r in present]) if present else []):
        result.outcomes[r] = json.loads(raw)
    result.silent = sorted(set(keys) - set(present))
    for r in result.silent + [r for r, o in result.outcomes.items() if o.get("error")]:
        if store.check([f"progress/{r}"]):
            result.progress[r] = int(store.get(f"progress/{r}"))
    return result


def join_cluster(session: Any, requested: str, gpus: int, timeout: float) -> tuple[str, list[int]]:
    """Every rank says it is here and which backend it can run; returns the backend all will
    use (auto: NCCL only if every rank has a GPU) and the ranks that did not join in time.

    A rank that never joins would hold every other rank in process-group set-up until its
    timeout; finding it here lets the sweep be skipped and the rank be named at once.
    """
    import torch.distributed as dist  # deferred: seconds to import; only a sweep needs it

    store = dist.PrefixStore("bench", session.store)
    world = int(session.world_size)
    mine = requested if requested != "auto" else ("nccl" if gpus > 0 else "gloo")
    store.set(f"joined/{session.rank}", mine)
    if mine != "nccl":
        store.add("joined/without_gpu", 1)  # counted before joining, so final once all joined
    if store.add("joined/count", 1) >= world:
        store.set("joined/ready", "1")
    try:
        store.wait(["joined/ready"], timedelta(seconds=timeout))
        missing: list[int] = []
    except Exception:  # a wait timeout: find the absent ranks (once, only on this path)
        missing = [r for r in range(world) if not store.check([f"joined/{r}"])]
    if requested != "auto":
        return requested, missing
    return ("gloo" if store.add("joined/without_gpu", 0) else "nccl"), missing

def absent_result(config: SweepConfig, world_size: int, missing: list[int]) -> SweepResult:
    """Rank 0's result when some ranks never joined: nothing was run, the absent are named."""
    result = _result(config, world_size, config.faults)
    result.not_joined = list(missing)
    return result
