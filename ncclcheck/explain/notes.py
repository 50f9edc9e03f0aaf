"""What explain says without a category: notes on what it could not read, and what to collect
when nothing explains the failure.

Kept apart from the readers of dumps and snapshots (hangs.py, readers/hang_snapshots.py) so that
a run with neither loads none of their machinery.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ncclcheck.explain.evidence import Role


@dataclass(frozen=True)
class Note:
    """Something explain says without a category: what it could not read, what to collect."""

    id: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "category": None, "text": self.text}


# When nothing was found: what to collect so the next failure can be explained.
COLLECT_NEXT = Note("explain.collect_next", (
    "no root cause found. To explain the next failure, collect: NCCL_DEBUG=INFO with "
    "NCCL_DEBUG_SUBSYS=INIT,NET (which interfaces, transports and plugins NCCL chose); the "
    "flight recorder (TORCH_FR_BUFFER_SIZE=2000, TORCH_NCCL_DUMP_ON_TIMEOUT=1, "
    "TORCH_FR_DUMP_TEMP_FILE=<shared dir>/nccl_trace_rank_), then `ncclcheck explain` on the "
    "logs and the dumps together; and `ncclcheck run` under the same launcher before the job"))


def ended_without_reason(findings: list) -> Note | None:
    """With no root cause: the launcher's report that a process ended, which says how, not why
    (its own output does)."""
    reports = [f for f in findings if f.role in (Role.REPORT, Role.AFTERMATH)]
    if not reports:
        return None
    hit = reports[0].first
    who = f"rank {hit.rank}" if hit.rank is not None else "a process"
    return Note("explain.ended_without_reason", (
        f"{hit.file}:{hit.line}: the launcher reports that {who} ended ({hit.text.strip()[:160]}), "
        "but no line says why: read that process's own output (its exception, a watchdog "
        "timeout, an error before it exited), or give its log to `ncclcheck explain` too"))
