"""Run the sweep on the job and collect every rank's outcome into one SweepResult.

Two ways in: standalone (this process starts the ranks itself, see launcher.py) and cluster mode
(every rank of a launched job runs its part in-process and rank 0 collects through the job's
TCPStore). Both end by a deadline and name the ranks that did not report.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from .analysis import SweepResult
from .launcher import launch
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
    result.last_step = dict(launched.last_step)
    return result


def run_on_cluster(config: SweepConfig, session: Any, deadline: float,
                   on_event: Callable[[dict[str, Any]], None] | None = None) -> SweepResult | None:
    """This rank's part of the sweep; rank 0 returns the job's result, the others None.

    Keys live under the store prefix "bench": device/R (NCCL device identity), pg/* (the
    process group), progress/R (last size started), result/R (the rank's outcome).
    """
    import torch.distributed as dist

    store = dist.PrefixStore("bench", session.store)
    rank, world = int(session.rank), int(session.world_size)

    def emit(event: dict[str, Any]) -> None:
        if event.get("event") == "start":
            store.set(f"progress/{rank}", str(event["step"]))
        if on_event is not None and rank == 0:
            on_event(event)

    outcome = RankSweep(config, store, rank, world, int(session.local_rank or 0),
                        str(session.host), emit).run()
    store.set(f"result/{rank}", json.dumps(outcome.to_dict()))
    if rank != 0:
        return None
    result = _result(config, world, config.faults)
    if outcome.error is not None:  # the others fail or hang too: do not wait out the deadline
        deadline = min(deadline, time.monotonic() + 3.0)
    keys = {r: f"result/{r}" for r in range(world)}
    while True:
        for r, key in list(keys.items()):
            if store.check([key]):
                result.outcomes[r] = json.loads(store.get(key))
                del keys[r]
        if not keys or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    result.silent = sorted(keys)
    for r in range(world):
        if store.check([f"progress/{r}"]):
            result.last_step[r] = int(store.get(f"progress/{r}"))
    return result


def agree_backend(session: Any, requested: str, gpus: int, timeout: float) -> str:
    """Every rank must use the same backend: with auto, NCCL only if every rank has a GPU."""
    if requested != "auto":
        return requested
    import torch.distributed as dist
    from datetime import timedelta

    store = dist.PrefixStore("bench", session.store)
    mine = "nccl" if gpus > 0 else "gloo"
    store.set(f"backend/{session.rank}", mine)
    keys = [f"backend/{r}" for r in range(int(session.world_size))]
    try:
        store.wait(keys, timedelta(seconds=timeout))
    except Exception:
        return mine  # a silent rank is named by the sweep itself
    chosen = {store.get(k).decode() for k in keys}
    return "nccl" if chosen == {"nccl"} else "gloo"
