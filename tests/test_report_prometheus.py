"""--prom-file: the report as Prometheus text, parsed back with prometheus-client's own parser."""

from __future__ import annotations

import os
import stat

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ncclcheck.model import (BenchSection, Category, CheckResult, Report, Status, failed, passed,
                             warned)
from ncclcheck.report.prometheus import render_prometheus, write_prom_file


def _report() -> Report:
    bad_ifname = failed("net.nccl_interface", 'NCCL_SOCKET_IFNAME=eth9 names "nothing"',
                        "Set NCCL_SOCKET_IFNAME=eth0.", Category.INTERFACE)
    bad_ifname.host, bad_ifname.rank = "node2", 5
    return Report(
        checks=[passed("ranks.world_size", "8 ranks"), bad_ifname,
                warned("nccl.settings", "NCCL_P2P_DISABLE=1", "Unset it.", Category.P2P),
                CheckResult("bench.run", Status.SKIP, "no bench")],
        context={"host": "node1"},
        bench=BenchSection(
            backend="gloo", world_size=2, dtype="float32", iters=10, warmup=3,
            rows=[{"bytes": 1048576, "busbw_gbps": 1.25}, {"bytes": 2097152, "busbw_gbps": 1.75}],
            avg_busbw_gbps=1.5, peak_busbw_gbps=1.75, peak_bytes=2097152, hosts=["node1"],
            gpu=None, nccl_version=None, reference=None))


def _samples(text: str) -> dict[str, list]:
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def _one(samples: list, **labels: str) -> float:
    found = [s.value for s in samples if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (labels, samples)
    return found[0]


def test_every_check_has_a_one_hot_status_with_its_labels():
    samples = _samples(render_prometheus(_report(), timestamp=1700000000.0))
    status = samples["ncclcheck_check_status"]
    assert len(status) == 4 * len(Status)
    assert _one(status, check="net.nccl_interface", status="fail") == 1
    assert _one(status, check="net.nccl_interface", status="pass") == 0
    failing = [s for s in status if s.labels["check"] == "net.nccl_interface" and s.value == 1]
    assert failing[0].labels == {"check": "net.nccl_interface", "family": "net",
                                 "category": "interface", "host": "node2", "rank": "5",
                                 "status": "fail"}
    # a check without its own host takes the report's; an unset rank is an absent label
    assert _one(status, check="ranks.world_size", status="pass", host="node1") == 1
    assert _one(status, check="ranks.world_size", status="pass").__class__ is float
    assert [s.labels["rank"] for s in status if s.labels["check"] == "ranks.world_size"][0] == ""
    assert _one(samples["ncclcheck_check_ok"], check="nccl.settings") == 0
    assert _one(samples["ncclcheck_check_ok"], check="bench.run") == 1
    assert _one(samples["ncclcheck_check_severity"], check="nccl.settings") == 1
    assert _one(samples["ncclcheck_check_severity"], check="net.nccl_interface") == 2
    assert _one(samples["ncclcheck_report_status"], status="fail") == 1
    assert _one(samples["ncclcheck_report_status"], status="pass") == 0


def test_bench_busbw_per_size_and_the_timestamp():
    samples = _samples(render_prometheus(_report(), timestamp=1700000000.0))
    busbw = samples["ncclcheck_bench_busbw_gbps"]
    assert _one(busbw, bytes="1048576", backend="gloo") == 1.25
    assert _one(busbw, bytes="2097152", backend="gloo") == 1.75
    assert _one(samples["ncclcheck_bench_avg_busbw_gbps"], backend="gloo") == 1.5
    assert samples["ncclcheck_last_run_timestamp_seconds"][0].value == 1700000000.0


def test_no_bench_means_no_bench_metrics():
    report = _report()
    report.bench = None
    assert "ncclcheck_bench_busbw_gbps" not in _samples(render_prometheus(report))


def test_a_repeated_check_keeps_its_worst_status():
    report = Report(checks=[passed("net.mesh", "ok"),
                            failed("net.mesh", "no route", "Fix routes.", Category.CONNECTION)],
                    context={"host": "n1"})
    status = _samples(render_prometheus(report))["ncclcheck_check_status"]
    assert _one(status, check="net.mesh", status="fail") == 1
    assert _one(status, check="net.mesh", status="pass") == 0


def test_the_file_is_replaced_atomically_and_readable_by_the_exporter(tmp_path):
    path = tmp_path / "ncclcheck.prom"
    path.write_text("old\n")
    assert write_prom_file(_report(), path, timestamp=1.0) == path
    assert os.listdir(tmp_path) == ["ncclcheck.prom"]
    assert "ncclcheck_check_status" in _samples(path.read_text())
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_a_failed_write_leaves_no_temporary_file_and_the_old_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "ncclcheck.prom"
    path.write_text("old\n")

    def refuse(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError):
        write_prom_file(_report(), path)
    assert os.listdir(tmp_path) == ["ncclcheck.prom"]
    assert path.read_text() == "old\n"
