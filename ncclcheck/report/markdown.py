"""Markdown, for tickets and chat: a table of checks and a list of fixes."""

from __future__ import annotations

from ncclcheck.model import Report

from .bench import bench_table
from .text import ICONS, context_line, counts_line, grouped_fixes, where


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Report) -> str:
    """The report as people read it (``Report.shown``: cluster mode's grouped rows)."""
    data = report.shown().to_dict()
    out = [f"## ncclcheck: {report.headline()}", "", f"{context_line(data)}", "",
           "| status | check | summary | where |", "|---|---|---|---|"]
    for c in data["checks"]:
        out.append(f"| {ICONS[c['status']]} | `{c['id']}` | {_cell(c['summary'])} | {_cell(where(c))} |")
    if data.get("bench"):
        out += ["", "```", bench_table(data["bench"]), "```"]
    fixes = grouped_fixes(data)
    if fixes:
        out += ["", "### How to fix", ""]
        out += [f"- **{', '.join('`' + c['id'] + '`' for c in checks)}** ({checks[0]['category']}): "
                f"{_cell(fix)}" for checks, fix in fixes]
    out += ["", f"_{counts_line(data)}_"]
    return "\n".join(out)
