"""A job's folded results -> one row per check id, with counts and the failing ranks by host.

A 1024-rank job must fit on a screen: "fail on 8 of 1024 ranks (node3: ranks 24-31)".
Node-scope checks (run by each node's LOCAL_RANK 0 only) are counted per node. Rows are made
from a ``Fold``, so their cost grows with what did not pass, not with ranks.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable

from ncclcheck.model import CheckResult, Status

from .fold import Fold, Passing, fold
from .ranges import MAX_GROUPS, by_host, rank_ranges, ranks_phrase

__all__ = ["MAX_GROUPS", "ORDER", "aggregate", "by_host", "rank_ranges", "ranks_phrase", "row",
           "rows", "worst"]

ORDER = (Status.FAIL, Status.ERROR, Status.WARN, Status.SKIP, Status.PASS)


def worst(statuses: Iterable[Status]) -> Status:
    present = set(statuses)
    return next(s for s in ORDER if s in present)


def aggregate(results: list[CheckResult], scopes: dict[str, str]) -> list[CheckResult]:
    """One row per check id, in the order ids first appear; ``scopes`` maps family -> scope."""
    return rows(fold(results), scopes)


def rows(folded: Fold, scopes: dict[str, str]) -> list[CheckResult]:
    """One row per check id of a fold (ids in the fold's order)."""
    others: dict[str, list[CheckResult]] = {}
    for result in folded.others:
        others.setdefault(result.id, []).append(result)
    return [row(check_id, folded.passing.get(check_id), others.get(check_id, []),
                scopes.get(check_id.split(".", 1)[0], "rank"))
            for check_id in folded.order]


def row(check_id: str, passing: Passing | None, others: list[CheckResult],
        scope: str) -> CheckResult:
    """The row of one check id: its passing ranks (``passing``) and every other result."""
    others = sorted(others, key=lambda m: (m.rank if m.rank is not None else 1 << 40))
    counts = Counter(m.status for m in others)
    if passing is not None:
        counts[Status.PASS] += passing.count
    status = worst(counts)
    unit = "node" if scope == "node" else "rank"
    total = sum(counts.values())
    bad = [m for m in others if m.status == status]
    rep = passing.result() if status is Status.PASS and passing is not None else bad[0]
    where = by_host(((m.host, m.rank) for m in bad), scope)
    if status is Status.PASS and passing is not None:
        where = by_host([(rep.host, rep.rank)], scope) if passing.count == 1 else \
            f"{len(passing.hosts)} host{'s' if len(passing.hosts) != 1 else ''}"
    summaries = {m.summary for m in bad}
    varied = (passing.varied if status is Status.PASS and passing is not None
              else len(summaries) > 1)
    if status in (Status.PASS, Status.SKIP) or counts[status] == total:
        spread = (f"{status.value} on all {total} {unit}s" if total > 1
                  else f"{status.value} on the one {unit} that runs it")
        if total > 1 and varied:
            # the wording differs per rank (its own rank number, its own role): say whose it is
            spread += f"; as seen from {rep.host}" + (f" rank {rep.rank}" if rep.rank is not None else "")
        host = f"all {total} {unit}s" if total > 1 and status in (Status.PASS, Status.SKIP) else where
    else:
        spread = f"{status.value} on {counts[status]} of {total} {unit}s ({where})"
        host = where
    extra = [] if status in (Status.PASS, Status.SKIP) else sorted(summaries - {rep.summary})
    summary = f"{rep.summary} [{spread}]"
    if extra:
        summary = f"{rep.summary} (+{len(extra)} other message{'s' if len(extra) > 1 else ''}) [{spread}]"
    # Lists, not dicts keyed by status: a key named "pass" would be masked as a secret.
    where_list: list[dict] = [{"status": s.value, "host": h, "ranks": rs} for s in ORDER
                              if s is not Status.PASS and counts.get(s)
                              for h, rs in _hosts([m for m in others if m.status == s]).items()]
    if passing is not None:
        where_list.append({"status": Status.PASS.value, "hosts": len(passing.hosts),
                           "ranks": rank_ranges(passing.ranks)})
    details = {
        "scope": scope,
        "total": total,
        "counts": [{"status": s.value, "count": counts[s]} for s in ORDER if counts.get(s)],
        "where": where_list,
        "example": {"host": rep.host, "rank": rep.rank, "details": rep.details},
    }
    if extra:
        details["other_summaries"] = extra[:5]
    return CheckResult(check_id, status, summary, details, rep.fix, rep.category, host, None)


def _hosts(members: list[CheckResult]) -> dict[str, list[int]]:
    hosts: dict[str, list[int]] = {}
    for m in members:
        hosts.setdefault(m.host or "unknown host", [])
        if m.rank is not None:
            hosts[m.host or "unknown host"].append(m.rank)
    return hosts
