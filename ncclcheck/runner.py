"""From a context and a list of families to a rendered report and an exit code."""

from __future__ import annotations

import platform
import sys
from importlib import metadata
from typing import Any

from ncclcheck.context import ProbeContext
from ncclcheck.model import CheckResult, Report, exit_code
from ncclcheck.probes import run_families
from ncclcheck.report import render, render_junit


def package_version(name: str) -> str | None:
    """An installed distribution's version without importing it (torch costs seconds)."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def report_context(ctx: ProbeContext, results: list[CheckResult]) -> dict[str, Any]:
    launcher = next((r.details.get("launcher") for r in results if r.id == "ranks.launcher"), None)
    if launcher is None:
        from ncclcheck.launchers import detect_launcher
        launcher = detect_launcher(ctx.env)[0].name
    return {
        "host": ctx.host,
        "launcher": launcher,
        "python": platform.python_version(),
        "torch": package_version("torch"),
        "timeout_s": ctx.timeout,
    }


def run_checks(families: list[str], ctx: ProbeContext) -> Report:
    """Run the named probe families and wrap the results in a Report."""
    results = run_families(families, ctx)
    bench = ctx.options.get("bench_data")
    return Report(results, report_context(ctx, results), bench)


def emit(report: Report, fmt: str, junit: str | None, strict: bool) -> int:
    """Print the report, write the JUnit file if asked, and return the exit code."""
    if junit:
        with open(junit, "w", encoding="utf-8") as handle:
            handle.write(render_junit(report))
    sys.stdout.write(render(report, fmt) + "\n")
    sys.stdout.flush()
    return exit_code(report.checks, strict)
