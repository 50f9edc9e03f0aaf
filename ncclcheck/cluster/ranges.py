"""Ranks as people read them: "0-2, 5, 7-8", grouped by host, and back.

A 100k-rank job must fit on a screen and in a small report: ranks are always written as
compact ranges, never as one number per rank.
"""

from __future__ import annotations

from typing import Iterable

MAX_GROUPS = 6


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


def parse_ranges(text: str) -> list[int]:
    """"0-2, 5, -1" -> [0, 1, 2, 5, -1]: ``rank_ranges`` read back (negative ranks too)."""
    ranks: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        low, dash, high = part[1:].partition("-")
        if dash:
            ranks += range(int(part[0] + low), int(high) + 1)
        else:
            ranks.append(int(part))
    return ranks


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
