"""explain(): read logs, match the catalogue, summarise NCCL, rank the findings."""

from __future__ import annotations

import os
import re
import zlib
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable

from ncclcheck.catalogue import Catalogue, Signature
from ncclcheck.explain.context import LogContext
from ncclcheck.explain.evidence import Role, role_of
from ncclcheck.explain.excerpt import excerpt
from ncclcheck.explain.fallback import ErrorCues, add_fallback
from ncclcheck.explain.findings import Finding, Findings, Hit
from ncclcheck.explain.hangs import COLLECT_NEXT, Note, add_hang, ended_without_reason, read_dumps
from ncclcheck.explain.infer import add_inferred
from ncclcheck.explain.lines import LineInfo, parse_line, stamp_in
from ncclcheck.explain.matcher import Matcher
from ncclcheck.explain.model_reading import (Hypothesis, add_model_reading, hypotheses,
                                               unexplained_failure)
from ncclcheck.explain.reader import InputError, Source, sniff, sources
from ncclcheck.explain.prefilter import ENGINE_VARIABLE, LiteralIndex
from ncclcheck.explain.printers import printed_by_launcher
from ncclcheck.explain.prepared import prepared
from ncclcheck.explain.reflow import unwrap
from ncclcheck.explain.scan import Candidate, Scanner
from ncclcheck.explain.signals import add_signal_cause
from ncclcheck.explain.summary import NcclSummary
from ncclcheck.explain.textmodel import LogText, TextModel, load_model
from ncclcheck.redact import redact_value_tree

# torchrun's failure report puts time, host and rank on the lines before "exitcode".
_BLOCK_FIELD = re.compile(r"^\s*(?P<key>time|host|rank)\s*:\s*(?P<value>\S+)")
_FULL_STAMP = re.compile(r"\s*\[?\d{4}-\d\d-\d\d")
_RANK_FILE = re.compile(r"rank[-_]?(\d+)", re.I)  # one file per rank: rank3.log, rank_3.out
_HOST_FACTS = ("node", "hostname")
TRACEBACK = "Traceback (most recent call last)"
_RANK_FACTS = ("task",)


@dataclass
class Explanation:
    """The result of explaining some logs."""

    findings: list[Finding]
    nccl: dict[str, Any] | None
    files: list[str] = field(default_factory=list)
    lines: int = 0
    text: LogText | None = None          # the lines the text model read
    hypotheses: list[Hypothesis] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)

    @property
    def root(self) -> Finding | None:
        """The root cause, when the evidence holds one (a launcher's report alone is none)."""
        return self.findings[0] if self.findings and self.findings[0].root_cause else None

    @property
    def failed(self) -> bool:
        """True when a finding other than a warning was made (what --exit-code reports)."""
        return any(f.tier < 2 for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        """The explanation as data, secrets masked (every renderer reads this)."""
        return redact_value_tree({
            "findings": [f.to_dict() for f in self.findings],
            "hypotheses": [h.to_dict() for h in self.hypotheses],
            "notes": [n.to_dict() for n in self.notes],
            "nccl": self.nccl,
            "files": self.files,
        })


def literal_index(engine: str | None = None, catalogue: Catalogue | None = None) -> LiteralIndex:
    """The prefilter over the catalogue's line signatures (the shipped catalogue's when None;
    built once per catalogue and engine, prepared.py)."""
    return prepared(catalogue).index(engine or os.environ.get(ENGINE_VARIABLE) or "")


SHIPPED = "shipped"  # explain's default model: the one in the package


def explain(paths: list[str], model: TextModel | None | str = SHIPPED,
            catalogue: Catalogue | None = None) -> Explanation:
    """Explain the logs and flight-recorder dumps at ``paths`` (files, directories, "-" or
    nothing for stdin); ``model`` None reads with the signatures alone; ``catalogue`` None
    reads with the shipped catalogue."""
    items = sources(paths)
    dumps = [s for s in items if sniff(s) == "dump"]
    return explain_sources([s for s in items if s not in dumps], model, dumps, catalogue)


def explain_sources(items: list[Source], model: TextModel | None | str = SHIPPED,
                    dumps: list[Source] | tuple[Source, ...] = (),
                    catalogue: Catalogue | None = None) -> Explanation:
    ready = prepared(catalogue)
    catalogue = ready.catalogue
    engine = os.environ.get(ENGINE_VARIABLE) or ""
    scanner = Scanner(ready.index(engine), gate=ready.gate(engine))
    matcher = ready.matcher()
    summary = NcclSummary()
    hits = Findings()
    context = LogContext()
    cues = ErrorCues()
    text = LogText()
    for source in items:
        stream = source.open()
        try:
            lines, physical = unwrap(stream)
            _scan_one(source.name, scanner, lines, matcher, summary, hits, physical, context,
                      cues, text)
        except (OSError, EOFError, zlib.error) as exc:  # truncated gzip, I/O error mid-read
            raise InputError(f"cannot read {source.name}: {exc}") from None
        finally:
            if source.path is not None:
                stream.close()
    add_inferred(hits, context, summary.settings, catalogue)
    add_signal_cause(hits, text, catalogue)
    job = read_dumps(list(dumps))
    hang_notes = add_hang(hits, job, catalogue)[1]
    notes = job.notes + hang_notes
    reader = load_model() if isinstance(model, str) else model
    reading = reader.read(text) if isinstance(reader, TextModel) else None
    add_model_reading(hits, reading)
    add_fallback(hits, cues, text.failed)
    findings = hits.ranked(summary.settings)
    if not (findings and findings[0].root_cause) and (items or dumps):
        unexplained = unexplained_failure(reading)
        notes += [n for n in (unexplained, ended_without_reason(findings)) if n is not None]
        notes.append(COLLECT_NEXT)
    return Explanation(findings, summary.to_dict(), [s.name for s in (*items, *dumps)],
                       text=text, hypotheses=hypotheses(findings, reading, reader), notes=notes)


def _scan_one(name: str, scanner: Scanner, stream: BinaryIO, matcher: Matcher,
              summary: NcclSummary, hits: Findings, physical: Callable[[int], int],
              context: LogContext, cues: ErrorCues, text: LogText) -> None:
    year: int | None = None
    above: str | None = None  # the message of the candidate line before, for continuations
    # A traceback's header, held until the next line says whose traceback it is: the
    # launcher's own (torchrun's ChildFailedError, which the guessers leave out) or the job's.
    held: tuple[int, str, str] | None = None
    unguessed: set[int] = set()  # lines left out of the guessers' reading (see below)
    named = _RANK_FILE.search(os.path.basename(name))
    file_rank = int(named.group(1)) if named else None
    for cand in scanner.lines(stream, year_known=lambda: year is not None):
        info = parse_line(cand.text, year)
        if year is None and _FULL_STAMP.match(cand.text):
            year = info.time.year if info.time else None
        if cand.info:
            summary.feed(info.message)
        if cand.info or cand.context or cand.gated:
            context.feed(name, physical(cand.number), cand.text, info.message, info.host)
        matched = None
        if cand.gated:
            matched = matcher.match(info.message)
            if matched is None and cand.continues and above is not None:
                matched = matcher.match_continued(above, info.message)
            above = info.message
        # What the guessers read: neither a launcher's report (how a process ended, not why)
        # nor a line a signature knows as a consequence (a peer's absence, a wait in vain).
        guessable = not printed_by_launcher(cand.text, info.message) and (
            matched is None or role_of(*matched) is Role.CAUSE)
        if not guessable:
            unguessed.add(physical(cand.number))
        if held is not None:
            if guessable:
                text.feed(name, *held)
            held = None
        if guessable and (cand.error or cand.gated or cand.info):
            cues.feed(name, physical(cand.number), cand.text, info.message)
        if guessable and info.message.startswith(TRACEBACK):
            held = (physical(cand.number), cand.text, info.message)
        elif guessable and (cand.error or cand.info or cand.context):  # never by the gate: the
            # model reads the same lines with any engine
            text.feed(name, physical(cand.number), cand.text, info.message)
        if matched is None:
            continue
        sig, facts = matched
        _add_context(sig, facts, info, cand)
        hits.add(Hit(sig, facts, name, physical(cand.number), excerpt(cand.text, sig),
                     _rank(info, facts, file_rank), _host(info, facts), info.time, hits.hits))
    if held is not None:
        text.feed(name, *held)
    held = None
    for number, line in scanner.edges():  # how the file began and ended, for the text model
        message = parse_line(line).message
        guessable = (not printed_by_launcher(line, message)
                     and physical(number) not in unguessed)
        if held is not None and guessable:
            text.feed(name, *held)
        held = None
        if guessable and message.startswith(TRACEBACK):
            held = (physical(number), line, message)
        elif guessable:
            text.feed(name, physical(number), line, message)
    if held is not None:
        text.feed(name, *held)


def _add_context(sig: Signature, facts: dict[str, Any], info: LineInfo, cand: Candidate) -> None:
    """Facts printed on lines before the match (torchrun's failure block)."""
    if "exitcode" not in cand.text:
        return
    for line in reversed(cand.before(6)):
        field_match = _BLOCK_FIELD.match(line)
        if field_match is None:
            if line.strip().startswith("[") or "Root Cause" in line or "Failures:" in line:
                break
            continue
        key, value = field_match.group("key"), field_match.group("value")
        if key == "rank" and value.isdigit():
            facts.setdefault("rank", int(value))
        elif key == "host":
            facts.setdefault("hostname", value)
        elif key == "time" and info.time is None:
            info.time = stamp_in(line)


def _rank(info: LineInfo, facts: dict[str, Any], file_rank: int | None) -> int | None:
    if info.rank is not None:
        return info.rank
    for key in ("rank",) + _RANK_FACTS:
        value = facts.get(key)
        if isinstance(value, int):
            return value
    return file_rank


def _host(info: LineInfo, facts: dict[str, Any]) -> str | None:
    if info.host:
        return info.host
    for key in _HOST_FACTS:
        value = facts.get(key)
        if isinstance(value, str):
            return value
    return None
