"""The run's context (launch commands, settings, versions, banners; context.py) and the rules
that read a cause from it (infer.py): a setup fault whatever else the log holds, or the cause
behind the failure that stands first when that failure is generic."""

from __future__ import annotations

from ncclcheck.explain.infer import add_inferred
from ncclcheck.explain.readers import CONTEXT, GATE, INFO, Reader
from ncclcheck.explain.run import Line, Run


def read_line(run: Run, line: Line) -> None:
    cand = line.candidate
    if cand.info or cand.context or cand.gated:
        run.context.feed(line.file, line.number, line.text, line.info.message, line.info.host)


def read_run(run: Run) -> None:
    add_inferred(run.findings, run.context, run.summary.settings, run.catalogue)


READER = Reader("context_rules", 20, line=read_line, run=read_run,
                kinds=GATE | INFO | CONTEXT)
