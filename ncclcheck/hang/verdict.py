"""The verdict: group the ranks by where they are, and name the ones that hold the others up.

A hung job looks the same from every rank but a few: most ranks wait in one collective, on the
same line of the training script, sample after sample, without a wake-up; the culprits are
elsewhere — outside any collective (in data loading, I/O, a lock, a loop), in a different
collective (another line, another op), or gone. So:

- every process's place per sample is its deciding thread's (frames.py): the collective it is
  in and the innermost frame of the user's code; a process is *stuck* when that place is the
  same in every sample and its main thread did not keep waking up (a loop of collectives passes
  through the same line hundreds of times a second);
- ranks at the same place form a group; the largest group stuck in a collective is the one the
  others wait in, and every rank not in it is a culprit (``desync``);
- every rank in that one collective, and no rank unread or unaccounted for, is ``timeout``: the
  ranks agree, the transport does not finish (flight recorder and pair tests next);
- no rank stuck in a collective is no hang (the job moves), said as a note.

The verdict is a pure function of the snapshots, so ``ncclcheck hang`` and ``ncclcheck explain``
on the written folder reach the same one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from ncclcheck.cluster.ranges import rank_ranges
from ncclcheck.hang.frames import Where, deciding_thread, where
from ncclcheck.hang.model import GoneRank, ProcessSnapshot
from ncclcheck.hang.procstate import moved

# A main thread that sleeps in a collective does not wake (Gloo's wait, NCCL's spin on a stream
# count no voluntary switch); one that passes through collectives wakes tens of times a second.
# Allowed before a process counts as moving: a few stray wake-ups, and one per sample (the armed
# way's signal interrupts the wait it lands on).
WAKEUPS_PER_S = 2.0
WAKEUPS_SPARE = 2
DESYNC, TIMEOUT, MOVING, INCOMPLETE, NOTHING, UNREAD = (
    "desync", "timeout", "moving", "incomplete", "nothing", "unread")
# culprit kinds, most telling first (the finding is named by the first culprit's)
OUTSIDE, OTHER_COLLECTIVE, GONE = "outside", "other_collective", "gone"
_KIND_ORDER = {OUTSIDE: 0, OTHER_COLLECTIVE: 1, GONE: 2}
_NO_PLACE = {"gone": "no process (exited, or never started)",
             "unread": "stacks not readable (see the process's reason)"}


@dataclass
class Seen:
    """One process as the verdict reads it."""

    proc: ProcessSnapshot
    places: list[Where]
    stuck: bool
    wakeups_per_s: float | None
    wakeups: int | None = None

    @property
    def last(self) -> Where | None:
        return self.places[-1] if self.places else None


@dataclass
class Group:
    """Ranks at one place (or gone, or unread)."""

    state: str                  # waiting, passing, stuck, running, gone, unread
    where: Where | None
    # (rank, host, pid) of each member
    members: list[tuple[int | None, str, int | None]] = field(default_factory=list)
    culprit: bool = False

    @property
    def ranks(self) -> list[int]:
        return sorted(r for r, _, _ in self.members if r is not None)

    def to_dict(self) -> dict[str, Any]:
        frame = (self.where.user or self.where.inner) if self.where else None
        unranked = [f"pid {p}" for r, _, p in self.members if r is None and p is not None]
        return {"ranks": ", ".join(x for x in (rank_ranges(self.ranks), *unranked) if x),
                "count": len(self.members), "state": self.state, "culprit": self.culprit,
                "where": self.where.describe() if self.where else _NO_PLACE.get(self.state, "?"),
                "collective": self.where.collective if self.where else None,
                "function": frame.function if frame else None,
                "file": frame.file if frame else None, "line": frame.line if frame else None,
                "hosts": sorted({h for _, h, _ in self.members})}


@dataclass
class Culprit:
    """A rank that holds the others up, and how."""

    kind: str
    rank: int | None
    host: str
    pid: int | None
    where: Where | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        frame = (self.where.user or self.where.inner) if self.where else None
        return {"kind": self.kind, "rank": self.rank, "host": self.host, "pid": self.pid,
                "where": self.where.describe() if self.where else None,
                "function": frame.function if frame else None,
                "file": frame.file if frame else None, "line": frame.line if frame else None,
                "detail": self.detail}


@dataclass
class Verdict:
    """What the snapshots say: the outcome, the culprits, every group, what is unaccounted."""

    outcome: str
    culprits: list[Culprit]
    groups: list[Group]
    reference: Group | None
    missing: list[int]              # ranks of the job nobody snapshotted
    unread: list[ProcessSnapshot]
    world_size: int | None
    notes: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str | None:
        """The first culprit's kind (names the finding), or None."""
        return self.culprits[0].kind if self.culprits else None


def _place_of(proc: ProcessSnapshot) -> list[Where]:
    places = []
    for sample in proc.samples:
        thread = deciding_thread(sample.threads, proc.pid)
        if thread is not None:
            places.append(where(thread))
    return places


def see(proc: ProcessSnapshot) -> Seen:
    """A process's places and whether it is stuck at the last one."""
    places = _place_of(proc)
    states = [s for s in proc.samples if s.state is not None]
    rate = switches = None
    still = True
    if len(states) >= 2 and states[-1].at > states[0].at:
        window = states[-1].at - states[0].at
        _, switches = moved(states[0].state, states[-1].state)
        if switches is not None:
            rate = switches / window
            still = switches <= WAKEUPS_SPARE + len(states) + WAKEUPS_PER_S * window
    same = bool(places) and all(p.key == places[-1].key for p in places)
    return Seen(proc, places, same and still, rate, switches)


def _state(members: list[Seen], collective: bool) -> str:
    stuck = all(s.stuck for s in members)
    if collective:
        return "waiting" if stuck else "passing"
    return "stuck" if stuck else "running"


def judge(processes: Iterable[ProcessSnapshot], gone: Iterable[GoneRank] = (),
          ras_missing: Iterable[tuple[int, str]] = ()) -> Verdict:
    """The verdict over every process of every node snapshotted (``gone``: ranks the nodes miss;
    ``ras_missing``: (rank, why) RAS reports missing from the job's communicator)."""
    seen = [see(p) for p in processes]
    read = [s for s in seen if s.places and not s.proc.exited]
    unread = [s.proc for s in seen if not s.places and not s.proc.exited]
    exited = {(s.proc.host, s.proc.pid): s for s in seen if s.proc.exited}
    gone = list(gone)
    gone += [GoneRank(s.proc.rank, s.proc.local_rank, s.proc.host, "exited while it was being "
                      "looked at", s.proc.pid) for key, s in exited.items()
             if not any((g.host, g.pid) == key for g in gone)]
    world = max((p.world_size for p in (s.proc for s in seen) if p.world_size), default=None)
    by_key: dict[tuple, list[Seen]] = {}
    for item in read:
        by_key.setdefault(item.last.key, []).append(item)  # type: ignore[union-attr]
    groups = []
    for members in by_key.values():
        place = members[0].last
        group = Group(_state(members, bool(place and place.collective)), place)
        group.members = [(s.proc.rank, s.proc.host, s.proc.pid) for s in members]
        groups.append(group)
    rank_of_gone = {g.rank for g in gone if g.rank is not None}
    known = {s.proc.rank for s in seen if s.proc.rank is not None} | rank_of_gone
    extra_gone = [(r, why) for r, why in ras_missing if r not in known]
    if gone or extra_gone:
        group = Group("gone", None)
        group.members = [(g.rank, g.host, g.pid) for g in gone] + [
            (r, "?", None) for r, _ in extra_gone]
        groups.append(group)
    if unread:
        group = Group("unread", None)
        group.members = [(p.rank, p.host, p.pid) for p in unread]
        groups.append(group)
    accounted = known | {r for r, _ in extra_gone}
    missing = sorted(set(range(world)) - accounted) if world else []
    waiting = [g for g in groups if g.state == "waiting"]
    reference = max(waiting, key=lambda g: (len(g.members), -min(g.ranks or [1 << 30]))) \
        if waiting else None
    verdict = Verdict(NOTHING, [], groups, reference, missing, unread, world)
    if not seen and not gone:
        return verdict
    if not read:
        verdict.outcome = UNREAD if unread else NOTHING
        return _ordered(verdict)
    if reference is None:
        verdict.outcome = MOVING
        return _ordered(verdict)
    verdict.culprits = _culprits(groups, reference, read, gone, extra_gone, exited)
    for group in groups:
        group.culprit = group is not reference and group.state != "unread"
    if verdict.culprits:
        verdict.outcome = DESYNC
    elif unread or missing:
        verdict.outcome = INCOMPLETE
    else:
        verdict.outcome = TIMEOUT
    return _ordered(verdict)


def _culprits(groups: list[Group], reference: Group, seen: list[Seen], gone: list[GoneRank],
              extra_gone: list[tuple[int, str]],
              exited: dict[tuple[str, int], Seen]) -> list[Culprit]:
    culprits = []
    members = {(s.proc.host, s.proc.pid): s for s in seen}
    for group in groups:
        if group is reference or group.state in ("gone", "unread"):
            continue
        for rank, host, pid in group.members:
            item = members[(host, pid)]
            place = item.last
            if place is not None and place.collective:
                culprits.append(Culprit(OTHER_COLLECTIVE, rank, host, pid, place,
                                        f"in {place.describe()}"))
            else:
                how = "stuck" if item.stuck else "running"
                culprits.append(Culprit(OUTSIDE, rank, host, pid, place,
                                        f"{how} in {place.describe() if place else '?'}"))
    for g in gone:
        last = exited[(g.host, g.pid)].last if (g.host, g.pid) in exited else None
        why = f"{g.why}; last in {last.describe()}" if last else g.why
        culprits.append(Culprit(GONE, g.rank, g.host, g.pid, last, f"gone ({why})"))
    for rank, why in extra_gone:
        culprits.append(Culprit(GONE, rank, "?", None, None, f"gone ({why})"))
    return sorted(culprits, key=lambda c: (_KIND_ORDER[c.kind], c.rank if c.rank is not None
                                           else 1 << 30))


def _ordered(verdict: Verdict) -> Verdict:
    """Groups as the table shows them: culprits first, then the largest first."""
    verdict.groups.sort(key=lambda g: (not g.culprit, g.state == "unread", -len(g.members),
                                       min(g.ranks) if g.ranks else 1 << 30))
    return verdict


def ras_missing(nodes: Iterable[Any], world_size: int | None) -> list[tuple[int, str]]:
    """(rank, why) of the ranks NCCL's RAS reports missing from the job's communicator (the
    one of the world's size), from the first node's report (RAS answers for the whole job)."""
    found = []
    for node in list(nodes)[:1]:
        for item in (node.ras or {}).get("missing", []):
            if isinstance(item.get("rank"), int) and item.get("size") in (None, world_size):
                found.append((item["rank"], "missing from NCCL's communicator "
                              f"({item.get('why', 'missing')}, NCCL RAS)"))
    return found


def judge_job(processes: list[ProcessSnapshot], nodes: Iterable[Any]) -> Verdict:
    """The verdict over every node's snapshot (NodeSnapshot records: gone ranks, RAS)."""
    nodes = list(nodes)
    world = max((p.world_size for p in processes if p.world_size), default=None)
    return judge(processes, [g for node in nodes for g in node.gone], ras_missing(nodes, world))
