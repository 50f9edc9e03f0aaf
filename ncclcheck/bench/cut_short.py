"""A sweep the deadline ended early: which sizes it never measured, whether it measured none
(then the gate has nothing to pass on), and what --timeout would let it finish.

Pure: it reads a ``SweepResult`` and the job's rows; the checks word the verdict.
"""

from __future__ import annotations

import math

from ncclcheck.context import longer_timeout, round_seconds_up

from .analysis import SweepResult
from .metrics import SizeRow


def not_measured(result: SweepResult, rows: list[SizeRow]) -> list[int]:
    """The planned sizes no job row stands for, in sweep order."""
    return list(result.sizes[len(rows):])


def still_starting(result: SweepResult) -> bool:
    """True when the deadline, not a failure, ended a sweep before its first size: every rank
    that gave no outcome was torn down (or never reported) while still starting up (importing
    torch, forming the process group), none raised or died, and no rank began a size."""
    if not result.missing or result.not_joined or result.exited:
        return False
    if any(o.get("error") or o.get("rows") for o in result.outcomes.values()):
        return False
    return all(mark < 0 for mark in result.progress.values())


def _predict(rows: list[SizeRow]) -> tuple[float, float]:
    """(latency s, bandwidth bytes/s) through the last two sizes, as t = a + bytes / B; one
    size, or no growth between the two: all latency (B infinite), the least it could take."""
    last = rows[-1]
    if len(rows) < 2 or last.time_us <= rows[-2].time_us:
        return last.time_us / 1e6, math.inf
    before = rows[-2]
    bandwidth = (last.bytes - before.bytes) / ((last.time_us - before.time_us) / 1e6)
    return max(0.0, last.time_us / 1e6 - last.bytes / bandwidth), bandwidth


def suggest_timeout(result: SweepResult, rows: list[SizeRow], timeout: float) -> int:
    """The --timeout to try next. With rows: this one plus 1.5 x what the sizes left out need,
    each predicted from the last two measured (``_predict``) and the worker's own rule that
    starts a size only when the last one's time, scaled by size, fits what is left (worker.py).
    Without rows: twice this one, and at least the default."""
    if not rows:
        return longer_timeout(timeout)
    latency, bandwidth = _predict(rows)
    runs = result.iters + result.warmup + 2
    spent = needed = 0.0
    prev_bytes, prev_s = rows[-1].bytes, rows[-1].time_us / 1e6
    for size in not_measured(result, rows):
        needed = max(needed, spent + prev_s * size / max(1, prev_bytes) * runs)
        prev_bytes, prev_s = size, latency + size / bandwidth
        spent += prev_s * runs
    return round_seconds_up(max(1.5 * timeout, timeout + 1.5 * max(needed, spent)))
