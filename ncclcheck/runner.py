"""The one road from families to a report: run them (here, or on every rank of the job),
build the Report, print it, write JUnit, and turn it into an exit code.

The CLI and the Lightning preflight both call ``check``; the choice between this process and
the whole job is made there and nowhere else.
"""

from __future__ import annotations

import os
import platform
import sys
import threading
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Iterable, Mapping

from ncclcheck.cluster.drain import DrainResult, describe, drain_for_report
from ncclcheck.cluster.job import cluster_layout, run_cluster
from ncclcheck.cluster.session import STORE_THREAD
from ncclcheck.context import ProbeContext, ProbeOptions
from ncclcheck.launchers import detect_launcher
from ncclcheck.model import BenchSection, CheckResult, Report, Status, could_not_run
from ncclcheck.needs import torch_missing
from ncclcheck.probes import probe_families
from ncclcheck.probes.ranks.launcher import LAUNCHER
from ncclcheck.report import render
from ncclcheck.report.formats import REPORT
from ncclcheck.report.junit import render_junit
from ncclcheck.report.prometheus import write_prom_file



@dataclass(frozen=True)
class Output:
    """Where and how the report goes: stdout in ``fmt``, JUnit to ``junit``, Prometheus text to
    ``prom_file``; ``strict`` makes a warning fail the exit code; ``on_fail="drain"`` drains
    the Slurm nodes the failing checks are about before the report goes out; ``per_rank``
    keeps every rank's result in a job report (else passing results are grouped per check)."""

    fmt: str | None = None  # None: the report is only returned, never printed
    junit: str | None = None
    strict: bool = False
    prom_file: str | None = None
    on_fail: str | None = None  # None or "drain"
    per_rank: bool = False


@dataclass
class Outcome:
    """What one process ends with: its exit code, the report it holds (None on the ranks that
    left the report to rank 0) and a line for stderr."""

    code: int
    report: Report | None = None
    note: str | None = None


@dataclass(frozen=True)
class Request:
    """What to check: the families, their options, the job shape and the deadline."""

    families: tuple[str, ...]
    options: ProbeOptions = field(default_factory=ProbeOptions)
    nodes: int | None = None
    gpus_per_node: int | None = None
    timeout: float = 60.0
    # time.monotonic() when the command started, which --timeout counts from (the CLI passes
    # the process's start, so interpreter start-up on a loaded host and option validation that
    # imports Lightning are inside the deadline); None: when ``check`` is called.
    started: float | None = None


def package_version(name: str) -> str | None:
    """An installed distribution's version without importing it (torch costs seconds)."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def report_context(ctx: ProbeContext, results: list[CheckResult]) -> dict[str, Any]:
    launcher = next((r.details.get("launcher") for r in results if r.id == LAUNCHER.id), None)
    if launcher is None:
        launcher = detect_launcher(ctx.env)[0].name
    return {
        "host": ctx.host,
        "launcher": launcher,
        "python": platform.python_version(),
        "torch": package_version("torch"),
        "timeout_s": ctx.timeout,
    }


def build_report(ctx: ProbeContext, checks: list[CheckResult], bench: BenchSection | None = None,
                 *, rows: list[CheckResult] | None = None,
                 cluster: dict[str, Any] | None = None) -> Report:
    """The one place a Report is made, whichever path produced the checks."""
    context = report_context(ctx, checks)
    if cluster is not None:
        context["cluster"] = cluster
    return Report(checks, context, bench, rows)


def write_junit(report: Report, path: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(render_junit(report))


def act_on_failure(report: Report, output: Output) -> None:
    """``--on-fail drain``: drain the nodes the failing checks name, record what was done in
    ``context.drain`` and say it on stderr. Nothing happens when nothing failed."""
    if output.on_fail != "drain":
        return
    failing = any(c.status is Status.FAIL for c in report.checks)
    result = drain_for_report(report, os.environ) if failing else DrainResult()
    report.context["drain"] = result.to_dict()
    sys.stderr.write(describe(result) + "\n")
    sys.stderr.flush()


def publish(report: Report, output: Output) -> int:
    """Act on failure, write the JUnit and Prometheus files and print the report, as asked,
    and return the exit code."""
    act_on_failure(report, output)
    if output.junit:
        write_junit(report, output.junit)
    if output.prom_file:
        write_prom_file(report, output.prom_file)
    if output.fmt is not None:
        sys.stdout.write(render(REPORT, report, output.fmt) + "\n")
        sys.stdout.flush()
    missing = could_not_run(report.checks)
    if missing:
        sys.stderr.write(f"ncclcheck: no check could run here: {missing}\n")
        sys.stderr.flush()
    return report.exit_code(output.strict)


def run_checks(families: Iterable[str], ctx: ProbeContext,
               extra_checks: Iterable[CheckResult] = ()) -> Report:
    """Run the named probe families in this process and wrap the results in a Report."""
    probed = probe_families(families, ctx)
    extra = list(extra_checks)
    for result in extra:
        result.host = result.host or ctx.host
    return build_report(ctx, probed.checks + extra, probed.bench)


def check(request: Request, *, env: Mapping[str, str] | None = None, output: Output = Output(),
          local: bool = False, store_port: int | None = None,
          extra_checks: Iterable[CheckResult] = ()) -> Outcome:
    """Run ``request`` on this process alone, or, when it is one of several ranks under a
    launcher (and not ``local``), on every rank with one job report from rank 0.

    The process that holds the report prints it and writes JUnit as ``output`` says (by
    default it only returns it). ``extra_checks`` are this process's own results to add.
    """
    ctx = ProbeContext(env=dict(os.environ if env is None else env), nodes=request.nodes,
                       gpus_per_node=request.gpus_per_node, timeout=request.timeout,
                       options=request.options)
    if request.started is not None:
        ctx.started = request.started
    layout = None if local else cluster_layout(ctx.env)
    if layout is None:
        report = run_checks(request.families, ctx, extra_checks)
        return Outcome(publish(report, output), report)
    missing = torch_missing()
    if missing:  # the ranks meet over torch's TCPStore: no job report can be gathered
        return Outcome(2, note=f"ncclcheck: error: the job-wide report is gathered over "
                       f"torch.distributed, and {missing}; or pass --local to check this "
                       "process alone")
    # one of several ranks: rank 0 reports for the whole job
    found = run_cluster(list(request.families), ctx, layout, store_port, list(extra_checks),
                        per_rank=output.per_rank)
    if found.verdict is not None:  # in rank 0's report: nothing to print here
        return Outcome(found.verdict.code, note=found.verdict.note)
    report = build_report(ctx, found.checks, found.bench, rows=found.rows, cluster=found.cluster)
    # Print before telling the others: once a rank exits 1, torchrun may SIGTERM this one.
    code = publish(report, output)
    found.conclude(code, report.status)
    return Outcome(code, report, note=found.note(code) if output.fmt is not None else None)


def finish(outcome: Outcome) -> int:
    """Say the stderr line, flush, and return the exit code.

    When a store client that never connected is still retrying inside torch, an interpreter
    shutdown under it aborts the process (exit 134 instead of 1), so then the exit is
    immediate, after flushing."""
    if outcome.note:
        sys.stderr.write(outcome.note + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    if any(t.name == STORE_THREAD and t.is_alive() for t in threading.enumerate()):
        os._exit(outcome.code)
    return outcome.code
