"""The command line through its real entry point: exit codes, one-line errors, lazy torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from ncclcheck.context import ProbeContext
from ncclcheck.model import Status
from ncclcheck.probes import Family, run_family

LAUNCHER_PREFIXES = ("RANK", "WORLD_SIZE", "LOCAL_", "NODE_RANK", "GROUP_", "MASTER_", "SLURM",
                     "OMPI_", "PMI_", "MPI_LOCAL", "PET_", "JSM_", "LSB_", "TORCHELASTIC", "ROLE_")


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60):
    base = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_PREFIXES)}
    base.update(env or {})
    return subprocess.run([sys.executable, "-m", "ncclcheck", *args], capture_output=True,
                          text=True, env=base, timeout=timeout)


def assert_one_line_error(proc):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stdout == ""


def test_version():
    proc = cli("--version")
    assert proc.returncode == 0 and "0.1.0" in proc.stdout


def test_no_arguments_prints_help():
    proc = cli()
    assert proc.returncode == 0 and "Usage:" in proc.stdout


@pytest.mark.parametrize("args", [
    ("ranks", "--format", "yaml"),
    ("ranks", "--bogus-flag"),
    ("rank",),
    ("run", "--checks", "ranks,telepathy"),
    ("run", "--skip", "nope"),
    ("ranks", "--nodes", "0"),
    ("ranks", "--gpus-per-node", "x"),
    ("ranks", "--timeout", "-1"),
])
def test_bad_usage_is_one_line_and_exit_2(args):
    assert_one_line_error(cli(*args))


def test_unwritable_junit_path_is_one_line():
    proc = cli("ranks", "--junit", "/nonexistent-dir/report.xml")
    assert_one_line_error(proc)


@pytest.mark.parametrize("env", [
    {"RANK": "abc", "WORLD_SIZE": "2"},
    {"RANK": "0", "WORLD_SIZE": "0"},
    {"RANK": "0", "WORLD_SIZE": "-3"},
    {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "70000"},
    {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "http"},
    {"RANK": "", "WORLD_SIZE": ""},
])
def test_malformed_environment_fails_with_a_check_not_a_traceback(env):
    proc = cli("ranks", "--format", "json", env=env)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    failing = [c for c in report["checks"] if c["status"] == "fail"]
    assert failing and all(c["fix"] for c in failing)


def test_motivating_case_end_to_end(tmp_path):
    junit = tmp_path / "ranks.xml"
    env = {"RANK": "6", "WORLD_SIZE": "4", "LOCAL_RANK": "2", "NODE_RANK": "1",
           "MASTER_ADDR": "node0", "MASTER_PORT": "29500"}
    proc = cli("ranks", "--nodes", "2", "--gpus-per-node", "4", "--format", "json",
               "--junit", str(junit), env=env)
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    checks = {c["id"]: c for c in report["checks"]}
    assert checks["ranks.rank"]["category"] == "rank_mismatch"
    assert "Invalid rank requested : 6/4" in checks["ranks.rank"]["summary"]
    cases = ET.parse(junit).getroot().iter("testcase")
    assert any(c.find("failure") is not None and c.get("name").startswith("ranks.rank")
               for c in cases)


def test_table_output_and_strict_exit_code():
    env = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2",
           "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    relaxed = cli("ranks", env=env)
    assert relaxed.returncode == 0 and "WARN" in relaxed.stdout and "How to fix" in relaxed.stdout
    assert cli("ranks", "--strict", env=env).returncode == 1


def test_run_standalone_says_so():
    proc = cli("run", "--checks", "ranks", "--format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checks = {c["id"]: c for c in json.loads(proc.stdout)["checks"]}
    assert "standalone" in checks["ranks.launcher"]["summary"]


def test_secrets_are_redacted_in_output():
    env = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "hunter2-secret-host",
           "MASTER_PORT": "1", "MY_API_TOKEN": "hunter2-secret-host"}
    proc = cli("ranks", "--format", "json", env=env)
    assert "hunter2-secret-host" not in proc.stdout and "***" in proc.stdout


@pytest.mark.parametrize("args", [("--help",), ("ranks", "--help"), ("run", "--help")])
def test_help_does_not_import_torch(args):
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "ncclcheck", *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")]
    assert "click" in imported  # the probe really saw the imports
    assert not [m for m in imported if m == "torch" or m.startswith("torch.")]


# The runner: a probe's crash or overrun is a finding, and the others still run.
def raising_probe(ctx):
    raise RuntimeError("interface table exploded")


def sleeping_probe(ctx):
    time.sleep(30)
    return []


def test_probe_exception_becomes_one_error_result():
    ctx = ProbeContext(env={}, timeout=5)
    results = run_family(Family("net", "test_cli:raising_probe", "x"), ctx)
    assert len(results) == 1 and results[0].status is Status.ERROR
    assert "interface table exploded" in results[0].summary and results[0].id == "net.probe"


def test_probe_overrunning_the_deadline_is_named():
    ctx = ProbeContext(env={}, timeout=0.5)
    started = time.monotonic()
    results = run_family(Family("bench", "test_cli:sleeping_probe", "x"), ctx)
    assert time.monotonic() - started < 5
    assert results[0].status is Status.ERROR and "'bench'" in results[0].summary
    assert results[0].category.value == "timeout"
    later = run_family(Family("nccl", "test_cli:raising_probe", "x"), ctx)
    assert "did not run" in later[0].summary


def test_the_deadline_counts_from_the_process_start():
    """--timeout counts from when the command started: a process that spent 2 s before the
    CLI ran (a slow interpreter start on a loaded host) has 2 s less."""
    code = ("import time; time.sleep(2); from ncclcheck.cli import process_started; "
            "print(time.monotonic() - process_started())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert 2.0 <= float(out) < 30.0
