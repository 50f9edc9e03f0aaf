"""Which rank is behind, from the watchdog lines of several ranks.

When a collective hangs, every rank's NCCL watchdog times out and says where it stood: the
collective it waited in (``WorkNCCL(SeqNum=N, OpType=...)``) or its last enqueued and
completed work. Each rank's line alone is a timeout (a consequence); read together, ranks of one
process group that stopped at different sequence numbers show who never entered the
collective the others waited in: the ranks with the lowest enqueued number are behind. That is
a desync with the culprits named (``facts.ranks``), as the flight recorder's dumps would say.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ncclcheck.explain.findings import Hit
from ncclcheck.explain.readers import ERROR, GATE, Reader
from ncclcheck.explain.run import Line, Run

RULE = "watchdog_lag"
_WHO = r"\[(?:PG (?P<group>[^\]]*?) )?Rank (?P<rank>\d+)\]"
_TIMED_OUT = re.compile(_WHO + r".*?Watchdog caught collective operation timeout: "
                        r"WorkNCCL\(SeqNum=(?P<seq>\d+)(?:, OpType=(?P<op>\w+))?")
_ENQUEUED = re.compile(_WHO + r".*?last enqueued NCCL work: (?P<enqueued>\d+), "
                       r"last completed NCCL work: (?P<completed>-?\d+)")


@dataclass
class Stood:
    """Where one rank's watchdog said it stood, and the line that said so."""

    rank: int
    enqueued: int
    op: str | None
    file: str
    line: int
    text: str


def read_line(run: Run, line: Line) -> None:
    message = line.info.message
    if "atchdog" not in message and "last enqueued" not in message:
        return
    found = _ENQUEUED.search(message) or _TIMED_OUT.search(message)
    if found is None:
        return
    fields = found.groupdict()
    enqueued = int(fields.get("enqueued") or fields["seq"])
    group = fields.get("group") or "0"
    stood = run.state.setdefault(RULE, {}).setdefault(group, {})
    rank = int(fields["rank"])
    known = stood.get(rank)
    if known is None or enqueued > known.enqueued:
        stood[rank] = Stood(rank, enqueued, fields.get("op"), line.file, line.number,
                            line.text.strip()[:2000])


def read_run(run: Run) -> None:
    for group, stood in sorted(run.state.get(RULE, {}).items()):
        if len(stood) < 2:
            continue
        behind_at = min(s.enqueued for s in stood.values())
        ahead_at = max(s.enqueued for s in stood.values())
        if behind_at == ahead_at:
            continue  # every rank waited in the same collective: a timeout, not a desync
        behind = sorted(r for r, s in stood.items() if s.enqueued == behind_at)
        ahead = sorted(r for r, s in stood.items() if s.enqueued == ahead_at)
        where = stood[behind[0]]
        sig = run.catalogue.by_rule(RULE)
        op = stood[ahead[0]].op
        facts = {"ranks": behind, "culprits": ", ".join(map(str, behind)), "behind": behind_at,
                 "ahead": f"{ahead_at}" + (f" ({op})" if op else ""),
                 "ahead_ranks": ", ".join(map(str, ahead)), "group": group,
                 "seq": ahead_at}
        run.findings.add(Hit(sig, facts, where.file, where.line, where.text, where.rank, None,
                             None, run.findings.hits,
                             inferred_from={"file": where.file, "line": where.line,
                                            "text": where.text[:300]}))


READER = Reader("watchdog_lag", 35, line=read_line, run=read_run,
                kinds=GATE | ERROR)
