"""Many ranks' results folded: per check id the ranks that passed, every other result whole.

A job of 100k ranks passes most of its checks on every rank; listing each of those results
would make the report (and rank 0's work) grow with ranks. A fold keeps, per check id, the
passing ranks, their hosts and the lowest rank's result, and every result that is not a pass
per rank with its host. A node leader folds its node, rank 0 merges one fold per node; the
job report, its rows and every renderer read the merged fold. With ``per_rank`` a fold also
keeps every result (``--per-rank``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from ncclcheck.model import CheckResult, Status

from .ranges import rank_ranges


@dataclass
class Passing:
    """One check id's passing results: the ranks and hosts, and the lowest rank's result."""

    first: CheckResult
    ranks: list[int] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)
    varied: bool = False  # the wording differs between ranks (their own rank in it)

    @property
    def count(self) -> int:
        return len(self.ranks)

    def entry(self) -> CheckResult:
        """The report's one entry for these results: ranks as ranges, hosts counted."""
        first = self.first
        return CheckResult(first.id, Status.PASS, first.summary, first.details,
                           ranks=rank_ranges(self.ranks), hosts=len(self.hosts))

    def to_dict(self) -> dict[str, Any]:
        return {"first": self.first.to_dict(), "ranks": self.ranks, "hosts": sorted(self.hosts),
                "varied": self.varied}


@dataclass
class Fold:
    """The results of some ranks (a node's, or the job's), folded per check id."""

    order: list[str] = field(default_factory=list)  # check ids, as they first appear
    passing: dict[str, Passing] = field(default_factory=dict)
    others: list[CheckResult] = field(default_factory=list)  # every result not a pass
    every: list[CheckResult] | None = None  # every result, when per rank was asked for

    @property
    def results(self) -> int:
        return sum(p.count for p in self.passing.values()) + len(self.others)

    def add(self, result: CheckResult) -> None:
        if result.id not in self._ids:
            self._ids.add(result.id)
            self.order.append(result.id)
        if self.every is not None:
            self.every.append(result)
        if result.status is not Status.PASS or result.rank is None:
            self.others.append(result)
            return
        group = self.passing.get(result.id)
        if group is None:
            self.passing[result.id] = Passing(result, [result.rank], {result.host or ""})
            return
        group.ranks.append(result.rank)
        group.hosts.add(result.host or "")
        if result.summary != group.first.summary:
            group.varied = True
        if group.first.rank is None or result.rank < group.first.rank:
            group.first = result

    def __post_init__(self) -> None:
        self._ids: set[str] = set(self.order)  # ``order`` as a set, for ``add``

    def entries(self) -> list[CheckResult]:
        """The report's checks: every result when per rank, else per check id one entry for
        its passing ranks followed by its other results in rank order."""
        if self.every is not None:
            return sorted(self.every, key=_rank_order)
        others: dict[str, list[CheckResult]] = {}
        for result in self.others:
            others.setdefault(result.id, []).append(result)
        out: list[CheckResult] = []
        for check_id in self.order:
            if check_id in self.passing:
                out.append(self.passing[check_id].entry())
            out += sorted(others.get(check_id, []), key=_rank_order)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"order": self.order, "passing": [p.to_dict() for p in self.passing.values()],
                "others": [r.to_dict() for r in self.others],
                "every": None if self.every is None else [r.to_dict() for r in self.every]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Fold":
        passing = {}
        for p in data.get("passing") or []:
            first = CheckResult.from_dict(p["first"])
            passing[first.id] = Passing(first, list(p["ranks"]), set(p["hosts"]),
                                        bool(p.get("varied")))
        every = data.get("every")
        return cls(list(data.get("order") or []), passing,
                   [CheckResult.from_dict(r) for r in data.get("others") or []],
                   None if every is None else [CheckResult.from_dict(r) for r in every])


def _rank_order(result: CheckResult) -> tuple[int, int]:
    return (result.rank if result.rank is not None else 1 << 40, 0)


def fold(results: Iterable[CheckResult], per_rank: bool = False) -> Fold:
    """Fold results (in the order given: lowest rank first keeps the report's order)."""
    folded = Fold(every=[] if per_rank else None)
    for result in results:
        folded.add(result)
    return folded


def merge(folds: Iterable[Fold], per_rank: bool = False) -> Fold:
    """One fold of many (a node's each), whatever order they arrived in: the check ids keep
    the order of the fold holding the lowest rank."""
    ordered = sorted(folds, key=_lowest)
    merged = Fold(every=[] if per_rank else None)
    seen: set[str] = set()
    for part in ordered:
        for check_id in part.order:
            if check_id not in seen:
                seen.add(check_id)
                merged.order.append(check_id)
        for check_id, group in part.passing.items():
            into = merged.passing.get(check_id)
            if into is None:
                merged.passing[check_id] = Passing(group.first, list(group.ranks),
                                                   set(group.hosts), group.varied)
                continue
            into.ranks += group.ranks
            into.hosts |= group.hosts
            into.varied = (into.varied or group.varied
                           or group.first.summary != into.first.summary)
            if _rank_order(group.first) < _rank_order(into.first):
                into.first = group.first
        merged.others += part.others
        if merged.every is not None:
            merged.every += part.every or []
    merged.__post_init__()
    return merged


def _lowest(part: Fold) -> int:
    ranks = [min(p.ranks) for p in part.passing.values() if p.ranks]
    ranks += [r.rank for r in part.others if r.rank is not None]
    return min(ranks, default=1 << 40)
