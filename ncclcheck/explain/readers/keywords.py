"""The keyword cues (fallback.py): the taxonomy's words on the run's guessable error lines,
scored per category; a category clearly ahead is a guess at the cause."""

from __future__ import annotations

from ncclcheck.explain.fallback import add_fallback
from ncclcheck.explain.normalize import without_progress
from ncclcheck.explain.readers import ERROR, GATE, INFO, Reader
from ncclcheck.explain.run import Line, Run


def read_line(run: Run, line: Line) -> None:
    cand = line.candidate
    if line.guessable and (cand.error or cand.gated or cand.info):
        text = without_progress(line.text)
        if text:  # a progress bar says nothing
            run.cues.feed(line.file, line.number, text, without_progress(line.info.message),
                          line.info.severity)


def read_run(run: Run) -> None:
    add_fallback(run.findings, run.cues, run.text.failed)


READER = Reader("keywords", 60, line=read_line, run=read_run,
                kinds=GATE | INFO | ERROR)
