"""Many ranks' results -> one row per check id, with counts and the failing ranks by host.

A 1024-rank job must fit on a screen: "fail on 8 of 1024 ranks (node3: ranks 24-31)".
Node-scope checks (run by each node's LOCAL_RANK 0 only) are counted per node.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable

from ncclcheck.model import CheckResult, Status

MAX_GROUPS = 6
ORDER = (Status.FAIL, Status.ERROR, Status.WARN, Status.SKIP, Status.PASS)


def rank_ranges(ranks: Iterable[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2, 5, 7-8"."""
    ordered = sorted(set(ranks))
    parts: list[str] = []
    start = prev = None
    for r in ordered:
        if prev is not None and r == prev + 1:
            prev = r
            continue
        if start is not None:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
        start = prev = r
    if start is not None:
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ", ".join(parts)


def ranks_phrase(ranks: Iterable[int]) -> str:
    ordered = sorted(set(ranks))
    return f"rank{'s' if len(ordered) != 1 else ''} {rank_ranges(ordered)}"


def by_host(pairs: Iterable[tuple[str | None, int | None]], scope: str = "rank",
            limit: int = MAX_GROUPS) -> str:
    """(host, rank) pairs -> "node1: ranks 2-3; node3: rank 24" (hosts only for node scope)."""
    hosts: dict[str, list[int]] = {}
    for host, rank in pairs:
        hosts.setdefault(host or "unknown host", [])
        if rank is not None:
            hosts[host or "unknown host"].append(rank)
    names = sorted(hosts, key=lambda h: (min(hosts[h]) if hosts[h] else 1 << 30, h))
    if scope == "node":
        shown = ", ".join(names[:limit])
    else:
        shown = "; ".join(f"{h}: {ranks_phrase(hosts[h])}" if hosts[h] else h for h in names[:limit])
    if len(names) > limit:
        shown += f" and {len(names) - limit} more host{'s' if len(names) - limit > 1 else ''}"
    return shown


def worst(results: list[CheckResult]) -> Status:
    present = {r.status for r in results}
    return next(s for s in ORDER if s in present)


def aggregate(results: list[CheckResult], scopes: dict[str, str]) -> list[CheckResult]:
    """One row per check id, in the order ids first appear; ``scopes`` maps family -> scope."""
    groups: dict[str, list[CheckResult]] = {}
    for result in results:
        groups.setdefault(result.id, []).append(result)
    return [row(check_id, members, scopes.get(members[0].family, "rank"))
            for check_id, members in groups.items()]


def row(check_id: str, members: list[CheckResult], scope: str) -> CheckResult:
    status = worst(members)
    unit = "node" if scope == "node" else "rank"
    total = len(members)
    counts = Counter(m.status.value for m in members)
    bad = [m for m in members if m.status == status]
    rep = bad[0]
    where = by_host(((m.host, m.rank) for m in bad), scope)
    if status in (Status.PASS, Status.SKIP) or len(bad) == total:
        spread = (f"{status.value} on all {total} {unit}s" if total > 1
                  else f"{status.value} on the one {unit} that runs it")
        if total > 1 and len({m.summary for m in members}) > 1:
            # the wording differs per rank (its own rank number, its own role): say whose it is
            spread += f"; as seen from {rep.host}" + (f" rank {rep.rank}" if rep.rank is not None else "")
        host = f"all {total} {unit}s" if total > 1 and status in (Status.PASS, Status.SKIP) else where
    else:
        spread = f"{status.value} on {len(bad)} of {total} {unit}s ({where})"
        host = where
    others = [] if status in (Status.PASS, Status.SKIP) else sorted({m.summary for m in bad} - {rep.summary})
    summary = f"{rep.summary} [{spread}]"
    if others:
        summary = f"{rep.summary} (+{len(others)} other message{'s' if len(others) > 1 else ''}) [{spread}]"
    # Lists, not dicts keyed by status: a key named "pass" would be masked as a secret.
    details = {
        "scope": scope,
        "total": total,
        "counts": [{"status": s.value, "count": counts[s.value]} for s in ORDER
                   if counts.get(s.value)],
        "where": [{"status": s.value, "host": h, "ranks": rs} for s in ORDER if counts.get(s.value)
                  for h, rs in _hosts([m for m in members if m.status == s]).items()],
        "example": {"host": rep.host, "rank": rep.rank, "details": rep.details},
    }
    if others:
        details["other_summaries"] = others[:5]
    return CheckResult(check_id, status, summary, details, rep.fix, rep.category, host, None)


def _hosts(members: list[CheckResult]) -> dict[str, list[int]]:
    hosts: dict[str, list[int]] = {}
    for m in members:
        hosts.setdefault(m.host or "unknown host", [])
        if m.rank is not None:
            hosts[m.host or "unknown host"].append(m.rank)
    return hosts
