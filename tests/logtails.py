"""A real launcher's report of a death appended to a log, made to agree with the log.

A real capture of a failed job ends with what the launcher printed when a rank died (torchrun's
ChildFailedError block, srun's "task 1: Aborted (core dumped)", mpirun's banner). The tails in
tests/data/logs/tails/ were printed by the real launchers (make_launcher_tails.py); here one is
appended, its dead rank, host and times changed to the log's own where the log names them, so
the tail reads as the end of that job: rank 1 on node1 becomes the rank and host the log names,
the surviving rank 0 another one, and its times follow the log's latest.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

from logshapes import last_stamp, named_host, named_rank

FOLDER = Path(__file__).resolve().parent / "data" / "logs" / "tails"
DEAD, SURVIVOR, HOST = 1, 0, "node1"  # as make_launcher_tails.py stored them

_RANK_FIELDS = (  # (what precedes the rank, the rank) wherever a launcher names one
    re.compile(r"(\brank\s+:\s+)(\d+)"),  # torchrun's failure block
    re.compile(r"(local_rank: )(\d+)"),  # torchrun's agent and failure block
    re.compile(r"(task )(\d+)(?=:)"),  # srun: error: node1: task 1: ...
    re.compile(r"(?m)^()(\d+)(?=: )"),  # srun -l's label
    re.compile(r"(process rank )(\d+)"),  # mpirun noticed that process rank 1 ...
    re.compile(r"(\[\[\d+,\d+\],)(\d+)(?=\])"),  # mpirun's process name [[job,1],rank]
)
_GLOG = re.compile(r"(?m)^([IWEF])\d{4} \d\d:\d\d:\d\d\.\d+")
_FULL = re.compile(r"\d{4}-\d\d-\d\d([_T ])\d\d:\d\d:\d\d")


def load() -> dict[str, str]:
    """Every stored tail by name (torchrun-abort, srun-l-exit1, ...)."""
    return {path.stem: path.read_text("utf-8") for path in sorted(FOLDER.glob("*.txt"))}


def agree(tail: str, rank: int | None = None, host: str | None = None,
          when: datetime | None = None) -> str:
    """``tail`` with its dead rank as ``rank`` (the survivor another), its host as ``host`` and
    its times as ``when``; whatever is None stays as stored."""
    if rank is not None and rank != DEAD:
        ranks = {DEAD: rank, SURVIVOR: 0 if rank != 0 else DEAD}
        for pattern in _RANK_FIELDS:
            tail = pattern.sub(lambda m: m.group(1) + str(ranks.get(int(m.group(2)),
                                                                    int(m.group(2)))), tail)
    if host:
        tail = re.sub(rf"\b{HOST}\b", lambda m: host, tail)
    if when is not None:
        tail = _GLOG.sub(lambda m: m.group(1) + when.strftime("%m%d %H:%M:%S.%f"), tail)
        tail = _FULL.sub(lambda m: when.strftime(f"%Y-%m-%d{m.group(1)}%H:%M:%S"), tail)
    return tail


def append_tail(text: str, tail: str) -> str:
    """``text`` followed by ``tail``, agreeing with it: the rank and host the log names, a
    second after the latest time it prints."""
    latest = last_stamp(text)
    fitted = agree(tail, named_rank(text), named_host(text),
                   latest + timedelta(seconds=1) if latest else None)
    return text + ("\n" if text and not text.endswith("\n") else "") + fitted
