"""From every rank's outcome to the job's rows and the report's `bench` section.

Pure: it reads the outcomes (dicts, as they crossed the process or store boundary) and what the
collector saw of the ranks that never reported; nothing here runs a collective. The checks that
judge them are ``ncclcheck.probes.bench``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ncclcheck.model import BenchSection

from .faults import FAULT_VARIABLE
from .metrics import RankRow, SizeRow, average_busbw, combine_size, significant
from .reference import Reference, compare


@dataclass
class SweepResult:
    backend: str
    world_size: int
    dtype: str
    iters: int
    warmup: int
    sizes: list[int]
    collective_timeout: float
    outcomes: dict[int, dict[str, Any]] = field(default_factory=dict)
    torn_down: list[int] = field(default_factory=list)      # stopped answering, killed
    silent: list[int] = field(default_factory=list)         # never reported (cluster mode)
    not_joined: list[int] = field(default_factory=list)     # never reached the sweep at all
    exited: dict[int, int] = field(default_factory=dict)    # died without reporting
    stderr_tail: dict[int, str] = field(default_factory=dict)
    progress: dict[int, int] = field(default_factory=dict)  # launcher.progress_mark()
    fault: str | None = None
    budget_s: float | None = None  # the seconds the sweep was given (what --timeout left it)

    @property
    def hosts(self) -> dict[int, str | None]:
        return {r: o.get("host") for r, o in self.outcomes.items()}

    @property
    def missing(self) -> list[int]:
        return sorted(set(self.torn_down) | set(self.silent) | set(self.exited)
                      | set(self.not_joined))


def job_rows(result: SweepResult) -> list[SizeRow]:
    """One row per size that every rank completed (a size some rank never finished has no time)."""
    if result.missing:
        return []
    rows: list[SizeRow] = []
    for step in range(len(result.sizes)):
        per_rank: dict[int, RankRow] = {}
        for rank, outcome in result.outcomes.items():
            data = outcome.get("rows", [])
            if step < len(data):
                per_rank[rank] = RankRow.from_dict(data[step])
        if len(per_rank) < result.world_size:
            break
        rows.append(combine_size(per_rank, result.dtype, result.world_size))
    return rows


def bench_section(result: SweepResult, rows: list[SizeRow],
                  reference: Reference | None) -> BenchSection:
    """The report's `bench` object (docs/report.schema.json), nccl-tests' numbers per size."""
    peak = max(rows, key=lambda r: r.busbw_gbps) if rows else None
    first = next(iter(result.outcomes.values()), {})
    return BenchSection(
        backend=result.backend,
        world_size=result.world_size,
        dtype=result.dtype,
        iters=result.iters,
        warmup=result.warmup,
        rows=[r.to_dict() for r in rows],
        avg_busbw_gbps=significant(average_busbw(rows)),
        peak_busbw_gbps=significant(peak.busbw_gbps) if peak else 0.0,
        peak_bytes=peak.bytes if peak else None,
        hosts=sorted({h for h in result.hosts.values() if h}),
        gpu=first.get("gpu_name"),
        nccl_version=first.get("nccl_version"),
        reference=None if reference is None else _expected(reference, rows),
    )


def _expected(reference: Reference, rows: list[SizeRow]) -> dict[str, Any]:
    """The expected figure and the share of it this sweep reached (bench.expected_busbw)."""
    got = compare(reference, rows)
    share = {} if got is None else {"share": round(got.share, 3), "at_bytes": got.at_bytes}
    return {**reference.to_dict(), **share}


def named_ranks(ranks: list[int], hosts: dict[int, str | None] | None = None) -> str:
    hosts = hosts or {}
    named = [f"{r} ({hosts[r]})" if hosts.get(r) else str(r) for r in sorted(ranks)]
    word = "rank" if len(named) == 1 else "ranks"
    return f"{word} {', '.join(named)}"


def fault_note(result: SweepResult) -> str:
    return (f" {FAULT_VARIABLE}={result.fault} is set: this failure was injected on purpose; "
            f"unset {FAULT_VARIABLE}." if result.fault else "")
