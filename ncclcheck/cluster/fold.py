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
from ncclcheck.probes.nccl.library import VERSION as NCCL_VERSION

from .ranges import rank_ranges


@dataclass
class Passing:
    """One check id's passing results: the ranks and hosts, and the lowest rank's result (as
    a report holds it: rank 0 turns only the one it shows back into a ``CheckResult``)."""

    first: dict[str, Any]
    ranks: list[int] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)
    varied: bool = False  # the wording differs between ranks (their own rank in it)

    @property
    def count(self) -> int:
        return len(self.ranks)

    def result(self) -> CheckResult:
        """The lowest rank's result."""
        return CheckResult.from_dict(self.first)

    def entry(self) -> CheckResult:
        """The report's one entry for these results: ranks as ranges, hosts counted."""
        first = self.first
        return CheckResult(first["id"], Status.PASS, first["summary"], first.get("details") or {},
                           ranks=rank_ranges(self.ranks), hosts=len(self.hosts))

    def to_dict(self) -> dict[str, Any]:
        return {"first": self.first, "ranks": self.ranks, "hosts": sorted(self.hosts),
                "varied": self.varied}


@dataclass
class Fold:
    """The results of some ranks (a node's, or the job's), folded per check id."""

    order: list[str] = field(default_factory=list)  # check ids, as they first appear
    passing: dict[str, Passing] = field(default_factory=dict)
    others: list[CheckResult] = field(default_factory=list)  # every result not a pass
    every: list[CheckResult] | None = None  # every result, when per rank was asked for
    # host -> the NCCL version its library reported (nccl.version), which cluster.versions
    # compares across nodes even where every node passed
    nccl: dict[str, str] = field(default_factory=dict)

    @property
    def results(self) -> int:
        return sum(p.count for p in self.passing.values()) + len(self.others)

    def add(self, result: CheckResult) -> None:
        if result.id not in self._ids:
            self._ids.add(result.id)
            self.order.append(result.id)
        if self.every is not None:
            self.every.append(result)
        if result.id == NCCL_VERSION.id and result.host and result.details.get("version"):
            self.nccl[result.host] = str(result.details["version"])
        if result.status is not Status.PASS or result.rank is None:
            self.others.append(result)
            return
        group = self.passing.get(result.id)
        if group is None:
            self.passing[result.id] = Passing(result.to_dict(), [result.rank], {result.host or ""})
            return
        group.ranks.append(result.rank)
        group.hosts.add(result.host or "")
        if result.summary != group.first["summary"]:
            group.varied = True
        if result.rank < group.first["rank"]:
            group.first = result.to_dict()

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
                "every": None if self.every is None else [r.to_dict() for r in self.every],
                "nccl": self.nccl}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Fold":
        passing = {}
        for p in data.get("passing") or []:
            passing[p["first"]["id"]] = Passing(p["first"], list(p["ranks"]), set(p["hosts"]),
                                                bool(p.get("varied")))
        every = data.get("every")
        return cls(list(data.get("order") or []), passing,
                   [CheckResult.from_dict(r) for r in data.get("others") or []],
                   None if every is None else [CheckResult.from_dict(r) for r in every],
                   dict(data.get("nccl") or {}))


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
                           or group.first["summary"] != into.first["summary"])
            if group.first["rank"] < into.first["rank"]:
                into.first = group.first
        merged.others += part.others
        merged.nccl.update(part.nccl)
        if merged.every is not None:
            merged.every += part.every or []
    merged.__post_init__()
    return merged


def _lowest(part: Fold) -> int:
    ranks = [min(p.ranks) for p in part.passing.values() if p.ranks]
    ranks += [r.rank for r in part.others if r.rank is not None]
    return min(ranks, default=1 << 40)
