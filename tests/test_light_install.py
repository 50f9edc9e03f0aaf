"""The light install: `pip install ncclcheck` alone, no torch, as on-call engineers have it.

These run the installed `ncclcheck` command (not the source tree) in an environment where
torch is not installed: scripts/test.sh builds one (``.venv-light``, a plain ``pip install .``)
and runs this file there with NCCLCHECK_LIGHT_INSTALL=1, so a torch that got in fails them.
Elsewhere, where torch is installed, they are skipped.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

try:  # Python 3.11+
    import tomllib
except ImportError:  # pragma: no cover - Python 3.10 (tomli is a dependency there)
    import tomli as tomllib  # type: ignore[no-redef]

LIGHT = os.environ.get("NCCLCHECK_LIGHT_INSTALL") == "1"  # set by scripts/test.sh's light step
pytestmark = pytest.mark.skipif(
    not LIGHT and importlib.util.find_spec("torch") is not None,
    reason="torch is installed here: these check the install without it (scripts/test.sh "
           "runs them in .venv-light)")

TESTS = Path(__file__).resolve().parent
LOGS = TESTS / "data" / "logs"
INSTALL_LINE = "pip install 'ncclcheck[torch]'"
LAUNCHED = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29517", "TORCHELASTIC_RUN_ID": "light"}


def ncclcheck(*args: str, env: dict[str, str] | None = None, timeout: float = 60):
    """The installed console script, run away from the source tree."""
    script = Path(sys.executable).parent / "ncclcheck"
    clean = {k: v for k, v in os.environ.items()
             if k not in ("PYTHONPATH", "NCCLCHECK_DEBUG", "NCCLCHECK_EXPLAIN_ENGINE")}
    return subprocess.run([str(script), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=Path(script).anchor, env={**clean, **(env or {})})


def no_traceback(done) -> bool:
    return "Traceback" not in done.stdout + done.stderr


def test_installed_without_torch_and_not_from_the_source_tree():
    import ncclcheck as package

    assert importlib.util.find_spec("torch") is None
    assert "site-packages" in Path(package.__file__).parts, package.__file__


def test_the_fast_log_engine_comes_with_the_plain_install():
    from ncclcheck.explain.prepared import prepared

    engine = prepared().index().name
    hyperscan_wheel = (sys.platform == "linux" and platform.machine() in ("x86_64", "aarch64")
                       and sys.version_info < (3, 16))
    assert engine == ("hyperscan" if hyperscan_wheel else "aho")


@pytest.mark.parametrize("args", [["--help"], ["checks"], ["checks", "bench.allreduce"],
                                  ["hang", "--help"], ["explain", "--help"],
                                  ["explain", "--list"]])
def test_commands_that_need_no_torch_run(args):
    done = ncclcheck(*args)
    assert done.returncode == 0 and done.stdout.strip() and no_traceback(done), done.stderr


def real_logs(most: int = 8) -> list[tuple[str, str]]:
    """The corpus's logs printed by the real software, the first of each category (a few
    seconds; the whole corpus runs in the full suite)."""
    index = tomllib.loads((LOGS / "index.toml").read_text("utf-8"))
    chosen: dict[str, tuple[str, str]] = {}
    for entry in index["log"]:
        if entry["origin"].startswith("real") and (LOGS / entry["path"]).exists():
            chosen.setdefault(entry["category"], (entry["path"], entry["root"]))
    return list(chosen.values())[:most]


def test_explain_finds_the_root_cause_of_real_logs():
    logs = real_logs()
    assert len(logs) >= 6

    def root_of(path: str) -> tuple[str, str | None, str]:
        done = ncclcheck("explain", "--format", "json", str(LOGS / path))
        assert done.returncode == 0 and no_traceback(done), done.stderr
        roots = [f["id"] for f in json.loads(done.stdout)["findings"] if f["root_cause"]]
        return path, roots[0] if roots else None, done.stderr

    with ThreadPoolExecutor(2) as pool:
        found = {path: root for path, root, _ in pool.map(root_of, [p for p, _ in logs])}
    wrong = {p: (found[p], root) for p, root in logs if found[p] != (root or None)}
    assert not wrong


def test_hang_runs_and_finds_no_job_on_an_idle_host():
    done = ncclcheck("hang", "--format", "json", "--timeout", "20", timeout=60)
    assert done.returncode == 0 and no_traceback(done), done.stderr
    assert json.loads(done.stdout)


def test_nccl_skips_what_needs_torch_with_the_install_line():
    done = ncclcheck("nccl", "--format", "json", "--timeout", "30")
    assert done.returncode == 0 and no_traceback(done), done.stderr
    checks = {c["id"]: c for c in json.loads(done.stdout)["checks"]}
    for ident in ("nccl.torch_version", "nccl.cuda_driver", "nccl.gpu_visible"):
        assert checks[ident]["status"] == "skip" and INSTALL_LINE in checks[ident]["summary"]
        assert checks[ident]["details"]["install"] == INSTALL_LINE
    assert any(c["status"] == "pass" for c in checks.values())


def test_run_without_bench_runs_every_check_that_needs_no_torch():
    done = ncclcheck("run", "--no-bench", "--format", "json", "--timeout", "40")
    assert done.returncode == 0 and no_traceback(done), done.stderr
    checks = json.loads(done.stdout)["checks"]
    ran = {c["id"].split(".")[0] for c in checks if c["status"] == "pass"}
    assert {"ranks", "net", "nccl"} <= ran
    lacking = [c for c in checks if c["details"].get("install")]
    assert lacking and all(c["status"] == "skip" for c in lacking)


def test_bench_where_no_check_could_run_is_exit_2_never_a_pass():
    done = ncclcheck("bench", "--timeout", "30")
    assert done.returncode == 2 and no_traceback(done), done.stderr
    assert "NO CHECK RAN" in done.stdout and INSTALL_LINE in done.stdout
    assert done.stderr.strip() == f"ncclcheck: no check could run here: {INSTALL_LINE}"


def test_a_job_wide_gather_without_torch_is_one_line_and_exit_2():
    done = ncclcheck("ranks", "--timeout", "10", env=LAUNCHED)
    assert done.returncode == 2 and no_traceback(done) and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and INSTALL_LINE in done.stderr
    alone = ncclcheck("ranks", "--local", "--format", "json", "--timeout", "10", env=LAUNCHED)
    assert alone.returncode in (0, 1) and json.loads(alone.stdout)["checks"], alone.stderr
