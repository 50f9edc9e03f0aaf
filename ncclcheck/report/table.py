"""The default terminal table: one row per check, then the fixes for what did not pass.

It fits the terminal (``width.output_width``: $COLUMNS or the tty): the summary and where
columns wrap to what the status and check columns leave. Not on a terminal it keeps its fixed
layout (summaries wrapped at 96, fixes at 94), the same byte for byte wherever it runs.
"""

from __future__ import annotations

import textwrap
from typing import Any

from tabulate import tabulate

from ncclcheck.model import Report

from .bench import bench_table
from .text import ICONS, context_line, counts_line, grouped_fixes, single_origin, where
from .width import output_width, wrap

SUMMARY_WIDTH, FIX_WIDTH = 96, 94  # the fixed layout's
GAP = 2  # tabulate's "simple" format: two spaces between columns
PAD = 2  # and a column as wide as its header and two more (tabulate's MIN_PADDING)


def render_table(report: Report, width: int | None = None) -> str:
    """The report as people read it (``Report.shown``: cluster mode's grouped rows), fitted to
    ``width`` (default: the terminal's, see ``output_width``)."""
    data = report.shown().to_dict()
    width = width if width is not None else output_width()
    one = single_origin(data)
    headers = ["status", "check", "summary"] + ([] if one else ["where"])
    summary_w, where_w = _columns(data["checks"], one, width)
    rows = [[ICONS[c["status"]], c["id"], _cell(c["summary"], summary_w) or "-"]
            + ([] if one else [_cell(where(c), where_w, hyphens=False)]) for c in data["checks"]]
    title = f"ncclcheck {data['version']} — {context_line(data)}"
    out = wrap(title, width, subsequent="  ") if width else [title]
    out.append("")
    out.append(tabulate(rows, headers=headers, tablefmt="simple"))
    if data.get("bench"):
        out += ["", bench_table(data["bench"], width)]
    fixes = grouped_fixes(data)
    if fixes:
        out += ["", "How to fix:"]
        for checks, fix in fixes:
            labels = ", ".join(f"{c['id']}" for c in checks)
            label = f"  [{ICONS[checks[0]['status']]}] {labels} ({checks[0]['category']})"
            out += wrap(label, width, subsequent="      ") if width else [label]
            out += ["      " + line for line in textwrap.wrap(fix, (width or 100) - 6)]
    out += ["", f"Result: {report.headline()} ({counts_line(data)})"]
    return "\n".join(out)


def _cell(text: str, width: int | None, hyphens: bool = True) -> str:
    """A cell's text wrapped to its column; None: not wrapped (the fixed layout's where).
    ``hyphens``: a line may break after one (host names read better whole)."""
    if width is None:
        return text
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=hyphens))


def _columns(checks: list[dict[str, Any]], one: bool, width: int | None
              ) -> tuple[int, int | None]:
    """(summary, where) column widths: the fixed layout's without a width; else what the
    status and check columns leave, the where column taking up to a third of it. tabulate
    makes a column at least its header plus ``PAD`` wide."""
    if width is None:
        return SUMMARY_WIDTH, None
    fixed = max([len("status") + PAD] + [len(ICONS[c["status"]]) for c in checks]) + GAP
    fixed += max([len("check") + PAD] + [len(c["id"]) for c in checks]) + GAP
    left = max(20, width - fixed)
    if one:
        return left, None
    longest = max([len("where") + PAD] + [len(where(c)) for c in checks])
    where_w = min(longest, max(len("where") + PAD, (left - GAP) // 3))
    return max(10, left - GAP - where_w), where_w
