"""One log line: strip launcher and logger prefixes, keep who printed it and when.

Handles NCCL's ``host:pid:tid [dev]`` prefix (with or without its ``[date time]`` stamp),
torchrun's ``[rank3]:`` and ``[default0]:``, srun ``--label``'s ``3: ``, glog-style
``[E906 12:16:32.611 file.cpp:607]`` and Python logging's ``2026-12-02 12:59:53,123``; and
what log collectors put before every line: Ray's ``(RayTrainWorker pid=123, ip=10.0.0.1)``,
``kubectl logs --prefix``'s ``[pod/train-0/main]``, docker compose's ``train-1  | ``,
journald's ``Dec 07 02:55:21 node1 python3[1234]:`` and a timestamping tee's ``Dec 07
02:55:21`` (their clock is when the collector saw the line, not a time the program printed, so
it is not read as the line's time).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

# A line whose message goes on below it: torch's "Last error:" echo, an exception header
# ("MisconfigurationException: ..." with the reason on the next line).
GOES_ON = re.compile(rb"(?:Last error:|(?:Error|Exception):(?: .{0,200})?)\s*$")
_MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
_SYSLOG_STAMP = r"(?:" + _MONTHS + r")\s+\d{1,2}\s\d\d:\d\d:\d\d\s"
# journald's "host program[pid]: " after its clock (a timestamping tee prints the clock alone);
# journald names the pid of every process but the kernel's, so "host word: " without one is a
# message's own words ("initializing ddp: GLOBAL_RANK: ..."), not a source
_JOURNALD_SOURCE = r"(?:(?P<jhost>[\w.\-]+)\s(?:[\w.\-/]+\[\d+\]|kernel):\s)?"
# The common prefixes first (a regex tries its alternatives in order), collectors' last.
_PREFIXES = r"""\s*(?:
        \[rank(?P<rank>\d+)\]:\s?                                   # torchrun --tee / log prefix
      | \[(?P<role>[A-Za-z_]+)(?P<local_rank>\d+)\]:\s?             # torchrun [default0]:
      | \[\d+,(?P<mpi_rank>\d+)\]<std(?:out|err)>:\s?                 # mpirun --tag-output
      | (?P<label>\d{1,6}):\s                                       # srun --label
      | \[(?P<stamp>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\]\s?   # NCCL [%F %T]
      | (?P<pystamp>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)(?:Z|[+-]\d\d:?\d\d)?\s   # logging
      | (?P<glog2>[IWEF])(?P<month2>\d{1,2})(?P<day2>\d\d)\s(?P<clock2>\d\d:\d\d:\d\d(?:\.\d+)?)\s\d+\s\S+:\d+\]\s?
      | \[(?P<glog>[IWEF])(?P<month>\d{1,2})(?P<day>\d\d)\s(?P<clock>\d\d:\d\d:\d\d(?:\.\d+)?)[^\]]*\]\s?
      | (?P<host>[A-Za-z0-9][\w.\-]*):(?P<pid>\d+):(?P<tid>\d+)\s(?:\[(?P<dev>\d+)\]\s)?   # NCCL
      | \((?P<ray>[A-Za-z_]\w*\ )?pid=(?P<ray_pid>\d+)(?:,\ ip=[\d.:a-fA-F]+)?\)\s    # Ray worker
      | \[pod/[^/\]\s]+/[^\]\s]+\]\s                                 # kubectl logs --prefix
      | [A-Za-z][\w.\-]*-\d+\s+\|(?:\s|$)                                # docker compose
      | SYSLOG_STAMP JOURNALD_SOURCE                                 # journald / ts
    )"""
LINE_PREFIXES = re.compile(_PREFIXES.replace("SYSLOG_STAMP", _SYSLOG_STAMP)
                           .replace("JOURNALD_SOURCE", _JOURNALD_SOURCE), re.X)
# The same prefixes for a Hyperscan pass (gate.py): journald's source part, words before a
# colon, makes its automaton several times slower on every line, so it stops at the clock;
# a line that starts with a syslog clock (SYSLOG_START) is never judged by that pass.
# Only translated for Hyperscan, never matched by Python: kept as the pattern (verbose, re.X).
SCAN_PREFIXES = _PREFIXES.replace("SYSLOG_STAMP", _SYSLOG_STAMP).replace("JOURNALD_SOURCE", "")
SYSLOG_START = re.compile(rb"\s*" + _SYSLOG_STAMP.encode())
_C10_STAMP = re.compile(r"\[([IWEF]) [\w.\-]+\.(?:cpp|cc|h):\d+\] ")
_RANK_IN_TEXT = re.compile(r"\[(?:PG [^\]]*?)?Rank (?P<rank>\d+)\]")


@dataclass
class LineInfo:
    """What the prefixes of a line said about it; ``message`` is the rest."""

    message: str
    rank: int | None = None
    local_rank: int | None = None
    host: str | None = None
    pid: int | None = None
    time: datetime | None = None
    severity: str | None = None  # a glog stamp's I, W, E or F (torch's C++ logging)


def parse_line(text: str, default_year: int | None = None) -> LineInfo:
    """Peel known prefixes off ``text`` (in any order, as launchers nest them)."""
    info = LineInfo(message=text)
    pos = 0
    for _ in range(8):
        found = LINE_PREFIXES.match(text, pos)
        if not found or found.end() == pos:
            break
        kind = found.lastgroup  # the last group of the one branch that matched names it
        if kind == "rank":
            info.rank = int(found["rank"])
        elif kind == "mpi_rank":
            info.rank = int(found["mpi_rank"])
        elif kind == "local_rank":
            info.local_rank = int(found["local_rank"])
        elif kind == "label":
            info.rank = int(found["label"]) if info.rank is None else info.rank
        elif kind in ("stamp", "pystamp"):
            info.time = info.time or _iso(found[kind])
        elif kind in ("clock", "clock2"):
            suffix = "2" if kind == "clock2" else ""
            info.severity = info.severity or found["glog" + suffix]
            info.time = info.time or _glog({key: found[key + suffix]
                                            for key in ("month", "day", "clock")}, default_year)
        elif kind in ("tid", "dev"):
            info.host, info.pid = found["host"], int(found["pid"])
        pos = found.end()
    info.message = text[pos:] if pos else text
    if info.severity is None:
        # torch up to 2.0 stamped its C++ log lines "[E socket.cpp:860]": the severity is read,
        # the stamp left on the message (not a prefix: the Hyperscan pass would pay for it)
        stamp = _C10_STAMP.match(info.message)
        info.severity = stamp.group(1) if stamp else None
    if info.rank is None and "Rank " in info.message:
        in_text = _RANK_IN_TEXT.search(info.message)
        if in_text:
            info.rank = int(in_text.group("rank"))
    return info


def _iso(value: str) -> datetime | None:
    try:
        return datetime.fromisoformat(value.replace(",", ".").replace("T", " "))
    except ValueError:
        return None


def _glog(groups: dict, year: int | None) -> datetime | None:
    """glog stamps have no year: take the file's (from a full stamp seen before), else the
    latest year that does not put the stamp in the future."""
    clock, _, fraction = groups["clock"].partition(".")
    now = datetime.now()
    try:
        stamp = datetime.strptime(f"{year or now.year}-{groups['month']}-{groups['day']} {clock}",
                                  "%Y-%m-%d %H:%M:%S")
        stamp = stamp.replace(microsecond=int((fraction + "000000")[:6]))
    except ValueError:
        return None
    if year is None and stamp > now + timedelta(days=1):
        stamp = stamp.replace(year=stamp.year - 1)
    return stamp


_ANY_STAMP = re.compile(r"(\d{4}-\d\d-\d\d)[ T_](\d\d:\d\d:\d\d)")


def stamp_in(text: str) -> datetime | None:
    """A full date-time anywhere in ``text`` (torchrun's ``time : 2026-12-02_12:59:53``)."""
    found = _ANY_STAMP.search(text)
    if not found:
        return None
    return _iso(f"{found.group(1)} {found.group(2)}")
