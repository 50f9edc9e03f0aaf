"""A healthy run's log is clean: explain names no failure in it and offers no hypothesis.

The contract: on a clean log every finding has no category and there is no hypothesis. Healthy
runs are rarely quiet, so the project's clean logs (tests/data/logs/index.toml, root "")
include noisy ones that make/make_clean_logs.py records from real torchrun, Gloo, Lightning
and libnccl runs: a restart torchrun recovers from, a traceback the training loop handled, a
retried store wait, warnings, metrics named error_rate, NCCL_DEBUG=INFO. Each log is one quick
case. The ones explain reads wrong today are strict xfails that say what it reports: when
explain learns to read one, its xfail fails and its entry in KNOWN_WRONG goes.

The slow test makes two scenarios again with today's software, so that the maker (and the
logs it would make) cannot rot unnoticed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ncclcheck.explain.engine import explain

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests" / "data" / "logs"
MAKER = LOGS / "make" / "make_clean_logs.py"
sys.path.insert(0, str(MAKER.parent))

import make_clean_logs  # noqa: E402

INDEX = tomllib.loads((LOGS / "index.toml").read_text("utf-8"))["log"]
CLEAN = [e for e in INDEX if not e["root"]]

# What explain reports today on clean logs it must leave alone (log path -> what and why).
KNOWN_WRONG: dict[str, str] = {}


def problems(result: dict[str, Any]) -> list[str]:
    """What breaks the contract: findings with a category, and every hypothesis."""
    found = [f"finding {f['id']} ({f['category']}) at line {f['line']}: {f['text'][:160]}"
             for f in result["findings"] if f["category"] is not None]
    return found + [f"hypothesis {h['category']} {h['confidence']} ({h['source']})"
                    for h in result["hypotheses"]]


def _case(path: str, name: str | None = None) -> Any:
    reason = KNOWN_WRONG.get(path)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(path, marks=marks, id=name or path)


@pytest.mark.parametrize("path", [_case(e["path"]) for e in CLEAN])
def test_a_clean_log_gets_no_category_and_no_hypothesis(path):
    assert problems(explain([str(LOGS / path)]).to_dict()) == []


def test_every_known_wrong_log_is_an_indexed_clean_log():
    assert set(KNOWN_WRONG) <= {e["path"] for e in CLEAN}


def test_the_maker_s_scenarios_are_the_indexed_noise_logs():
    """Each scenario make_clean_logs.py runs is indexed, with the maker's origin line."""
    indexed = {Path(e["path"]).name: e["origin"] for e in CLEAN
               if Path(e["path"]).name.startswith("noise-")}
    assert indexed == {name: origin for name, (_, origin) in make_clean_logs.SCENARIOS.items()}
    assert all((LOGS / "clean" / name).is_file() for name in indexed)


# -- made again: the maker still runs the real software to the end --------------------------
AGAIN = ["noise-nccl-info-in-gloo-run-ok.log", "noise-torchrun-restart-exit-ok.log"]


@pytest.fixture(scope="module")
def made_again(tmp_path_factory) -> Path:
    """AGAIN made by make_clean_logs.py into a temporary folder, in a process group of its
    own that is killed whole if it runs past its deadline."""
    out = tmp_path_factory.mktemp("clean-logs")
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    child = subprocess.Popen([sys.executable, str(MAKER), "--out", str(out), *AGAIN], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True, env=dict(os.environ, PYTHONPATH=path))
    try:
        printed, _ = child.communicate(timeout=400)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        printed, _ = child.communicate()
        pytest.fail(f"make_clean_logs.py ran past 400 s:\n{printed[-3000:]}")
    assert child.returncode == 0, printed[-3000:]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", [_case(f"clean/{name}", name) for name in AGAIN])
def test_made_again_the_log_is_still_clean(made_again, name):
    text = (made_again / Path(name).name).read_text("utf-8")
    assert "rank 0: training finished" in text and "rank 1: training finished" in text
    assert problems(explain([str(made_again / Path(name).name)]).to_dict()) == []


def test_a_failure_the_run_went_on_from_is_a_note_naming_it():
    """torchrun restarted the group after attempt 0 raised, and attempt 1 finished: no root,
    one note naming the raise and the completion."""
    result = explain([str(LOGS / "clean/noise-torchrun-restart-raise-ok.log")])
    assert result.root is None and result.hypotheses == []
    notes = [n for n in result.notes if n.id == "explain.recovered"]
    assert len(notes) == 1 and "went on" in notes[0].text and ":22)" in notes[0].text


def test_a_failure_after_the_completion_is_still_the_root(tmp_path):
    """A completion only covers what came before it: the same handled traceback, then a rank
    that died after training finished, is a failed run."""
    log = tmp_path / "rank0.log"
    log.write_text((LOGS / "clean/noise-handled-exception-ok.log").read_text("utf-8") +
                   "Traceback (most recent call last):\n"
                   '  File "train.py", line 9, in <module>\n'
                   "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970,"
                   " unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version"
                   " 2.21.5\n", "utf-8")
    result = explain([str(log)])
    assert result.root is not None and result.root.first.line > 24
    assert not [n for n in result.notes if n.id == "explain.recovered"]
