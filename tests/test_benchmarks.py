"""Every script in benchmarks/ still runs: each has a --smoke mode (the same code path on tiny
sizes) and the suite runs it, so a change elsewhere cannot leave a benchmark broken unnoticed.

Scripts are found by a glob (every file that runs as a program; a module the scripts share, such
as world_corpus.py, is not one), so a new one is picked up and must have --smoke. The numbers
are not judged here: speed and memory targets are the benchmarks' own business.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(path.name for path in (ROOT / "benchmarks").glob("*.py")
                 if 'if __name__ == "__main__":' in path.read_text("utf-8"))

# Smokes that take more than two seconds on a 2-core machine (multi-process sweeps, three
# engines over two logs, a child process per command, the corpus under every transformation):
# these run in the full suite only. Every other script's smoke takes a second or two and stays
# in the quick loop.
SLOW_SMOKES = {
    "bench_fidelity.py",  # ncclcheck's sweep and a bare torch.distributed loop, 2 ranks each
    "explain_speed.py",  # a child explain per engine and log, pure-Python engines at ~0.4 MB/s
    "explain_unseen_wording.py",  # explain per signature left out (4 s)
    "explain_startup.py",  # fresh interpreters, three rounds of three commands (4 s)
    "explain_invariance.py",  # the logs under all 21 transformations (3 s)
    "mesh_scale.py",  # (3 s)
    "gather_scale.py",  # (2 s)
    "fr_scale.py",  # (2 s)
}
QUICK_DEADLINE_S = 120.0
SLOW_DEADLINE_S = 300.0
A_NUMBER = re.compile(r"\d+\.\d+")


def _smoke_case(name: str):
    marks = [pytest.mark.slow] if name in SLOW_SMOKES else []
    return pytest.param(name, marks=marks, id=name.removesuffix(".py"))


def test_benchmarks_are_found():
    assert SCRIPTS, "no benchmarks/*.py found"


def test_the_slow_list_names_only_existing_scripts():
    assert SLOW_SMOKES <= set(SCRIPTS), SLOW_SMOKES - set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_benchmark_has_a_smoke_mode(name):
    source = (ROOT / "benchmarks" / name).read_text("utf-8")
    assert '"--smoke"' in source, f"benchmarks/{name} has no --smoke flag"
    assert "--smoke" in source.split('"""')[1], f"benchmarks/{name}: usage lines lack --smoke"


def _kill_group(group: int) -> None:
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _run_smoke(name: str, deadline: float, *extra: str) -> subprocess.CompletedProcess:
    """``python benchmarks/NAME --smoke`` in its own process group, which is killed whole
    (worker and publisher processes too) when it runs past ``deadline`` seconds."""
    argv = [sys.executable, str(ROOT / "benchmarks" / name), "--smoke", *extra]
    # the package of this checkout, not whichever one the interpreter has installed
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    child = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True,
                             env=dict(os.environ, PYTHONPATH=path))
    try:
        stdout, stderr = child.communicate(timeout=deadline)
    except subprocess.TimeoutExpired:
        _kill_group(child.pid)
        stdout, stderr = child.communicate()
        pytest.fail(f"benchmarks/{name} --smoke ran past {deadline:.0f} s\n"
                    f"stdout:\n{stdout[-3000:]}\nstderr:\n{stderr[-3000:]}")
    _kill_group(child.pid)  # nothing the script started outlives it
    return subprocess.CompletedProcess(argv, child.returncode, stdout, stderr)


@pytest.mark.parametrize("name", [_smoke_case(name) for name in SCRIPTS])
def test_benchmark_smoke_runs_and_prints_numbers(name):
    done = _run_smoke(name, SLOW_DEADLINE_S if name in SLOW_SMOKES else QUICK_DEADLINE_S)
    tail = f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"benchmarks/{name} --smoke exited {done.returncode}\n{tail}"
    assert A_NUMBER.search(done.stdout), f"benchmarks/{name} --smoke printed no numbers\n{tail}"


@pytest.mark.slow  # child explains of two logs, several runs each (4 s)
def test_explain_speed_reports_the_median_of_several_runs():
    """--runs N: each command timed N times, the median shown with the range."""
    done = _run_smoke("explain_speed.py", SLOW_DEADLINE_S, "--engine", "aho", "--runs", "3")
    assert done.returncode == 0, done.stderr[-3000:]
    timed = [line for line in done.stdout.splitlines() if "explain (aho)" in line]
    assert len(timed) == 2 and all(", 3 runs)" in line for line in timed), done.stdout
    refused = _run_smoke("explain_speed.py", QUICK_DEADLINE_S, "--runs", "0")
    assert refused.returncode == 2 and "--runs" in refused.stderr
