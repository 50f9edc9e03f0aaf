"""A job's flight-recorder dumps as findings: the dumps say who, the culprit's own log says why.

The dumps of a hung job (ncclcheck/flightrec) name the first collective the ranks disagree on.
That disagreement becomes one ``fr.*`` finding (category desync), the root cause over the
watchdog timeouts the waiting ranks print, since those are its consequence; when the logs
beside the dumps hold a failure of a culprit rank (its exception, an OOM, a signal), the
finding quotes it. Dumps in which every rank completed every collective give no failure, only
a note that the hang lies outside the collectives. Each rule is named by the signature that
declares ``rule = "<name>"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ncclcheck.catalogue import Catalogue, load
from ncclcheck.explain.findings import Finding, Findings, Hit
from ncclcheck.explain.notes import Note
from ncclcheck.explain.reader import InputError, Source
from ncclcheck.flightrec.analyze import (COMPLETED, MISMATCH, NEVER_ARRIVED, STUCK, Analysis,
                                         GroupVerdict, Reach, analyze)
from ncclcheck.flightrec.load import Dump, DumpError, read_dump
from ncclcheck.gcpause import paused_gc
from ncclcheck.model import Category

# verdict kind -> the rule of the signature it reads as
HANG_RULES: dict[str, str] = {
    NEVER_ARRIVED: "rank_never_arrived",
    MISMATCH: "collective_mismatch",
    STUCK: "collective_stuck",
}
_CONSEQUENCES = frozenset({Category.TIMEOUT, Category.RANK_CRASHED, Category.CONNECTION,
                           Category.OTHER})


# The newest entries of each large dump read first; a later reading reads as far back as the
# verdict needs (WIDER times further when that is not known), whole dumps from WHOLE_FROM.
FIRST_WINDOW = 64
WIDER = 8
WHOLE_FROM = 4096


@dataclass
class JobDumps:
    """A job's dumps as read so far (newest entries of large ones), and where to read more."""

    dumps: list[Dump]
    notes: list[Note]
    sources: dict[str, Source]
    window: int | None = FIRST_WINDOW            # None: whole dumps were read

    def read_further(self, ranks: tuple[int, ...], reach: dict[str, Reach]) -> bool:
        """Read these ranks' dumps further back: as many entries as ``reach`` says are needed,
        keeping of each group only the numbers it needs (bounded memory); whole dumps when that
        is most of them. False when nothing more can be read."""
        wanted = set(ranks)
        again = [d for d in self.dumps if d.rank in wanted and not d.complete]
        if self.window is None or not again:
            return False
        spans = [r.span for r in reach.values()]
        needed = max(spans) if spans and all(spans) else 0
        wider = needed if needed > self.window else self.window * WIDER
        self.window = wider if wider < WHOLE_FROM else None
        keep = {g: (r.low, r.high) for g, r in reach.items() if r.low > 0}
        fresh, notes = _read([self.sources[d.path] for d in again], self.window, keep)
        by_path = {d.path: d for d in fresh}
        self.dumps = [by_path.get(d.path, d) for d in self.dumps]
        self.notes += notes
        return True


def read_dumps(items: list[Source]) -> JobDumps:
    """Every dump that reads (gzip decompressed by content), large ones by their newest
    entries first; a one-line note for each that does not read."""
    dumps, notes = _read(items, FIRST_WINDOW)
    return JobDumps(dumps, notes, {s.name: s for s in items}, FIRST_WINDOW)


def _read(items: list[Source], newest: int | None,
          keep_from: dict[str, tuple[int, int | None]] | None = None
          ) -> tuple[list[Dump], list[Note]]:
    dumps, notes = [], []
    with paused_gc():
        for source in items:
            try:
                stream = source.open()
                try:
                    dumps.append(read_dump(source.name, stream, newest, keep_from))
                finally:
                    stream.close()
            except (DumpError, InputError, OSError, EOFError) as exc:
                said = str(exc) if isinstance(exc, InputError) else f"{source.name} {exc}"
                notes.append(Note("fr.unreadable", said))
    return dumps, notes


def add_hang(hits: Findings, job: JobDumps,
             catalogue: Catalogue | None = None) -> tuple[Analysis | None, list[Note]]:
    """Add the dumps' verdict to ``hits`` (before ranking): the root cause when the ranks
    disagree; a note when every rank completed every collective. Dumps read in part are read
    further back while the verdict needs it. The rules' signatures are ``catalogue``'s (the
    shipped one when None)."""
    if not job.dumps:
        return None, []
    ranked = hits.ranked()
    mentioned = [r for f in ranked for r in f.ranks]
    with paused_gc():
        analysis = analyze(job.dumps, max(mentioned) + 1 if mentioned else None)
        while analysis.short and job.read_further(analysis.short, analysis.reach):
            analysis = analyze(job.dumps, max(mentioned) + 1 if mentioned else None)
    dumps = job.dumps
    verdict = analysis.first_failure()
    notes = []
    if analysis.missing_dumps:
        notes.append(Note("fr.missing_dumps", "no flight-recorder dump for rank(s) "
                          f"{_ranks(analysis.missing_dumps)}; the others were analysed"))
    if verdict is None:
        done = [g for g in analysis.groups if g.kind == COMPLETED and g.seq is not None]
        last = ", ".join(f"{g.op} #{g.seq} of {_group(g)}" for g in done) or "none recorded"
        notes.append(Note("fr.all_completed", "every rank completed every collective its "
                          f"flight-recorder dump holds (last: {last}): the hang, if there was "
                          "one, is outside the collectives (a rank stuck in Python, data "
                          "loading, I/O or its own threads; py-spy dump --pid shows where)"))
        return analysis, notes
    sig = (load() if catalogue is None else catalogue).by_rule(HANG_RULES[verdict.kind])
    facts = _facts(verdict, analysis, ranked)
    where = _where(verdict, dumps)
    text = _summary(verdict)
    hits.add(Hit(sig, facts, where, 0, text, verdict.culprits[0] if verdict.culprits else None,
                 None, None, hits.hits))
    return analysis, notes


def _group(verdict: GroupVerdict) -> str:
    desc = verdict.desc if verdict.desc not in ("", "undefined") else ""
    return f"{verdict.name} ({desc})" if desc else verdict.name


def _ranks(ranks: tuple[int, ...] | list[int]) -> str:
    return ", ".join(str(r) for r in ranks)


def _facts(verdict: GroupVerdict, analysis: Analysis, ranked: list[Finding]) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "ranks": list(verdict.culprits), "culprits": _ranks(verdict.culprits),
        "collective": verdict.op, "seq": verdict.seq, "group": _group(verdict),
        "process_group": {"name": verdict.name, "desc": verdict.desc,
                          "ranks": list(verdict.ranks)},
        "missing_dumps": list(analysis.missing_dumps),
        "entered": _ranks(verdict.entered) if verdict.entered else "the others",
    }
    if verdict.missing_dumps:
        facts["missing"] = _ranks(verdict.missing_dumps)
    if verdict.sizes:
        facts["sizes"] = {str(r): _listed(v) for r, v in verdict.sizes.items()}
    if verdict.dtypes:
        facts["dtypes"] = {str(r): _listed(v) for r, v in verdict.dtypes.items()}
    if verdict.ops:
        facts["ops"] = {str(r): op for r, op in verdict.ops.items()}
    if verdict.kind == MISMATCH:
        culprit = verdict.culprits[0]
        call = verdict.ops.get(culprit, verdict.op)
        if culprit in verdict.sizes:
            call += f" with sizes {_listed(verdict.sizes[culprit])}"
        if culprit in verdict.dtypes:
            call += f" of {', '.join(str(d) for d in _listed(verdict.dtypes[culprit]))}"
        facts["culprit_call"] = call
    frames = {}
    if verdict.culprit_frame:
        facts["culprit_frame"] = frames["culprit"] = verdict.culprit_frame
    if verdict.waiting_frame:
        facts["waiting_frame"] = frames["waiting"] = verdict.waiting_frame
    if frames:
        facts["frames"] = frames
    if verdict.last_arrived is not None:
        facts["last_arrived"] = verdict.last_arrived
    if verdict.wrapped:
        facts["wrapped"] = list(verdict.wrapped)
    own = _culprit_log(verdict, ranked)
    if own is not None:
        hit = own.first
        facts["culprit_log"] = (f"Rank {hit.rank}'s own log says why: {own.signature.title} "
                                f"({hit.file}:{hit.line}).")
    return facts


def _listed(value: object) -> list:
    """Sizes or dtypes as JSON lists, whatever nesting the dump used."""
    if isinstance(value, (list, tuple)):
        return [_listed(v) if isinstance(v, (list, tuple)) else v for v in value]
    return [value]


def _culprit_log(verdict: GroupVerdict, ranked: list[Finding]) -> Finding | None:
    """A failure the logs show on a culprit rank, the most telling first."""
    culprits = set(verdict.culprits)
    mine = [f for f in ranked if (f.first.rank in culprits or f.ranks & culprits)
            and f.tier < 2]
    if not mine:
        return None
    return min(mine, key=lambda f: (f.signature.category in _CONSEQUENCES, f.tier,
                                    -f.signature.priority, f.first.order))


def _where(verdict: GroupVerdict, dumps: list[Dump]) -> str:
    """The dump that shows the disagreement best: a culprit's, else a waiting rank's."""
    by_rank = {d.rank: d for d in dumps}
    for rank in (*verdict.culprits, *verdict.waiting, *sorted(by_rank)):
        if rank in by_rank:
            return by_rank[rank].path
    return dumps[0].path


def _summary(verdict: GroupVerdict) -> str:
    group = _group(verdict)
    if verdict.kind == NEVER_ARRIVED:
        return (f"rank(s) {_ranks(verdict.culprits)} never entered {verdict.op} #{verdict.seq} "
                f"of process group {group}")
    if verdict.kind == MISMATCH:
        return (f"rank(s) {_ranks(verdict.culprits)} called something else at {verdict.op} "
                f"#{verdict.seq} of process group {group}")
    return f"every rank entered {verdict.op} #{verdict.seq} of process group {group}; none completed"
