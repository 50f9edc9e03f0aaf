"""The one table of output formats: for each ``--format`` choice, the function that draws each
kind of document in it.

Every command's ``--format`` choices, ``ncclcheck explain`` and ``ncclcheck checks`` read this
table, so adding a format is adding a column entry here and its renderers beside the others in
this package. Renderers are named as ``"module:function"`` and imported when first used: a
command that prints a log's explanation does not pay for the probe report's table library.
The files written beside the report (``--junit``, ``--prom-file``) are outputs of their own,
not formats of the standard output.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

REPORT = "report"  # a probe command's Report
EXPLANATION = "explanation"  # explain's result, as Explanation.to_dict() gives it
CHECK_LIST = "checks"  # `ncclcheck checks`: every CheckSpec
ONE_CHECK = "check"  # `ncclcheck checks ID`: one CheckSpec
HANG = "hang"  # `ncclcheck hang`: an explanation plus its snapshot's groups and processes
DOCUMENTS = (REPORT, EXPLANATION, CHECK_LIST, ONE_CHECK, HANG)


@dataclass(frozen=True)
class Format:
    """One ``--format`` choice: the renderer of each document, as "module:function"."""

    name: str
    renderers: dict[str, str]

    def renderer(self, document: str) -> Callable[[Any], str]:
        module, _, function = self.renderers[document].partition(":")
        return getattr(importlib.import_module(module), function)


FORMATS: tuple[Format, ...] = (
    Format("table", {
        REPORT: "ncclcheck.report.table:render_table",
        EXPLANATION: "ncclcheck.report.explanation:render_table",
        CHECK_LIST: "ncclcheck.report.checks:list_table",
        ONE_CHECK: "ncclcheck.report.checks:full_text",
        HANG: "ncclcheck.report.hang:render_table"}),
    Format("json", {  # exactly one JSON document on stdout
        REPORT: "ncclcheck.report.json:render_json",
        EXPLANATION: "ncclcheck.report.explanation:render_json",
        CHECK_LIST: "ncclcheck.report.checks:list_json",
        ONE_CHECK: "ncclcheck.report.checks:one_json",
        HANG: "ncclcheck.report.explanation:render_json"}),
    Format("markdown", {
        REPORT: "ncclcheck.report.markdown:render_markdown",
        EXPLANATION: "ncclcheck.report.explanation:render_markdown",
        CHECK_LIST: "ncclcheck.report.checks:markdown_table",
        ONE_CHECK: "ncclcheck.report.checks:full_markdown",
        HANG: "ncclcheck.report.hang:render_markdown"}),
)
FORMAT_NAMES: tuple[str, ...] = tuple(f.name for f in FORMATS)
DEFAULT_FORMAT = FORMAT_NAMES[0]


def format_named(name: str) -> Format:
    for fmt in FORMATS:
        if fmt.name == name:
            return fmt
    raise ValueError(f"unknown format {name!r} (known: {', '.join(FORMAT_NAMES)})")


def render(document: str, value: Any, fmt: str) -> str:
    """``value`` (a document of kind ``document``) drawn in the format named ``fmt``."""
    return format_named(fmt).renderer(document)(value)
