"""The evidence of a run, folded: one finding per signature, its hits counted.

Readers add hits (a matched line, an inferred cause, a signal, a dump's verdict), each with the
role and weight its reader gives it (evidence.py); the arbiter (arbiter.py) chooses the root
cause among the findings. The pool never decides anything itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ncclcheck.catalogue import Signature
from ncclcheck.explain.arbiter import ordered
from ncclcheck.model import Category
from ncclcheck.explain.evidence import Role, Weight, is_generic, role_of, weight_of

MAX_KEPT = 4096  # ranks, hosts, files and worker pids remembered per finding / per run


@dataclass
class Hit:
    """One log line that matched one signature."""

    signature: Signature
    facts: dict[str, Any]
    file: str
    line: int
    text: str
    rank: int | None
    host: str | None
    time: datetime | None
    order: int  # position among all hits, in reading order
    inferred_from: dict[str, Any] | None = None  # the context line an inferred cause came from
    role: Role | None = None      # what its reader says it is (None: the signature's flags)
    weight: Weight | None = None  # ... and how much it says about why (None: the signature's)


@dataclass
class Finding:
    """All hits of one signature: the first one speaks for them, the rest are counted."""

    first: Hit
    count: int = 1
    last: Hit | None = None  # the latest hit read (whether the run went on after it)
    ranks: set[int] = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)
    files: set[str] = field(default_factory=set)
    root_cause: bool = False

    @property
    def signature(self) -> Signature:
        return self.first.signature

    @property
    def role(self) -> Role:
        return _role(self.first)

    @property
    def weight(self) -> Weight:
        return self.first.weight if self.first.weight is not None else weight_of(self.signature)

    @property
    def tier(self) -> int:
        """0 a cause, 1 a consequence, 2 a warning."""
        return {Role.CAUSE: 0, Role.WARNING: 2}.get(self.role, 1)

    def add(self, hit: Hit) -> None:
        self.count += 1
        if _earlier(hit, self.first):
            self.first = hit
        if self.last is None or hit.order > self.last.order:
            self.last = hit
        self._note(hit)

    def recovered(self, completed: dict[str, int]) -> bool:
        """Whether every hit of this finding came before a completion in its file (the run
        went on after it): read from its first and latest hits."""
        return all(hit.file in completed and 0 < hit.line < completed[hit.file]
                   for hit in (self.first, self.last or self.first))

    def _note(self, hit: Hit) -> None:
        if hit.rank is not None and len(self.ranks) < MAX_KEPT:
            self.ranks.add(hit.rank)
        if hit.host and len(self.hosts) < MAX_KEPT:
            self.hosts.add(hit.host)
        if len(self.files) < MAX_KEPT:
            self.files.add(hit.file)

    def to_dict(self) -> dict[str, Any]:
        hit = self.first
        explanation, fix = self.signature.render(hit.facts)
        return {
            "id": self.signature.id,
            "category": self.signature.category.value,
            "title": self.signature.title,
            "root_cause": self.root_cause,
            "file": hit.file,
            "line": hit.line,
            "text": hit.text,
            "rank": hit.rank,
            "host": hit.host,
            "time": hit.time.isoformat(sep=" ") if hit.time else None,
            "explanation": explanation,
            "fix": fix,
            "facts": hit.facts,
            "count": self.count,
            "ranks": sorted(self.ranks),
            "hosts": sorted(self.hosts),
            "files": sorted(self.files),
            "consequence": self.role in (Role.CONSEQUENCE, Role.REPORT, Role.AFTERMATH),
            "warning": self.role is Role.WARNING,
            "inferred_from": hit.inferred_from,
        }


def _role(hit: Hit) -> Role:
    return hit.role or role_of(hit.signature, hit.facts)


def _earlier(a: Hit, b: Hit) -> bool:
    """Whether ``a`` should speak for its finding instead of ``b``: a failure of its own before
    a report of one (a SIGKILL before a SIGABRT the same launcher reported later), then earlier
    in time, and at equal time the line that says more (names a rank or host), then the first
    one read."""
    cause_a, cause_b = _role(a) is Role.CAUSE, _role(b) is Role.CAUSE
    if cause_a != cause_b:
        return cause_a
    if a.time is not None and b.time is not None and a.time != b.time:
        return a.time < b.time
    known_a, known_b = (a.rank is not None) + bool(a.host), (b.rank is not None) + bool(b.host)
    if known_a != known_b:
        return known_a > known_b
    return a.order < b.order


class Findings:
    """Hits folded into one finding per signature as they arrive, so memory stays bounded
    however many lines match (ranks and hosts are kept up to MAX_KEPT each)."""

    def __init__(self) -> None:
        self.by_id: dict[str, Finding] = {}
        # file -> the line where the run completed after its last failure (readers/recovery.py)
        self.recovered: dict[str, int] = {}
        self.pid_owner: dict[tuple[str, Any], tuple[int, str | None]] = {}
        self.hits = 0
        self.last_line: dict[str, int] = {}  # file -> its latest line that any finding read

    def add(self, hit: Hit) -> None:
        self.hits += 1
        if hit.line > self.last_line.get(hit.file, 0):
            self.last_line[hit.file] = hit.line
        pid = hit.facts.get("pid")
        if pid is not None and hit.rank is not None and len(self.pid_owner) < MAX_KEPT:
            self.pid_owner.setdefault((hit.file, pid), (hit.rank, hit.host))
        found = self.by_id.get(hit.signature.id)
        if found is None:
            found = self.by_id[hit.signature.id] = Finding(first=hit, count=1, last=hit)
            found._note(hit)
        else:
            found.add(hit)

    def says(self, category: Category, besides: str = "") -> bool:
        """Whether a recognised cause or consequence names ``category`` and why (not one of
        NCCL's generic results; signatures whose id starts with ``besides`` left out): a guess
        of that category would repeat it without its text and fix. A launcher's report or
        what it did afterwards never stands as the root cause, so it does not count."""
        return any(f.signature.category == category and f.role in (Role.CAUSE, Role.CONSEQUENCE)
                   and not is_generic(f.signature, f.first.text)
                   and not (besides and f.signature.id.startswith(besides))
                   for f in self.by_id.values())

    def ranked(self, settings: dict[str, str] | None = None) -> list[Finding]:
        """The findings as the arbiter orders them: the root cause first."""
        findings = list(self.by_id.values())
        for finding in findings:
            finding.root_cause = False
            self._complete(finding.first, settings or {})
        # a run that went on after a failure recovered from it; not from being slow
        findings = [f for f in findings if not f.recovered(self.recovered)
                    or f.signature.category == Category.DEGRADED]
        root, found = ordered(findings)
        if root is not None:
            root.root_cause = True
        # A guess (the text model's reading, the keyword cues) is shown only where it is the
        # best the run has; the hypotheses list the model's alternatives.
        # A context fact is shown only as the explanation it is (when it stands first).
        # A slowdown is measured, not guessed: shown beside whatever failed.
        return [f for f in found if f.root_cause or (f.weight > Weight.MODEL and f.role is not
                                                     Role.CONTEXT) or f.role is Role.CONSEQUENCE
                or f.role in (Role.REPORT, Role.AFTERMATH, Role.WARNING)
                or f.signature.category == Category.DEGRADED]

    def _complete(self, hit: Hit, settings: dict[str, str]) -> None:
        """What other lines of the logs say about this hit: the NCCL settings the log printed
        (e.g. the IFNAME behind "no socket interface"), and the rank and host of a worker pid
        named in torchrun's failure report."""
        for fact, variable in hit.signature.settings:
            if fact not in hit.facts and variable in settings:
                hit.facts[fact] = settings[variable]
        owner = self.pid_owner.get((hit.file, hit.facts.get("pid")))
        if owner is not None and hit.rank is None:
            hit.rank = owner[0]
            hit.host = hit.host or owner[1]


def group(hits: list[Hit]) -> list[Finding]:
    """One finding per signature from a list of hits (see Findings)."""
    folded = Findings()
    for hit in hits:
        folded.add(hit)
    return folded.ranked()
