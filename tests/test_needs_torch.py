"""Where torch is not installed (`pip install ncclcheck` alone): every check that needs it
skips with the install line as its reason, a command none of whose checks could run is exit 2,
and a gather under a launcher is one line and exit 2, never a traceback.

torch is made absent here by ``sys.modules["torch"] = None`` (what the import system answers
for a package that is not installed); tests/test_light_install.py runs the same commands in a
real install without torch."""

from __future__ import annotations

import sys

import pytest

from ncclcheck import gpus
from ncclcheck.bench.options import BenchOptions
from ncclcheck.context import ProbeContext, ProbeOptions
from ncclcheck.model import INSTALL_DETAIL, Report, Status, could_not_run, passed, skipped
from ncclcheck.needs import TORCH_INSTALL, needs_torch, torch_missing
from ncclcheck.probes import bench
from ncclcheck.probes.nccl import gpu, torch_version
from ncclcheck.runner import Output, Request, check

LAUNCHED = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511", "TORCHELASTIC_RUN_ID": "t"}


@pytest.fixture
def no_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)


def test_torch_missing_names_the_install_line(no_torch):
    why = torch_missing()
    assert why is not None and TORCH_INSTALL in why and why.startswith("torch is not installed")


def test_torch_installed_is_not_missing():
    pytest.importorskip("torch")
    assert torch_missing() is None


def test_gpu_checks_skip_with_the_install_line(no_torch, monkeypatch):
    monkeypatch.setattr(gpu, "torch_build_without_cuda", lambda: None)
    results = gpu.gpu_checks({}, 0, 5.0, driver_version=lambda: 12040)
    assert {r.id for r in results} >= {"nccl.cuda_driver", "nccl.gpu_visible", "nccl.gpu_arch"}
    for result in results:
        assert result.status is Status.SKIP
        assert TORCH_INSTALL in result.summary and result.details[INSTALL_DETAIL] == TORCH_INSTALL


def test_torch_version_skips_with_the_install_line(no_torch, monkeypatch):
    monkeypatch.setattr(torch_version, "torch_build_without_cuda", lambda: None)
    result = torch_version.check_torch_nccl(None)
    assert result.status is Status.SKIP and TORCH_INSTALL in result.summary


def test_the_gpu_count_says_torch_is_missing(no_torch):
    assert TORCH_INSTALL in gpus.visible_gpus({}).how


@pytest.mark.parametrize("isolate", [None, "nodes"])
def test_bench_skips_every_check_it_would_report(no_torch, isolate):
    options = ProbeOptions(bench=BenchOptions(isolate=isolate))
    out = bench.probe(ProbeContext(env={}, options=options))
    assert [r.id for r in out.checks] == ["bench.allreduce"] + (["bench.isolate"] if isolate else [])
    assert all(r.status is Status.SKIP and TORCH_INSTALL in r.summary for r in out.checks)
    assert out.bench is None


def test_no_check_that_could_run_is_exit_2_and_never_a_pass():
    lacking = [needs_torch("bench.allreduce", "torch is not installed here")]
    report = Report(lacking, {})
    assert could_not_run(lacking) == TORCH_INSTALL
    assert report.exit_code() == 2 and report.headline() == "NO CHECK RAN"
    # a skip for another reason does not count; one check that ran makes it an ordinary run
    assert Report([skipped("net.mesh", "single process")], {}).exit_code() == 0
    mixed = Report(lacking + [passed("net.interfaces", "ok")], {})
    assert mixed.exit_code() == 0 and mixed.headline() == "PASS"


def test_bench_without_torch_prints_its_report_and_exits_2(no_torch, capsys):
    outcome = check(Request(("bench",), timeout=10), env={}, output=Output(fmt="json"))
    assert outcome.code == 2
    out, err = capsys.readouterr()
    assert '"bench.allreduce"' in out
    assert err.strip() == f"ncclcheck: no check could run here: {TORCH_INSTALL}"


def test_a_gather_without_torch_is_one_line_and_exit_2(no_torch):
    outcome = check(Request(("ranks",), timeout=10), env=dict(LAUNCHED), output=Output(fmt=None))
    assert outcome.code == 2 and outcome.report is None
    assert outcome.note and TORCH_INSTALL in outcome.note and "--local" in outcome.note


def test_local_under_a_launcher_needs_no_torch(no_torch):
    outcome = check(Request(("ranks",), timeout=10), env=dict(LAUNCHED), output=Output(fmt=None),
                    local=True)
    assert outcome.code in (0, 1) and outcome.report is not None
