"""The one road from probe to report: the library entry point that both the CLI and the
Lightning preflight call, the single Report / JUnit / exit-code functions, typed options."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

import ncclcheck
from ncclcheck import runner
from ncclcheck.bench.options import BenchOptions
from ncclcheck.cli import cli
from ncclcheck.cluster.aggregate import aggregate
from ncclcheck.cluster.clock import CLIENT_GRACE_S, JobClock
from ncclcheck.context import NcclOptions, NetOptions, ProbeContext, ProbeOptions, RanksOptions
from ncclcheck.model import BenchSection, FamilyOutput, Report, Status, failed, passed, warned
from ncclcheck.report.junit import render_junit
from ncclcheck.probes import Family, probe_families, run_family_output

# One of two ranks, but with no rendezvous address: cluster mode is chosen, cannot meet rank 0,
# and says so in a cluster.store check (no network, no waiting).
RANK0_OF_2 = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}
RANKS = runner.Request(("ranks",), timeout=30)


def test_check_runs_the_whole_job_under_a_launcher_and_this_process_when_local():
    job = runner.check(RANKS, env=RANK0_OF_2)
    ids = [c.id for c in job.report.checks]
    assert "cluster.store" in ids and job.report.checks[-1].status is Status.WARN
    alone = runner.check(RANKS, env=RANK0_OF_2, local=True)
    assert "cluster.store" not in [c.id for c in alone.report.checks]
    standalone = runner.check(RANKS, env={})
    assert "cluster.store" not in [c.id for c in standalone.report.checks]
    assert standalone.code == standalone.report.exit_code() == 0


def test_preflight_goes_through_the_same_mode_choice():
    from ncclcheck.lightning import preflight
    per_rank = preflight(env=RANK0_OF_2, families=["ranks"], raise_on_failure=False)
    assert "cluster.store" not in [c.id for c in per_rank.checks]
    whole = preflight(env=RANK0_OF_2, families=["ranks"], raise_on_failure=False, whole_job=True)
    assert "cluster.store" in [c.id for c in whole.checks]


def test_check_is_public_and_prints_only_when_asked(capsys):
    assert ncclcheck.check is runner.check and ncclcheck.Request is runner.Request
    runner.check(RANKS, env={})
    assert capsys.readouterr().out == ""
    runner.check(RANKS, env={}, output=runner.Output("json"))
    assert '"tool": "ncclcheck"' in capsys.readouterr().out


def test_strict_makes_a_warning_exit_1_through_the_one_exit_code():
    warning = [warned("x.y", "hmm", "do it", "configuration")]
    report = runner.build_report(ProbeContext(env={}), warning)
    assert report.exit_code() == 0 and report.exit_code(strict=True) == 1
    assert runner.publish(report, runner.Output(strict=True)) == 1
    outcome = runner.check(RANKS, env={}, extra_checks=warning, output=runner.Output(strict=True))
    assert outcome.code == 1 and outcome.report.checks[-1].host  # extra checks get this host


def _testcases(xml: str) -> list[tuple[str, str]]:
    root = ET.fromstring(xml)
    return [(c.get("classname"), c.get("name")) for c in root.iter("testcase")]


def test_cluster_report_junit_has_the_standalone_renderers_shape(tmp_path):
    """A job report holds every rank's checks (JSON) and one aggregated row per id (table,
    JUnit): the JUnit is exactly what the standalone renderer makes of those rows."""
    ctx = ProbeContext(env={})
    checks = [passed("ranks.rank", "ok"), failed("ranks.rank", "bad", "fix it", "rank_mismatch")]
    for rank, c in enumerate(checks):
        c.host, c.rank = "node1", rank
    rows = aggregate(checks, {"ranks": "rank"})
    job = runner.build_report(ctx, checks, rows=rows, cluster={"rows": [r.to_dict() for r in rows]})
    path = tmp_path / "job.xml"
    assert runner.publish(job, runner.Output(junit=str(path))) == 1
    assert path.read_text() == render_junit(Report(rows, job.context))
    assert _testcases(path.read_text()) == [("ncclcheck.ranks", "ranks.rank")]
    assert len(job.to_dict()["checks"]) == 2  # JSON keeps every rank's check
    assert job.to_dict()["context"]["cluster"]["rows"][0]["id"] == "ranks.rank"


def test_default_options_are_typed_and_the_run_sweep_is_quick():
    options = ProbeContext(env={}).options
    assert isinstance(options.ranks, RanksOptions) and not options.ranks.wants_lightning
    assert isinstance(options.net, NetOptions) and options.net.mesh_full_max is None
    assert isinstance(options.nccl, NcclOptions) and options.nccl.nccl_lib is None
    assert options.bench == BenchOptions.for_run()
    assert RanksOptions(cluster_env="m:C").wants_lightning


@pytest.mark.parametrize("args, expected", [
    (["net", "--mesh-full-max", "8", "--mesh-connect-timeout", "2"],
     ProbeOptions(net=NetOptions(mesh_full_max=8, mesh_connect_timeout=2.0))),
    (["ranks"], ProbeOptions(ranks=RanksOptions(lightning=False, cluster_env=None))),
    (["bench", "--backend", "gloo", "--iters", "3"],
     ProbeOptions(bench=BenchOptions(backend="gloo", iters=3))),
])
def test_cli_builds_the_typed_options(monkeypatch, args, expected):
    seen = []
    monkeypatch.setattr(runner, "check", lambda request, **kw: seen.append((request, kw))
                        or runner.Outcome(0))
    result = CliRunner().invoke(cli, args + ["--timeout", "7", "--store-port", "4242"])
    assert result.exit_code == 0, result.output
    request, kw = seen[0]
    assert request.options == expected and request.timeout == 7.0
    assert kw["store_port"] == 4242 and kw["output"] == runner.Output("table", None, False)


def test_nccl_command_passes_the_library_path(monkeypatch, tmp_path):
    lib = tmp_path / "libnccl.so.2"
    lib.write_bytes(b"")
    seen = []
    monkeypatch.setattr(runner, "check", lambda request, **kw: seen.append(request)
                        or runner.Outcome(0))
    CliRunner().invoke(cli, ["nccl", "--nccl-lib", str(lib)])
    assert seen[0].options.nccl == NcclOptions(nccl_lib=str(lib))


def _section() -> BenchSection:
    return BenchSection("gloo", 2, "float32", 1, 0, [], 0.0, 0.0, None, [], None, None, None)


def list_family(ctx):
    return [passed("x.a", "a")]


def section_family(ctx):
    return FamilyOutput([passed("y.b", "b")], _section())


def test_families_return_lists_or_outputs_and_the_sections_reach_the_report(monkeypatch):
    import ncclcheck.probes as probes
    ctx = ProbeContext(env={}, timeout=10)
    assert run_family_output(Family("x", "test_runner:list_family", "x"), ctx).checks[0].host
    fams = (Family("x", "test_runner:list_family", "x"), Family("y", "test_runner:section_family", "y"))
    monkeypatch.setattr(probes, "FAMILIES", fams)
    both = probe_families(["x", "y"], ctx)
    assert [c.id for c in both.checks] == ["x.a", "y.b"] and both.bench == _section()
    report = runner.run_checks(["x", "y"], ctx)
    assert report.to_dict()["bench"]["backend"] == "gloo" and "plot" not in report.to_dict()["bench"]


def test_the_job_clock_splits_the_timeout_once():
    clock = JobClock(started=time.monotonic(), timeout=60.0)
    assert clock.reserve_s == 5.0 and clock.margin_s == 2.0 and clock.probe_budget_s == 55.0
    assert clock.gather_end == pytest.approx(clock.end - 2.0)
    assert clock.connect_s(True) == pytest.approx(clock.connect_s(False) - 2.0, abs=0.05)
    assert clock.verdict_wait_s(None) == pytest.approx(60 + CLIENT_GRACE_S, abs=0.5)
    late = time.time() + 200  # rank 0 started much later: still never past timeout + grace
    assert clock.verdict_wait_s(late) == pytest.approx(60 + CLIENT_GRACE_S, abs=0.5)
    assert CLIENT_GRACE_S < 5  # the stated bound: every process is over by --timeout + 5 s
    assert clock.started < clock.join_end < clock.started + clock.probe_budget_s
    short = JobClock(started=time.monotonic(), timeout=2.0)
    assert short.reserve_s == 0.5 and short.margin_s == 0.25
