"""bench.straggler: a rank (or a whole node) that made everyone else wait, from each rank's
arrival lag at every all-reduce."""

from __future__ import annotations

from typing import Any

from ncclcheck.bench.analysis import SweepResult, fault_note, named_ranks
from ncclcheck.bench.metrics import SizeRow, find_stragglers, straggler_nodes
from ncclcheck.model import Category, CheckResult, passed, warned
from ncclcheck.probes.bench.measure import BenchFacts
from ncclcheck.probes.spec import CheckSpec, judge


STRAGGLER = CheckSpec(
    "bench.straggler", "no rank makes the others wait", (Category.OTHER,),
    warns_when="a rank (or a whole node) arrived late at every all-reduce while "
               "the others waited",
    doc="Reported for two ranks or more, from each rank's arrival lag.",
    order=30)


@judge(STRAGGLER)
def judge_straggler(facts: BenchFacts) -> CheckResult | None:
    return straggler_check(facts.result, facts.rows)


def straggler_check(result: SweepResult, rows: list[SizeRow]) -> CheckResult | None:
    """Name a rank (or a whole node) that made everyone else wait, from per-rank lags."""
    if not rows or result.world_size < 2:
        return None
    lags = {r: sum(row.get("lag_s", 0.0) for row in o.get("rows", [])[:len(rows)])
            for r, o in result.outcomes.items()}
    total = sum(r.time_us for r in rows) / 1e6
    per_rank = {str(r): {"host": result.hosts.get(r), "lag_us": round(lag / len(rows) * 1e6, 2),
                         "time_us": [round(row["time_s"] * 1e6, 2)
                                     for row in result.outcomes[r].get("rows", [])[:len(rows)]]}
                for r, lag in sorted(lags.items())}
    found = find_stragglers(lags, total, result.hosts)
    details: dict[str, Any] = {"per_rank": per_rank}
    if not found:
        worst = max(lags, key=lambda r: lags[r])
        return passed(STRAGGLER, f"no straggler among {result.world_size} ranks (largest "
                      f"arrival lag {lags[worst] / len(rows) * 1e6:.1f} us per all-reduce, rank "
                      f"{worst})", **details)
    nodes = straggler_nodes(found, result.hosts)
    details.update(stragglers=[s.rank for s in found], straggler_nodes=nodes)
    first = found[0]
    who = f"node {', '.join(nodes)}" if nodes else named_ranks([s.rank for s in found], result.hosts)
    return warned(STRAGGLER,
                  f"{who} arrived late at every all-reduce: {first.lag_us / len(rows):.0f} us per "
                  f"iteration against a median of {first.others_median_us / len(rows):.0f} us on "
                  "the other ranks, and everyone waited",
                  f"Look at what else runs on {who}: CPU load and binding (top, numactl, "
                  "OMP_NUM_THREADS), GPU clocks and throttling (nvidia-smi -q -d PERFORMANCE)."
                  + fault_note(result), Category.OTHER, **details)
