"""explain(): read the logs and dumps, hand every line to every reader, let the arbiter order
what they found.

The engine knows no reader: it parses each candidate line (who printed it, when) and hands it
on; the readers (ncclcheck/explain/readers/) say what they see; the findings come out as the
arbiter orders them (arbiter.py)."""

from __future__ import annotations

import os
import re
import zlib
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable

from ncclcheck.catalogue import Catalogue
from ncclcheck.explain.findings import Finding
from ncclcheck.explain.notes import COLLECT_NEXT, Note, ended_without_reason
from ncclcheck.explain.lines import parse_line
from ncclcheck.explain.model_reading import Hypothesis, hypotheses, unexplained_failure
from ncclcheck.explain.prefilter import ENGINE_VARIABLE, LiteralIndex
from ncclcheck.explain.prepared import prepared
from ncclcheck.explain.reader import UNREAD_NOTE, InputError, Source, Unread, sniff, sources
from ncclcheck.explain.readers import LineHook, Reader, readers
from ncclcheck.explain.reflow import unwrap
from ncclcheck.explain.run import Line, Run
from ncclcheck.explain.scan import Scanner
from ncclcheck.explain.textmodel import LogText, TextModel, load_model
from ncclcheck.redact import redact_value_tree
from ncclcheck.verdicts import verdict_of

_FULL_STAMP = re.compile(r"\s*\[?\d{4}-\d\d-\d\d")
_RANK_FILE = re.compile(r"rank[-_]?(\d+)", re.I)  # one file per rank: rank3.log, rank_3.out


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
    unread: list[Unread] = field(default_factory=list)  # inputs that could not be read

    @property
    def root(self) -> Finding | None:
        """The root cause, when the evidence holds one (a launcher's report alone is none)."""
        return self.findings[0] if self.findings and self.findings[0].root_cause else None

    @property
    def failed(self) -> bool:
        """True when a finding other than a warning was made (what --exit-code reports)."""
        return any(f.tier < 2 for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        """The explanation as data, secrets masked (every renderer reads this); ``verdict``
        only beside a root cause."""
        findings = [f.to_dict() for f in self.findings]
        verdict = {"verdict": verdict_of(findings[0]).to_dict()} if self.root else {}
        return redact_value_tree({
            "findings": findings,
            "hypotheses": [h.to_dict() for h in self.hypotheses],
            "notes": [Note(UNREAD_NOTE, u.text).to_dict() for u in self.unread]
            + [n.to_dict() for n in self.notes],
            "nccl": self.nccl,
            "files": self.files,
            **verdict,
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
    kinds = {s: sniff(s) for s in items}
    dumps = [s for s in items if kinds[s] == "dump"]
    snapshots = [s for s in items if kinds[s] == "snapshot"]
    return explain_sources([s for s in items if kinds[s] not in ("dump", "snapshot")], model,
                           dumps, catalogue, snapshots)


def explain_sources(items: list[Source], model: TextModel | None | str = SHIPPED,
                    dumps: list[Source] | tuple[Source, ...] = (),
                    catalogue: Catalogue | None = None,
                    snapshots: list[Source] | tuple[Source, ...] = ()) -> Explanation:
    ready = prepared(catalogue)
    engine = os.environ.get(ENGINE_VARIABLE) or ""
    scanner = Scanner(ready.index(engine), gate=ready.gate(engine))
    run = Run(ready.catalogue, ready.matcher(), load_model() if isinstance(model, str) else model,
              list(dumps), snapshots=list(snapshots))
    everyone = readers()
    unread: list[Unread] = []  # a file that cannot be read is noted, and the rest is read
    for source in items:
        try:
            stream = source.open()
        except InputError as exc:  # vanished or changed since it was listed
            unread.append(Unread(source.name, exc.why))
            continue
        try:
            lines, physical = unwrap(stream)
            _read_file(run, everyone, source.name, scanner, lines, physical)
        except (OSError, EOFError, zlib.error) as exc:  # truncated gzip, I/O error mid-read
            unread.append(Unread(source.name, f"cannot read: {exc}"))
        finally:
            if source.path is not None:
                stream.close()
    for reader in everyone:
        if reader.run is not None:
            reader.run(run)
    findings = run.findings.ranked(run.summary.settings)
    notes = run.notes
    if run.findings.recovered and not (findings and findings[0].root_cause):
        run.reading = None  # the run went on from what failed: no guess at why it failed
    elif not (findings and findings[0].root_cause) and (items or dumps):
        notes += [n for n in (unexplained_failure(run.reading), ended_without_reason(findings))
                  if n is not None]
        notes.append(COLLECT_NEXT)
    failed = {u.name for u in unread}
    return Explanation(findings, run.summary.to_dict(),
                       [s.name for s in (*items, *dumps, *snapshots) if s.name not in failed],
                       text=run.text, hypotheses=hypotheses(findings, run.reading, run.model),
                       notes=notes, unread=unread)


def _read_file(run: Run, everyone: tuple[Reader, ...], name: str, scanner: Scanner,
               stream: BinaryIO, physical: Callable[[int], int]) -> None:
    """Hand every candidate line of one file to every reader with a line hook, in order."""
    year: int | None = None  # glog stamps carry none: the file's, from a full stamp
    named = _RANK_FILE.search(os.path.basename(name))
    file_rank = int(named.group(1)) if named else None
    hooks: dict[int, list[LineHook]] = {}  # a line's kinds -> the hooks of their readers
    for cand in scanner.lines(stream, year_known=lambda: year is not None):
        info = parse_line(cand.text, year)
        if year is None and _FULL_STAMP.match(cand.text):
            year = info.time.year if info.time else None
        line = Line(name, physical(cand.number), cand.text, info, cand, file_rank)
        wanted = hooks.get(cand.kinds)
        if wanted is None:
            wanted = hooks[cand.kinds] = [r.line for r in everyone
                                          if r.line is not None and r.kinds & cand.kinds]
        for hook in wanted:
            hook(run, line)
    edges = [(physical(number), text) for number, text in scanner.edges()]
    for reader in everyone:
        if reader.file_end is not None:
            reader.file_end(run, name, edges)
