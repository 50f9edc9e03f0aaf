"""The body of `ncclcheck explain` (the click command in ncclcheck/cli.py stays a few lines)."""

from __future__ import annotations

import sys


def run_explain(paths: list[str], fmt: str, exit_code: bool, list_catalogue: bool,
                usage_error: type[Exception]) -> int:
    """Print the explanation (or the catalogue); return the exit code."""
    if list_catalogue:
        from ncclcheck.explain.docs import catalogue_table
        print(catalogue_table())
        return 0
    from ncclcheck.explain.engine import explain
    from ncclcheck.explain.reader import InputError
    from ncclcheck.explain.render import render

    if not paths and sys.stdin.isatty():
        raise usage_error("no log given: pass PATH ... or pipe a log into `ncclcheck explain -`")
    try:
        result = explain(paths)
    except InputError as exc:
        raise usage_error(str(exc)) from None
    print(render(result, fmt))
    return 1 if exit_code and result.failed else 0
