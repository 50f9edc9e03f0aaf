"""The verdict as explain speaks it: the rule that names the finding, its facts (the contract's
``ranks``, ``where``, ``groups`` and the texts the catalogue's entries fill in), its one-line
summary, and the notes for the outcomes that are no failure.

Plain data, so that explain's reader (explain/readers/hang_snapshots.py) turns it into a finding
and ``ncclcheck hang`` prints the same words, without this package knowing explain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ncclcheck.cluster.ranges import rank_ranges
from ncclcheck.hang.verdict import (DESYNC, GONE, INCOMPLETE, MOVING, NOTHING, OTHER_COLLECTIVE,
                                    OUTSIDE, TIMEOUT, UNREAD, Culprit, Group, Verdict)

RULES = {OUTSIDE: "hang_outside_collective", OTHER_COLLECTIVE: "hang_other_collective",
         GONE: "hang_rank_gone", TIMEOUT: "hang_collective_stuck"}
MAX_GROUPS_TEXT = 6


@dataclass(frozen=True)
class Stated:
    """A verdict as a finding: its rule, facts, summary line, and the culprit it speaks of."""

    rule: str
    facts: dict[str, Any]
    text: str
    rank: int | None
    host: str | None
    pid: int | None


def _label(c: Culprit) -> str:
    who = f"rank {c.rank}" if c.rank is not None else "a process"
    where = ", ".join(x for x in (c.host if c.host != "?" else "", f"pid {c.pid}" if c.pid else "")
                      if x)
    return f"{who} ({where})" if where else who


def _groups_text(groups: list[Group]) -> str:
    parts = []
    for group in groups[:MAX_GROUPS_TEXT]:
        data = group.to_dict()
        mark = " [culprit]" if group.culprit else ""
        parts.append(f"{data['ranks'] or '?'} ({data['count']}) {data['state']} "
                     f"{data['where']}{mark}")
    more = len(groups) - MAX_GROUPS_TEXT
    return "; ".join(parts) + (f"; {more} more group(s)" if more > 0 else "")


def _where(c: Culprit | None) -> dict[str, Any] | None:
    if c is None or c.where is None:
        return None
    frame = c.where.user or c.where.inner
    return {"function": frame.function if frame else None, "file": frame.file if frame else None,
            "line": frame.line if frame else None, "collective": c.where.collective}


def state(verdict: Verdict) -> Stated | None:
    """The finding a verdict makes (desync or timeout), or None when it makes none."""
    if verdict.outcome not in (DESYNC, TIMEOUT) or verdict.reference is None:
        return None
    ref = verdict.reference
    facts: dict[str, Any] = {
        "groups": [g.to_dict() for g in verdict.groups],
        "groups_text": _groups_text(verdict.groups),
        "collective": ref.where.collective if ref.where else None,
        "waiting": rank_ranges(ref.ranks) or "?", "waiting_count": len(ref.members),
        "waiting_where": ref.where.describe() if ref.where else "?",
    }
    if verdict.missing:
        facts["missing"] = rank_ranges(verdict.missing)
    if verdict.outcome == TIMEOUT:
        frame = ref.where.user or ref.where.inner if ref.where else None
        facts.update(ranks=[], where={"function": frame.function if frame else None,
                                      "file": frame.file if frame else None,
                                      "line": frame.line if frame else None,
                                      "collective": facts["collective"]})
        text = (f"every rank ({facts['waiting']}) waits in {facts['waiting_where']}; none "
                "completes it")
        return Stated(RULES[TIMEOUT], facts, text, None, None, None)
    first = verdict.culprits[0]
    same = [c for c in verdict.culprits if c.kind == first.kind]
    others = [c for c in verdict.culprits if c.kind != first.kind]
    facts.update(
        ranks=sorted({c.rank for c in verdict.culprits if c.rank is not None}),
        culprits=[c.to_dict() for c in verdict.culprits],
        culprit_labels=", ".join(_label(c) for c in same[:8]) + (
            f" and {len(same) - 8} more" if len(same) > 8 else ""),
        culprit_detail=first.detail if len(same) == 1 else f"{first.detail} (the first of them)",
        culprit_where=first.where.describe() if first.where else "its last known place",
        culprit_host=first.host, culprit_pid=first.pid if first.pid is not None else "PID",
        where=_where(first))
    if others:
        facts["others"] = "; ".join(f"{_label(c)} {c.detail}" for c in others[:8])
    facts["verb"] = "is" if len(same) == 1 else "are"
    ranked = [c.rank for c in same if c.rank is not None]
    who = _label(first) if len(same) == 1 else (f"ranks {rank_ranges(ranked)}" if ranked
                                                 else f"{len(same)} processes")
    text = (f"{who} {facts['verb']} {facts['culprit_detail']}; {len(ref.members)} other rank(s) "
            f"wait in {facts['waiting_where']}")
    return Stated(RULES[first.kind], facts, text, first.rank, first.host, first.pid)


def notes(verdict: Verdict) -> list[tuple[str, str]]:
    """(id, text) of what the snapshots say without a failure, and what could not be read."""
    out: list[tuple[str, str]] = []
    groups = _groups_text(verdict.groups)
    if verdict.outcome == NOTHING:
        out.append(("hang.no_process", "no training process was found to snapshot (give "
                    "--pid PID to name them)"))
    elif verdict.outcome == MOVING:
        stuck = [g for g in verdict.groups if g.state in ("stuck", "waiting")]
        if len(verdict.groups) == 1 and stuck:
            out.append(("hang.stuck_elsewhere", f"every rank is stuck at the same place, outside "
                        f"any collective: {groups}; nothing waits for a peer (a shared "
                        "resource: a file system, a lock server, the data source)"))
        else:
            out.append(("hang.moving", "no rank waits in a collective across the samples: the "
                        f"job is moving, not hung. Where the ranks are: {groups}"))
    elif verdict.outcome == INCOMPLETE:
        ref = verdict.reference
        lacking = []
        if verdict.missing:
            lacking.append(f"ranks {rank_ranges(verdict.missing)} have no snapshot (run "
                           "`ncclcheck hang --out DIR` on their nodes, then `ncclcheck "
                           "explain DIR`)")
        if verdict.unread:
            lacking.append(f"{len(verdict.unread)} process(es) could not be read")
        out.append(("hang.incomplete", f"every rank read waits in "
                    f"{ref.where.describe() if ref and ref.where else '?'} "
                    f"({rank_ranges(ref.ranks) if ref else ''}); the one holding them up is "
                    f"among the others: {'; '.join(lacking)}"))
    elif verdict.outcome == UNREAD:
        out.append(("hang.unread", "no process's stack could be read (see each process's "
                    "reason and fix)"))
    for proc in verdict.unread:
        for problem in proc.problems[-2:]:
            fix = f"; fix: {problem.fix}" if problem.fix else ""
            out.append(("hang.unreadable", f"{proc.label}: {problem.what}{fix}"))
    return out
