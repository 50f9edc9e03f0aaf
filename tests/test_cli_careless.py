"""Issue 15: what a careless user types must end in a clear exit 2 or a true report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from ncclcheck.cli_params import FiniteSeconds, unwritable_reason, writable_path
from test_cli import assert_one_line_error, cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("value", ["inf", "-inf", "1e308", "nan", "-1", "0", "1e6x", "604801"])
def test_timeout_out_of_range_is_exit_2_naming_the_range(value):
    proc = cli("ranks", f"--timeout={value}")
    assert_one_line_error(proc)
    assert "--timeout" in proc.stderr and "0.1 to 604800" in proc.stderr


@pytest.mark.parametrize("args", [
    ("bench", "--factor", "nan"), ("bench", "--factor", "inf"), ("bench", "--min-busbw", "nan"),
    ("net", "--mesh-connect-timeout", "nan"), ("bench", "--nproc", "100000"),
])
def test_other_numbers_refuse_nan_inf_and_absurd_values(args):
    assert_one_line_error(cli(*args))


def test_finite_seconds_accepts_the_edges():
    seconds = FiniteSeconds(0.1)
    assert seconds.convert("0.1", None, None) == 0.1
    assert seconds.convert("604800", None, None) == 604800.0
    with pytest.raises(click.BadParameter):
        seconds.convert("nan", None, None)


@pytest.mark.parametrize("args, words", [
    (("run", "--skip", "ranks,net,nccl,bench"), "no probe family left"),
    (("run", "--checks", "bench", "--no-bench"), "no probe family left"),
    (("run", "--checks", ",,"), "names no probe family"),
    (("run", "--checks=",), "names no probe family"),
    (("run", "--skip", " , "), "names no probe family"),
])
def test_a_run_that_would_check_nothing_is_exit_2(args, words):
    proc = cli(*args, "--format", "json")
    assert_one_line_error(proc)
    assert words in proc.stderr


def test_unwritable_reason_tries_a_real_write(tmp_path):
    existing = tmp_path / "kept.xml"
    existing.write_text("keep me")
    assert unwritable_reason(str(existing)) is None
    assert existing.read_text() == "keep me"  # probing left the content alone
    fresh = tmp_path / "new.xml"
    assert unwritable_reason(str(fresh)) is None and not fresh.exists()
    assert "does not exist" in unwritable_reason(str(tmp_path / "no" / "x.xml"))
    assert "directory" in unwritable_reason(str(tmp_path))
    assert unwritable_reason("/proc/version")  # root passes os.access, the write still fails
    assert unwritable_reason("")
    with pytest.raises(click.BadParameter):
        writable_path.convert(str(tmp_path / "no" / "x.xml"), None, None)


@pytest.mark.parametrize("args", [
    ("ranks", "--junit", "/nonexistent-dir/j.xml"),
    ("ranks", "--junit", "/proc/version"),
    ("net", "--junit", "/"),
    ("bench", "--plot", "/nonexistent-dir/curve.png"),
    ("run", "--junit", "/proc/self/nope/j.xml"),
])
def test_unwritable_output_path_fails_before_any_work(args):
    proc = cli(*args, timeout=20)
    assert_one_line_error(proc)
    assert "cannot write" in proc.stderr
    assert "sizes done" not in proc.stderr  # the sweep never started


def test_successful_plot_says_where_it_wrote(tmp_path):
    pytest.importorskip("matplotlib")
    curve = tmp_path / "curve.png"
    proc = cli("bench", "--max-bytes", "4K", "--iters", "1", "--warmup", "0", "--plot",
               str(curve), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    checks = {c["id"]: c for c in json.loads(proc.stdout)["checks"]}
    assert str(curve) in checks["bench.plot"]["summary"] and curve.stat().st_size > 0


def _fake_clone_parent(tmp_path: Path) -> Path:
    """A folder holding a directory named like the package, as ~ holds ~/ncclcheck."""
    clone = tmp_path / "ncclcheck"
    clone.mkdir()
    (clone / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    return tmp_path


def test_python_m_from_the_folder_holding_the_clone(tmp_path):
    """Under the editable install the suite runs in, cwd's ncclcheck/ (no __init__.py) is a
    namespace package found before the editable finder."""
    proc = subprocess.run([sys.executable, "-m", "ncclcheck", "--version"], capture_output=True,
                          text=True, cwd=_fake_clone_parent(tmp_path), timeout=60)
    assert proc.returncode == 0 and "0.1.0" in proc.stdout, proc.stderr
    probe = subprocess.run([sys.executable, "-m", "ncclcheck", "checks", "ranks.rank"],
                           capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert probe.returncode == 0, probe.stderr


def _site_dirs() -> list[str]:
    return [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]


@pytest.mark.slow
def test_python_m_with_a_real_editable_install(tmp_path):
    """`pip install -e` of a copy of the clone into a fresh venv, then `python -m ncclcheck`
    from the folder that holds that copy (its dependencies come from this interpreter)."""
    home = tmp_path / "home"
    clone = home / "ncclcheck"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            (clone / name).write_bytes((ROOT / name).read_bytes())
    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=120)
    install = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", "-e",
                              str(clone)], capture_output=True, text=True, timeout=300)
    if install.returncode != 0:
        pytest.skip(f"pip install -e could not run here: {install.stderr[-300:]}")
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "zz_deps.pth").write_text("\n".join(_site_dirs()) + "\n")
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "ncclcheck", "--version"],
                          capture_output=True, text=True, cwd=home, timeout=60)
    assert proc.returncode == 0 and "0.1.0" in proc.stdout, proc.stderr


@pytest.mark.parametrize("port", ["99999", "0", "-1", "http"])
def test_net_alone_judges_a_bad_master_port(port):
    proc = cli("net", "--format", "json", "--timeout", "20", env={"MASTER_PORT": port})
    assert proc.returncode == 1, proc.stderr
    checks = {c["id"]: c for c in json.loads(proc.stdout)["checks"]}
    verdict = checks["net.master_port"]
    assert verdict["status"] == "fail" and "MASTER_PORT" in verdict["fix"]
    assert "see ranks" not in verdict["summary"]


@pytest.mark.parametrize("value, word", [("", "is empty"), ("e", "is one character")])
def test_short_socket_ifname_wording_and_fix_agree_with_net(value, word):
    proc = cli("run", "--checks", "net,nccl", "--format", "json", "--timeout", "30",
               env={"NCCL_SOCKET_IFNAME": value})
    assert proc.returncode in (0, 1), proc.stderr
    checks = {c["id"]: c for c in json.loads(proc.stdout)["checks"]}
    setting = checks["nccl.setting.NCCL_SOCKET_IFNAME"]
    assert word in setting["summary"]
    predicted = checks["net.nccl_interface"]["details"]["nccl_interfaces"]
    if predicted:
        assert f"NCCL_SOCKET_IFNAME={predicted[0]}." in setting["fix"]
        assert f"(here: {predicted[0]})" in setting["summary"]


def _imported(args: list[str], env: dict[str, str]) -> list[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "ncclcheck", *args],
                          capture_output=True, text=True, timeout=60, env={**base, **env})
    assert proc.returncode in (0, 1), proc.stderr[-500:]
    return [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
            if line.startswith("import time:")]


@pytest.mark.parametrize("env", [{}, {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}])
def test_ranks_leaves_torch_alone_without_an_nvidia_driver(env):
    from ncclcheck.gpus import nvidia_driver_loaded
    if nvidia_driver_loaded():
        pytest.skip("an NVIDIA driver is loaded: the GPU count rightly comes from torch")
    imported = _imported(["ranks", "--format", "json"], env)
    assert "click" in imported
    assert "torch" not in imported


def test_a_one_second_run_finishes_every_family():
    proc = cli("run", "--no-bench", "--timeout", "1", "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    errors = [c for c in json.loads(proc.stdout)["checks"] if c["status"] == "error"]
    assert not errors, errors


def _hung(backend: str, ranks: list[int]):
    from ncclcheck.bench.analysis import SweepResult
    from ncclcheck.probes.bench.allreduce import allreduce_check
    result = SweepResult(backend, 3, "float32", 20, 5, [1024, 4096], 10.0,
                         torn_down=ranks, progress={r: 2 for r in ranks})
    result.outcomes = {}
    return allreduce_check(result, [])


def test_several_hung_ranks_agree_in_number():
    check = _hung("gloo", [0, 1])
    assert "ranks 0, 1 stopped answering and were torn down" in check.summary
    assert "Find what ranks 0, 1 were doing" in check.fix
    single = _hung("gloo", [1])
    assert "rank 1 stopped answering and was torn down" in single.summary
    assert "Find what rank 1 was doing" in single.fix


def test_a_gloo_run_is_not_sent_to_nvidia_smi():
    assert "nvidia-smi" not in _hung("gloo", [1]).fix
    assert "GPU" not in _hung("gloo", [0, 1]).fix
    assert "their GPUs in nvidia-smi" in _hung("nccl", [0, 1]).fix
    assert "its GPU in nvidia-smi" in _hung("nccl", [1]).fix


def test_wrong_values_on_gloo_are_not_sent_to_gpu_tools():
    from ncclcheck.bench.analysis import SweepResult, job_rows
    from ncclcheck.probes.bench.allreduce import allreduce_check
    row = {"bytes": 1024, "count": 256, "time_s": 1e-3, "lag_s": 1e-6, "wrong": 1,
           "input_wrong": 0}
    for backend, tool in (("gloo", "memtester"), ("nccl", "nvidia-smi")):
        result = SweepResult(backend, 2, "float32", 20, 5, [1024], 10.0)
        result.outcomes = {r: {"rank": r, "host": "h", "rows": [row], "error": None}
                           for r in range(2)}
        check = allreduce_check(result, job_rows(result))
        assert check.status.value == "fail" and tool in check.fix, check.fix


def test_lightning_import_counts_against_the_timeout():
    """Importing Lightning takes seconds: with --timeout 1 the command still ends within the
    contract's --timeout + 5 s, with one JSON report saying what did not finish."""
    import time
    pytest.importorskip("pytorch_lightning")
    began = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "ncclcheck", "ranks", "--lightning",
                           "--timeout", "1", "--format", "json"], capture_output=True, text=True,
                          timeout=60, env={k: v for k, v in os.environ.items()
                                           if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR")})
    elapsed = time.monotonic() - began
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    assert report["checks"] and "Traceback" not in proc.stderr
    assert elapsed < 1 + 5, elapsed


def test_a_path_another_rank_creates_meanwhile_is_still_writable(tmp_path, monkeypatch):
    """The ranks of one node check the same --prom-file at once: one may create it between
    another's look and its write test. The check must not trip over it, nor leave files."""
    target = tmp_path / "ncclcheck.prom"
    target.write_text("written by rank 0\n")
    real_exists = os.path.exists
    monkeypatch.setattr(os.path, "exists",
                        lambda p: False if os.fspath(p) == str(target) else real_exists(p))
    assert unwritable_reason(str(target)) is None
    monkeypatch.undo()
    assert target.read_text() == "written by rank 0\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ncclcheck.prom"]
