"""What NCCL said about itself (its INFO lines): version, interfaces, transports, plugins and
communicators, for the report's "What NCCL said" and for the rules that read settings."""

from __future__ import annotations

from ncclcheck.explain.readers import INFO, Reader
from ncclcheck.explain.run import Line, Run


def read_line(run: Run, line: Line) -> None:
    if line.candidate.info:
        run.summary.feed(line.info.message)


READER = Reader("nccl_summary", 10, line=read_line,
                kinds=INFO)
