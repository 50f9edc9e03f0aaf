"""The report as Prometheus metrics, for node_exporter's textfile collector (``--prom-file``).

Site health checks feed a metrics system so a bad node shows up on a dashboard and in alerts,
not only in one job's log. node_exporter reads every ``*.prom`` file in its
``--collector.textfile.directory``; the file is replaced atomically so it never reads half of
one. The exposition text comes from prometheus-client, so escaping and format are its job.

Metrics (labels: check, family, category, host, rank; an empty label is an absent one; in a
job report a check's passing ranks are grouped, so they are one series with empty host and
rank, while every other result keeps its own):
- ``ncclcheck_check_status{..., status}``: 1 for the check's status, 0 for the other four,
  so ``ncclcheck_check_status{status="fail"} == 1`` is an alert rule;
- ``ncclcheck_check_ok``: 1 pass/skip, 0 warn/fail/error;
- ``ncclcheck_check_severity``: 0 pass/skip, 1 warn, 2 error/fail;
- ``ncclcheck_report_status{status}``: the whole report's status, one-hot;
- ``ncclcheck_bench_busbw_gbps{backend, bytes}`` per size and ``ncclcheck_bench_avg_busbw_gbps``;
- ``ncclcheck_last_run_timestamp_seconds``: when the report was made.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ncclcheck.model import CheckResult, Report, Status

PREFIX = "ncclcheck"
_CHECK_LABELS = ("check", "family", "category", "host", "rank")
_REPORT_STATUSES = ("pass", "warn", "fail")


@dataclass(frozen=True)
class _CheckSeries:
    labels: tuple[str, ...]
    status: Status


def _check_series(report: Report) -> list[_CheckSeries]:
    """One series per (check, host, rank); a repeated one keeps its worst result, because
    Prometheus rejects a file that repeats a label set."""
    default_host = str(report.context.get("host") or "")
    worst: dict[tuple[str, str, str], CheckResult] = {}
    for check in report.checks:
        host = "" if check.ranks is not None else check.host or default_host
        key = (check.id, host, "" if check.rank is None else str(check.rank))
        kept = worst.get(key)
        if kept is None or check.status.severity > kept.status.severity:
            worst[key] = check
    return [_CheckSeries((check_id, check.family,
                          check.category.value if check.category else "", host, rank),
                         check.status)
            for (check_id, host, rank), check in worst.items()]


class ReportCollector:
    """A prometheus-client collector over one report (read at collect time, never mutated)."""

    def __init__(self, report: Report, timestamp: float) -> None:
        self.report = report
        self.timestamp = timestamp

    def collect(self) -> Iterator:
        from prometheus_client.core import GaugeMetricFamily  # deferred: see render_prometheus

        series = _check_series(self.report)
        status = GaugeMetricFamily(f"{PREFIX}_check_status",
                                   "1 for the status the check reported, 0 for the others.",
                                   labels=_CHECK_LABELS + ("status",))
        ok = GaugeMetricFamily(f"{PREFIX}_check_ok", "1 when the check passed or was skipped.",
                               labels=_CHECK_LABELS)
        severity = GaugeMetricFamily(f"{PREFIX}_check_severity",
                                     "0 pass/skip, 1 warn, 2 error/fail.", labels=_CHECK_LABELS)
        for one in series:
            for candidate in Status:
                status.add_metric(one.labels + (candidate.value,), float(candidate == one.status))
            ok.add_metric(one.labels, float(one.status.severity == 0))
            severity.add_metric(one.labels, float(one.status.severity))
        yield from (status, ok, severity)

        overall = GaugeMetricFamily(f"{PREFIX}_report_status",
                                    "1 for the report's overall status, 0 for the others.",
                                    labels=("status",))
        for candidate in _REPORT_STATUSES:
            overall.add_metric((candidate,), float(candidate == self.report.status))
        yield overall
        yield from self._bench()
        yield GaugeMetricFamily(f"{PREFIX}_last_run_timestamp_seconds",
                                "Unix time the report was made.", value=self.timestamp)

    def _bench(self) -> Iterator:
        from prometheus_client.core import GaugeMetricFamily  # deferred: see render_prometheus

        bench = self.report.bench
        if not bench:
            return
        backend = bench.backend
        busbw = GaugeMetricFamily(f"{PREFIX}_bench_busbw_gbps",
                                  "All-reduce bus bandwidth per message size, GB/s (1e9 B/s).",
                                  labels=("backend", "bytes"))
        for row in bench.rows:
            if row.get("busbw_gbps") is not None:
                busbw.add_metric((backend, str(int(row["bytes"]))), float(row["busbw_gbps"]))
        yield busbw
        yield _single(f"{PREFIX}_bench_avg_busbw_gbps",
                      "Average all-reduce bus bandwidth over the sizes, GB/s.",
                      ("backend",), (backend,), float(bench.avg_busbw_gbps))


def _single(name: str, doc: str, label_names: tuple[str, ...], label_values: tuple[str, ...],
            value: float):
    from prometheus_client.core import GaugeMetricFamily  # deferred: see render_prometheus

    family = GaugeMetricFamily(name, doc, labels=label_names)
    family.add_metric(label_values, value)
    return family


def render_prometheus(report: Report, *, timestamp: float | None = None) -> str:
    """The report in the Prometheus text exposition format."""
    # deferred: prometheus_client takes tens of milliseconds to import; only --prom-file needs it
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ReportCollector(report, time.time() if timestamp is None else timestamp))
    return generate_latest(registry).decode("utf-8")


def write_prom_file(report: Report, path: str | os.PathLike[str], *,
                    timestamp: float | None = None) -> Path:
    """Write the metrics to ``path`` atomically: a hidden temporary file in the same folder
    (same filesystem, and not ``*.prom``, so the collector never reads it), then os.replace.
    The file is world-readable, since node_exporter usually runs as another user."""
    target = Path(path)
    text = render_prometheus(report, timestamp=timestamp)
    handle, temporary = tempfile.mkstemp(dir=target.parent or ".", prefix=f".{target.name}.",
                                         suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    return target
