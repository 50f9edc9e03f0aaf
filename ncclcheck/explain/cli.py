"""The body of `ncclcheck explain` (the click command in ncclcheck/cli.py stays a few lines)."""

from __future__ import annotations

import sys

from ncclcheck.explain.docs import catalogue_table
from ncclcheck.explain.engine import explain_sources
from ncclcheck.explain.reader import InputError, input_notes, screen, sources
from ncclcheck.report import render
from ncclcheck.report.formats import EXPLANATION


def run_explain(paths: list[str], fmt: str, exit_code: bool, list_catalogue: bool,
                usage_error: type[Exception]) -> int:
    """Print the explanation (or the catalogue); return the exit code."""
    if list_catalogue:
        print(catalogue_table())
        return 0
    if not paths and sys.stdin.isatty():
        raise usage_error("no log given: pass PATH ... or pipe a log into `ncclcheck explain -`")
    try:
        screened = screen(sources(paths))
        if screened.binary and not (screened.readable or screened.dumps or screened.snapshots):
            shown = ", ".join(screened.binary[:3]) + (", ..." if len(screened.binary) > 3 else "")
            raise InputError(f"{shown}: binary, not a log (give the job's text output)")
        result = explain_sources(screened.readable, dumps=screened.dumps,
                                 snapshots=screened.snapshots)
    except InputError as exc:
        raise usage_error(str(exc)) from None
    for note in input_notes(paths, screened):
        print(f"ncclcheck explain: {note}", file=sys.stderr)
    print(render(EXPLANATION, result.to_dict(), fmt))
    return 1 if exit_code and result.failed else 0
