"""What explain knows of one run while its readers read it: the lines as they come, and the
evidence and facts every reader has gathered so far.

Readers (ncclcheck/explain/readers/) only add to a ``Run``: evidence to ``findings`` (the arbiter
orders it, arbiter.py), facts to the context, lines to the text the guessers read, notes. No
reader decides the root cause, and the engine calls them in their declared order without
knowing what any of them does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ncclcheck.catalogue import Catalogue, Signature
from ncclcheck.explain.context import LogContext
from ncclcheck.explain.fallback import ErrorCues, line_weight
from ncclcheck.explain.findings import Findings
from ncclcheck.explain.notes import Note
from ncclcheck.explain.lines import LineInfo
from ncclcheck.explain.matcher import Matcher
from ncclcheck.explain.reader import Source
from ncclcheck.explain.scan import Candidate
from ncclcheck.explain.summary import NcclSummary
from ncclcheck.explain.textmodel import LogText, Reading, TextModel


@dataclass(slots=True)  # one per candidate line: a dense log makes tens of thousands
class Line:
    """One candidate line of one file, as every line reader sees it."""

    file: str
    number: int                 # 1-based, in the file as written (wrapped lines rejoined)
    text: str
    info: LineInfo              # who printed it, when, and the message without prefixes
    candidate: Candidate        # why the scanner handed it on (INFO, context, error, gated)
    file_rank: int | None       # the rank a per-rank file's name gives (rank3.log)
    claim: tuple[Signature, dict[str, Any]] | None = None  # the signature that claimed it
    guessable: bool = True      # whether the guessers (text model, keyword cues) read it
    _weight: float | None = None

    @property
    def weight(self) -> float:
        """How much the line shows a failure (fallback.line_weight), read once for every
        reader that asks."""
        if self._weight is None:
            self._weight = line_weight(self.info.message, self.info.severity)
        return self._weight



@dataclass
class Run:
    """One explain run: its inputs, and what the readers found in them."""

    catalogue: Catalogue
    matcher: Matcher
    model: TextModel | None
    dumps: list[Source] = field(default_factory=list)
    snapshots: list[Source] = field(default_factory=list)  # `ncclcheck hang`'s, by content
    findings: Findings = field(default_factory=Findings)
    summary: NcclSummary = field(default_factory=NcclSummary)
    context: LogContext = field(default_factory=LogContext)
    cues: ErrorCues = field(default_factory=ErrorCues)
    text: LogText = field(default_factory=LogText)
    notes: list[Note] = field(default_factory=list)
    reading: Reading | None = None   # the text model's reading, once a reader made it
    state: dict[str, Any] = field(default_factory=dict)  # a line reader's own memory per file
