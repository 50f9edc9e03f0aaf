"""Bandwidth arithmetic, per-size rows across ranks, and straggler detection.

The formulas are nccl-tests' (src/all_reduce.cu and doc/PERFORMANCE.md): for an all-reduce of
S bytes taking t seconds on n ranks, algbw = S / t / 1e9 and busbw = algbw * 2(n-1)/n, in
decimal GB/s. t is the slowest rank's mean time per iteration: the collective is not done on
the job until it is done on every rank.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping


def significant(value: float, digits: int = 6) -> float:
    """A float kept to ``digits`` significant digits (small GB/s figures keep their precision)."""
    return float(f"{value:.{digits}g}")


def busbw_factor(nranks: int) -> float:
    """nccl-tests' all-reduce bus factor 2(n-1)/n: each element crosses 2(n-1) of n links."""
    return 2.0 * (nranks - 1) / nranks if nranks > 0 else 0.0


def bandwidths(nbytes: int, seconds: float, nranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9 bytes per second) for one all-reduce of ``nbytes``."""
    if seconds <= 0:
        return 0.0, 0.0
    algbw = nbytes / seconds / 1e9
    return algbw, algbw * busbw_factor(nranks)


@dataclass
class RankRow:
    """One rank's measurement of one size."""

    bytes: int
    count: int
    time_s: float        # mean wall time per timed iteration on this rank
    lag_s: float         # mean time per iteration spent before entering the collective
    wrong: int           # result elements differing from the expected sum, on this rank
    input_wrong: int = 0  # elements of this rank's input that differed from its pattern

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RankRow":
        return cls(int(data["bytes"]), int(data["count"]), float(data["time_s"]),
                   float(data.get("lag_s", 0.0)), int(data["wrong"]), int(data.get("input_wrong", 0)))


@dataclass
class SizeRow:
    """One size across the job, as it goes into the report's ``bench.rows``."""

    bytes: int
    count: int
    dtype: str
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int
    wrong_ranks: list[int] = field(default_factory=list)
    input_wrong_ranks: list[int] = field(default_factory=list)
    slowest_rank: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"bytes": self.bytes, "count": self.count, "dtype": self.dtype,
                "time_us": significant(self.time_us), "algbw_gbps": significant(self.algbw_gbps),
                "busbw_gbps": significant(self.busbw_gbps), "wrong": self.wrong,
                "wrong_ranks": self.wrong_ranks, "input_wrong_ranks": self.input_wrong_ranks,
                "slowest_rank": self.slowest_rank}


def combine_size(per_rank: Mapping[int, RankRow], dtype: str, nranks: int) -> SizeRow:
    """All ranks' measurements of one size -> the job's row: slowest time, summed wrong values."""
    slowest = max(per_rank, key=lambda r: per_rank[r].time_s)
    first = per_rank[slowest]
    seconds = first.time_s
    algbw, busbw = bandwidths(first.bytes, seconds, nranks)
    return SizeRow(first.bytes, first.count, dtype, seconds * 1e6, algbw, busbw,
                   sum(r.wrong for r in per_rank.values()),
                   sorted(r for r, row in per_rank.items() if row.wrong),
                   sorted(r for r, row in per_rank.items() if row.input_wrong), slowest)


def average_busbw(rows: Iterable[SizeRow]) -> float:
    """nccl-tests' '# Avg bus bandwidth': the plain mean of busbw over the sizes run."""
    values = [r.busbw_gbps for r in rows]
    return sum(values) / len(values) if values else 0.0


@dataclass(frozen=True)
class Straggler:
    rank: int
    host: str | None
    lag_us: float
    others_median_us: float
    time_us: float


def find_stragglers(lags_s: Mapping[int, float], time_s: float, hosts: Mapping[int, str | None],
                    ratio: float = 3.0, share: float = 0.2) -> list[Straggler]:
    """Ranks that made every other rank wait.

    In an all-reduce every rank's iteration time is the same (all wait for the last), so the
    per-rank figure that differs is the lag: time spent before entering the collective. A rank
    is a straggler when its lag is ``ratio`` times the median of the other ranks' lags and at
    least ``share`` of the iteration (so sub-microsecond noise never counts).
    """
    found: list[Straggler] = []
    if len(lags_s) < 2 or time_s <= 0:
        return found
    for rank, lag in sorted(lags_s.items()):
        others = [v for r, v in lags_s.items() if r != rank]
        median = statistics.median(others)
        if lag > ratio * median and lag - median > share * time_s:
            found.append(Straggler(rank, hosts.get(rank), lag * 1e6, median * 1e6, time_s * 1e6))
    return found


def straggler_nodes(stragglers: list[Straggler], hosts: Mapping[int, str | None]) -> list[str]:
    """Hosts all of whose ranks are stragglers (a slow node rather than one slow rank)."""
    slow = {s.rank for s in stragglers}
    by_host: dict[str, list[int]] = {}
    for rank, host in hosts.items():
        if host:
            by_host.setdefault(host, []).append(rank)
    if len(by_host) < 2:
        return []
    return sorted(h for h, ranks in by_host.items() if ranks and all(r in slow for r in ranks))
