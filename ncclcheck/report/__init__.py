"""Renderers: one report, four shapes (table, json, markdown, JUnit XML)."""

from __future__ import annotations

from ncclcheck.model import Report

from .json import render_json
from .junit import render_junit
from .markdown import render_markdown
from .table import render_table

FORMATS = ("table", "json", "markdown")

__all__ = ["FORMATS", "render", "render_json", "render_junit", "render_markdown", "render_table"]


def render(report: Report, fmt: str) -> str:
    """JSON holds every check; the table and markdown show the report's rows (``shown``)."""
    if fmt == "json":
        return render_json(report)
    if fmt == "markdown":
        return render_markdown(report.shown())
    return render_table(report.shown())
