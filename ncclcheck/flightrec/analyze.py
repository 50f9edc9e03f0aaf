"""Across ranks, per process group: the first collective the ranks do not agree on.

Every member of a process group numbers its collectives the same way (``collective_seq_id``),
so at each sequence number every member must have entered the same op with the same sizes and
dtypes. Walking the numbers every dump still holds (a wrapped ring buffer dropped the oldest
entries, so the walk starts where the shortest memory starts), the first number where a member
is missing, or enters a different op, sizes or dtypes, names the culprits: the members that
never arrived, or the minority that called something else. Ranks with no dump are named apart;
when every dumped member waits at the same collective, a member without a dump is the one the
others wait for (a killed rank writes nothing). When every rank completed every collective,
the hang is outside the collectives. Group membership comes from ``pg_config`` where the dump
records it and from the dumps' entries otherwise (torch's Gloo leaves ``pg_config`` empty); a
group is known by its name, the same on every rank, never by a rank's local id.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

from ncclcheck.flightrec.load import Dump, Entry, Frame

DEFAULT_DESCS = ("default_pg",)
REACH_MARGIN = 8     # numbers read around the furthest-behind member's last, to see them agree
NEVER_ARRIVED, MISMATCH, STUCK, COMPLETED = "never_arrived", "mismatch", "stuck", "completed"


@dataclass(frozen=True)
class GroupVerdict:
    """What the dumps say about one process group."""

    name: str
    desc: str
    ranks: tuple[int, ...]
    kind: str                                   # NEVER_ARRIVED, MISMATCH, STUCK or COMPLETED
    seq: int | None = None                      # the first collective the members disagree on
    op: str = ""
    culprits: tuple[int, ...] = ()
    waiting: tuple[int, ...] = ()               # entered ``seq`` and did not complete it
    entered: tuple[int, ...] = ()               # entered ``seq`` (finished or not)
    completed: tuple[int, ...] = ()
    missing_dumps: tuple[int, ...] = ()
    sizes: dict[int, tuple] = field(default_factory=dict)    # per rank, when they differ
    dtypes: dict[int, tuple] = field(default_factory=dict)
    ops: dict[int, str] = field(default_factory=dict)
    culprit_frame: str = ""                     # where the culprit last was, by its own record
    waiting_frame: str = ""                     # where the others wait
    last_arrived: int | None = None             # by the recorded times, who came last
    first_seen_ns: int | None = None            # when the disagreeing collective was entered
    wrapped: tuple[int, ...] = ()               # ranks whose buffer dropped its oldest entries

    @property
    def failed(self) -> bool:
        return self.kind in (NEVER_ARRIVED, MISMATCH, STUCK)


class Reach(NamedTuple):
    """The collectives of a group the next reading must hold: numbers ``low`` to ``high``
    (``high`` None: to the newest), ``span`` entries back from the newest at most."""

    low: int
    high: int | None
    span: int


EVERYTHING = Reach(0, None, 0)


@dataclass(frozen=True)
class Analysis:
    groups: tuple[GroupVerdict, ...]
    ranks: tuple[int, ...]                      # ranks with a dump
    missing_dumps: tuple[int, ...]              # ranks of the job without one
    p2p_waiting: dict[int, str] = field(default_factory=dict)  # rank -> the p2p op it waits in
    last_in: dict[int, tuple[str, int]] = field(default_factory=dict)  # rank -> (group, seq)
    short: tuple[int, ...] = ()                 # ranks whose newest entries did not reach back
                                                # to where the members agree: read more of them
    reach: dict[str, Reach] = field(default_factory=dict)  # group -> the numbers needed

    def first_failure(self) -> GroupVerdict | None:
        """The disagreement that explains the others. A group whose culprits all sit at another
        failing group's disagreeing collective only shows where they are stuck; among the rest
        (or, in a deadlock cycle, among all), the smallest group, then the one entered first."""
        failed = [g for g in self.groups if g.failed]
        if not failed:
            return None
        at = {(g.name, g.seq) for g in failed}

        def elsewhere(verdict: GroupVerdict, rank: int) -> bool:
            where = self.last_in.get(rank)
            return where is not None and where[0] != verdict.name and where in at

        unexplained = [g for g in failed
                       if not g.culprits or not all(elsewhere(g, c) for c in g.culprits)]
        pool = unexplained or failed
        return min(pool, key=lambda g: (g.kind == STUCK, len(g.ranks), g.first_seen_ns is None,
                                        g.first_seen_ns or 0, g.name))


def analyze(dumps: list[Dump], job_ranks: int | None = None) -> Analysis:
    """Compare the dumps of one job. ``job_ranks`` (the world size, when known from elsewhere)
    lets a missing last rank be named."""
    by_rank: dict[int, Dump] = {}
    for dump in dumps:
        by_rank.setdefault(dump.rank, dump)
    highest = max(by_rank) if by_rank else -1
    for dump in by_rank.values():
        for ranks in dump.group_ranks.values():
            highest = max([highest, *ranks])
    world = max(highest + 1, job_ranks or 0)
    missing = tuple(r for r in range(world) if r not in by_rank)
    names = _groups(by_rank)
    verdicts: list[GroupVerdict] = []
    short: set[int] = set()
    reach: dict[str, Reach] = {}
    for name in sorted(names, key=_group_order(names)):
        verdict, too_short, needed = _group(name, by_rank, world)
        verdicts.append(verdict)
        short.update(too_short)
        if too_short:
            reach[name] = needed
    return Analysis(tuple(verdicts), tuple(sorted(by_rank)), missing, _p2p_waiting(by_rank),
                    _last_in(by_rank), tuple(sorted(short)), reach)


def _groups(by_rank: dict[int, Dump]) -> dict[str, str]:
    names: dict[str, str] = {}
    for dump in by_rank.values():
        for entry in dump.entries:
            if not entry.is_p2p and entry.group:
                names.setdefault(entry.group, entry.group_desc)
    return names


def _group_order(names: dict[str, str]):
    return lambda name: (names[name] not in DEFAULT_DESCS, len(name), name)


def _members(name: str, desc: str, by_rank: dict[int, Dump], world: int) -> tuple[int, ...]:
    if desc in DEFAULT_DESCS:
        return tuple(range(world))
    declared: set[int] = set()
    for dump in by_rank.values():
        declared.update(dump.group_ranks.get(name, ()))
    seen = {rank for rank, dump in by_rank.items()
            if any(e.group == name and not e.is_p2p for e in dump.entries)}
    return tuple(sorted(declared | seen))


def _group(name: str, by_rank: dict[int, Dump],
           world: int) -> tuple[GroupVerdict, set[int], Reach]:
    """The group's verdict; the members whose dumps were read only in part and must be read
    further back for the verdict to hold, and from which number (see ``_short``)."""
    desc = next((e.group_desc for d in by_rank.values() for e in d.entries if e.group == name),
                "")
    members = _members(name, desc, by_rank, world)
    dumped = [r for r in members if r in by_rank]
    missing = tuple(r for r in members if r not in by_rank)
    timeline: dict[int, dict[int, Entry]] = {}
    for rank in dumped:
        entries = {}
        for entry in by_rank[rank].entries:
            if entry.group == name and not entry.is_p2p and entry.seq is not None:
                entries[entry.seq] = entry
        timeline[rank] = entries
    base = dict(name=name, desc=desc, ranks=members, missing_dumps=missing)
    present = {r: t for r, t in timeline.items() if t}
    if not present:
        return GroupVerdict(kind=COMPLETED, **base), set(), EVERYTHING
    lows = {r: min(t) for r, t in present.items()}
    start = max(lows.values())
    base["wrapped"] = tuple(sorted(
        r for r, low in lows.items()
        if (low > 1 if by_rank[r].complete else by_rank[r].buffer_wrapped)))
    verdict = _walk(timeline, start, dumped, missing, by_rank, base)
    return (verdict, *_short(verdict, timeline, lows, start, by_rank))


def _short(verdict: GroupVerdict, timeline: dict[int, dict[int, Entry]], lows: dict[int, int],
           start: int, by_rank: dict[int, Dump]) -> tuple[set[int], Reach]:
    """Members read only in part whose part is too short: they hold no entry of the group, or
    the walk found the disagreement at the very first number every part holds, which one of
    them opens (the members may already have disagreed before it). And what the next reading
    needs: around the furthest-behind member's last number when members were behind there;
    every number otherwise."""
    partial = {r for r in timeline if not by_rank[r].complete}
    short = {r for r in partial if not timeline[r]}
    if verdict.kind in (NEVER_ARRIVED, MISMATCH) and verdict.seq == start:
        short.update(r for r in partial if lows.get(r) == start)
    if not short or verdict.kind != NEVER_ARRIVED or any(not timeline[r] for r in short):
        return short, EVERYTHING
    last = min(max(t) for t in timeline.values() if t)
    low = max(1, last - REACH_MARGIN)
    # entries to read back from the newest: the group's numbers, scaled by how many entries
    # of any group the part holds per entry of this one
    return short, Reach(low, last + REACH_MARGIN, max(
        -(-(max(timeline[r]) - low + 1) * len(by_rank[r].entries) // len(timeline[r]))
        for r in short) + REACH_MARGIN)


def _walk(timeline: dict[int, dict[int, Entry]], start: int, dumped: list[int],
          missing: tuple[int, ...], by_rank: dict[int, Dump], base: dict) -> GroupVerdict:
    """From the first number every dump holds, the first where the members disagree."""
    end = max(max(t) for t in timeline.values() if t)
    highs = {r: max(t, default=0) for r, t in timeline.items()}
    for seq in range(start, end + 1):
        entered = {r: t[seq] for r, t in timeline.items() if seq in t}
        behind = [r for r in dumped if highs[r] < seq]
        if behind:
            return _never_arrived(seq, entered, tuple(behind), by_rank, base)
        shapes = Counter(e.shape() for e in entered.values())
        if len(shapes) > 1:
            return _mismatch(seq, entered, shapes, by_rank, base)
    last = {r: t[end] for r, t in timeline.items() if end in t}
    finished = [r for r, e in last.items() if by_rank[r].done(e)]
    # a collective finished on one member had every member's part: it finishes everywhere
    # (Gloo updates a rank's completion count a moment after the call returns)
    # and only a recorder that tracks progress (NCCL's started state) can show a collective
    # that never finished; Gloo leaves every entry "scheduled", so there it is unknown
    tracked = [r for r, e in last.items() if e.state == "started" or e.started_ns]
    open_ranks = () if finished or not tracked else tuple(sorted(last))
    if missing:
        # no dumped member disagrees: the members without a dump are the ones nobody can
        # vouch for (a killed rank writes no dump), last seen together at this collective
        return _never_arrived(end, last, missing, by_rank, base)
    if open_ranks:
        entry = last[open_ranks[0]]
        return GroupVerdict(kind=STUCK, seq=end, op=entry.op, waiting=open_ranks,
                            waiting_frame=_user_frame(entry.frames),
                            last_arrived=_last_arrived(last),
                            first_seen_ns=_first_seen(last), **base)
    return GroupVerdict(kind=COMPLETED, seq=end, op=last[min(last)].op if last else "",
                        completed=tuple(sorted(last)), last_arrived=_last_arrived(last), **base)


def _never_arrived(seq: int, entered: dict[int, Entry], culprits: tuple[int, ...],
                   by_rank: dict[int, Dump], base: dict) -> GroupVerdict:
    some = entered[min(entered)]
    waiting = tuple(sorted(r for r, e in entered.items() if not by_rank[r].done(e)))
    culprit_frame = ""
    for rank in culprits:
        if rank in by_rank:
            culprit_frame = _last_frame(by_rank[rank])
            if culprit_frame:
                break
    return GroupVerdict(kind=NEVER_ARRIVED, seq=seq, op=some.op, culprits=tuple(culprits),
                        waiting=waiting, entered=tuple(sorted(entered)),
                        completed=tuple(sorted(r for r, e in entered.items()
                                               if by_rank[r].done(e))),
                        culprit_frame=culprit_frame, waiting_frame=_user_frame(some.frames),
                        first_seen_ns=_first_seen(entered), **base)


def _mismatch(seq: int, entered: dict[int, Entry], shapes: Counter, by_rank: dict[int, Dump],
              base: dict) -> GroupVerdict:
    ranked = shapes.most_common()
    top = ranked[0][1]
    # the majority's shape; on a tie, the shape rank 0 (or the lowest rank) called
    majority = ranked[0][0] if len(ranked) == 1 or ranked[1][1] < top else entered[min(entered)].shape()
    culprits = tuple(sorted(r for r, e in entered.items() if e.shape() != majority))
    differs = {field: len({repr(getattr(e, field)) for e in entered.values()}) > 1
               for field in ("op", "input_sizes", "input_dtypes")}
    some = entered[culprits[0]]
    others = next(e for r, e in entered.items() if r not in culprits)
    return GroupVerdict(
        kind=MISMATCH, seq=seq, op=others.op, culprits=culprits, entered=tuple(sorted(entered)),
        waiting=tuple(sorted(r for r, e in entered.items() if not by_rank[r].done(e))),
        completed=tuple(sorted(r for r, e in entered.items() if by_rank[r].done(e))),
        ops={r: e.op for r, e in entered.items()} if differs["op"] else {},
        sizes={r: e.input_sizes for r, e in entered.items()} if differs["input_sizes"] else {},
        dtypes={r: e.input_dtypes for r, e in entered.items()} if differs["input_dtypes"] else {},
        culprit_frame=_user_frame(some.frames), waiting_frame=_user_frame(others.frames),
        first_seen_ns=_first_seen(entered), **base)


def _user_frame(frames: tuple[Frame, ...]) -> str:
    """The innermost frame outside torch (the caller's code), else the innermost one."""
    for frame in frames:
        if "/torch/" not in frame.filename.replace("\\", "/"):
            return frame.describe()
    return frames[0].describe() if frames else ""


def _last_frame(dump: Dump) -> str:
    """Where a rank last was by its own record: its newest entry's caller."""
    newest = _newest(dump)
    return _user_frame(newest.frames) if newest is not None else ""


def _first_seen(entries: dict[int, Entry]) -> int | None:
    times = [e.time_created_ns for e in entries.values() if e.time_created_ns]
    return min(times) if times else None


def _last_arrived(entries: dict[int, Entry]) -> int | None:
    times = {r: e.time_created_ns for r, e in entries.items() if e.time_created_ns}
    if len(times) < 2:
        return None
    return max(times, key=lambda r: times[r])


def _newest(dump: Dump) -> Entry | None:
    return max(dump.entries, key=lambda e: (e.time_created_ns or 0, e.record_id or 0),
               default=None)


def _p2p_waiting(by_rank: dict[int, Dump]) -> dict[int, str]:
    """Ranks whose newest operation is a point-to-point one that never completed."""
    out = {}
    for rank, dump in by_rank.items():
        newest = _newest(dump)
        if newest is not None and newest.is_p2p and newest.state != "completed":
            out[rank] = newest.op
    return out


def _last_in(by_rank: dict[int, Dump]) -> dict[int, tuple[str, int]]:
    """Per rank, the group and sequence number of its newest collective: where it was last
    (whether that one finished cannot always be told: Gloo counts a timed-out one as done)."""
    out = {}
    for rank, dump in by_rank.items():
        collectives = [e for e in dump.entries if not e.is_p2p and e.seq is not None]
        if collectives:
            newest = max(collectives, key=lambda e: (e.time_created_ns or 0, e.record_id or 0))
            out[rank] = (newest.group, newest.seq)
    return out
