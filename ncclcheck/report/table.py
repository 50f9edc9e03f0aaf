"""The default terminal table: one row per check, then the fixes for what did not pass."""

from __future__ import annotations

import textwrap

from tabulate import tabulate

from ncclcheck.model import Report

from .bench import bench_table
from .text import ICONS, context_line, counts_line, grouped_fixes, single_origin, where


def render_table(report: Report) -> str:
    """The report as people read it (``Report.shown``: cluster mode's grouped rows)."""
    data = report.shown().to_dict()
    one = single_origin(data)
    rows = [[ICONS[c["status"]], c["id"], "\n".join(textwrap.wrap(c["summary"], 96)) or "-"]
            + ([] if one else [where(c)]) for c in data["checks"]]
    headers = ["status", "check", "summary"] + ([] if one else ["where"])
    out = [f"ncclcheck {data['version']} — {context_line(data)}", ""]
    out.append(tabulate(rows, headers=headers, tablefmt="simple"))
    if data.get("bench"):
        out += ["", bench_table(data["bench"])]
    fixes = grouped_fixes(data)
    if fixes:
        out += ["", "How to fix:"]
        for checks, fix in fixes:
            labels = ", ".join(f"{c['id']}" for c in checks)
            out.append(f"  [{ICONS[checks[0]['status']]}] {labels} ({checks[0]['category']})")
            out += ["      " + line for line in textwrap.wrap(fix, 94)]
    out += ["", f"Result: {data['status'].upper()} ({counts_line(data)})"]
    return "\n".join(out)
