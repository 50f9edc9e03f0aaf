"""Test-only fault injection, so the failure paths can be exercised on real processes.

NCCLCHECK_BENCH_FAULT=KIND:RANK[@STEP][,...] makes one rank misbehave on purpose:

- ``corrupt:R``  rank R adds 1 to one element of its input before every checked all-reduce
  (the result is wrong on every rank; rank R is named as the one whose input was wrong);
- ``hang:R``     rank R stops answering before the timed all-reduce of step STEP (default 0);
- ``slow:R``     rank R sleeps 20 ms before each timed all-reduce (a straggler);
- ``crash:R``    rank R exits with status 3 at step STEP (default 0).

It exists for ncclcheck's own tests and for rehearsing what a report looks like. Never set it
on a real job: it deliberately breaks the benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass

FAULT_VARIABLE = "NCCLCHECK_BENCH_FAULT"
KINDS = ("corrupt", "hang", "slow", "crash")


@dataclass(frozen=True)
class Fault:
    kind: str
    rank: int
    step: int = 0


def parse_faults(value: str | None) -> list[Fault]:
    """'corrupt:1,hang:2@3' -> [Fault('corrupt', 1), Fault('hang', 2, 3)]; ValueError if malformed."""
    faults: list[Fault] = []
    for item in (value or "").split(","):
        item = item.strip()
        if not item:
            continue
        kind, sep, where = item.partition(":")
        rank_text, _, step_text = where.partition("@")
        if kind not in KINDS or not sep or not rank_text.isdigit() or (
                step_text and not step_text.isdigit()):
            raise ValueError(f"{FAULT_VARIABLE}={value!r}: expected KIND:RANK[@STEP] with KIND "
                             f"one of {', '.join(KINDS)}")
        faults.append(Fault(kind, int(rank_text), int(step_text or 0)))
    return faults


def fault_for(faults: list[Fault], kind: str, rank: int) -> Fault | None:
    return next((f for f in faults if f.kind == kind and f.rank == rank), None)
