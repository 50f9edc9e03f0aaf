"""--prom-file and --on-fail through the real entry point: the file a probe command writes,
parsed back, and the paths and places where they are refused before any work."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ncclcheck.model import Category, Report, failed, passed
from ncclcheck.runner import Output, publish

STRIP = ("RANK", "WORLD_SIZE", "LOCAL_", "NODE_RANK", "GROUP_", "MASTER_", "SLURM", "OMPI_",
         "PMI_", "MPI_LOCAL", "PET_", "JSM_", "LSB_", "TORCHELASTIC", "ROLE_")


def cli(*args: str, env: dict[str, str] | None = None):
    base = {k: v for k, v in os.environ.items() if not k.startswith(STRIP)}
    base.update(env or {})
    return subprocess.run([sys.executable, "-m", "ncclcheck", *args], capture_output=True,
                          text=True, env=base, timeout=120)


def assert_refused_before_any_work(proc, words: str):
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and words in proc.stderr, proc.stderr


def test_prom_file_holds_the_report_as_metrics(tmp_path):
    path = tmp_path / "ncclcheck.prom"
    proc = cli("ranks", "--format", "json", "--prom-file", str(path))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    families = {f.name: f for f in text_string_to_metric_families(path.read_text())}
    status = {(s.labels["check"], s.labels["status"]): s.value
              for s in families["ncclcheck_check_status"].samples}
    for check in report["checks"]:
        assert status[(check["id"], check["status"])] == 1.0
    overall = {s.labels["status"]: s.value for s in families["ncclcheck_report_status"].samples}
    assert overall[report["status"]] == 1.0 and sum(overall.values()) == 1.0
    assert [p.name for p in tmp_path.iterdir()] == ["ncclcheck.prom"]  # no temporary left


@pytest.mark.parametrize("where", ["missing-folder/x.prom", "."])
def test_prom_file_that_cannot_be_written_is_refused_at_once(tmp_path, where):
    target = tmp_path / where
    assert_refused_before_any_work(cli("run", "--prom-file", str(target)), "--prom-file")


def test_on_fail_drain_outside_slurm_is_refused_at_once():
    assert_refused_before_any_work(cli("net", "--on-fail", "drain"), "Slurm")


def _failing_report(host: str) -> Report:
    bad = failed("net.nccl_interface", "NCCL_SOCKET_IFNAME=eth9 names nothing", "fix it",
                 Category.INTERFACE)
    good = passed("ranks.launcher", "fine")
    bad.host = good.host = host
    return Report([good, bad], {"host": host})


def test_drain_without_scontrol_says_so_and_keeps_the_exit_code(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no scontrol here
    report = _failing_report("node7")
    assert publish(report, Output(on_fail="drain")) == 1
    drain = report.context["drain"]
    assert drain["note"] == "scontrol is not installed: no node drained"
    assert [(a["node"], a["drained"]) for a in drain["actions"]] == [("node7", False)]
    assert "could not drain node7: scontrol is not installed" in capsys.readouterr().err


def test_drain_maps_this_host_to_its_slurm_node_name(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("SLURMD_NODENAME", "gpu07")
    report = _failing_report("gpu07.cluster.example")
    publish(report, Output(on_fail="drain"))
    assert [a["node"] for a in report.context["drain"]["actions"]] == ["gpu07"]


def test_no_drain_section_unless_asked():
    report = _failing_report("node7")
    publish(report, Output())
    assert "drain" not in report.context
