"""`ncclcheck hang` as a command: bad input is one line and exit 2, a process that is no job is a
note, and the JSON is explain's document with the snapshot beside it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def hang(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ncclcheck", "hang", *args],
                          capture_output=True, text=True, env=ENV, timeout=timeout)


@pytest.mark.parametrize("args, says", [
    (["--pid", "999999999"], "--pid 999999999: no such process"),
    (["--out", "/proc/version/x"], "--out /proc/version/x: cannot write there"),
    (["--samples", "0"], "--samples"),
    (["--timeout", "nan"], "--timeout"),
])
def test_bad_input_is_one_line_and_exit_2(args, says):
    done = hang(*args)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_a_process_that_is_no_job_gives_notes_not_a_failure(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time\ndef napping():\n"
                                "    time.sleep(600)\nprint('ready', flush=True)\nnapping()"],
                               stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert sleeper.stdout.readline().strip() == "ready"
        started = time.monotonic()
        done = hang("--pid", str(sleeper.pid), "--format", "json", "--samples", "2",
                    "--interval", "0.2", "--out", str(tmp_path / "snap"), "--exit-code")
        took = time.monotonic() - started
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        assert not [f for f in doc["findings"] if f["category"]]
        assert {"findings", "hypotheses", "notes", "hang"} <= set(doc)
        assert "hang.stuck_elsewhere" in {n["id"] for n in doc["notes"]}
        (proc,) = doc["hang"]["processes"]
        assert proc["pid"] == sleeper.pid and proc["source"] == "py-spy"
        assert proc["where"].startswith("napping (") and proc["state"] == "S"
        assert [p.name for p in (tmp_path / "snap").iterdir()] == [
            f"hang-{doc['hang']['host']}-{sleeper.pid}.json"]
        assert took < 20
        table = hang("--pid", str(sleeper.pid), "--samples", "1")
        assert table.returncode == 0 and "No rank holds the others up." in table.stdout
        assert "napping" in table.stdout
        markdown = hang("--pid", str(sleeper.pid), "--samples", "1", "--format", "markdown")
        assert markdown.returncode == 0 and "## Where the ranks are" in markdown.stdout
        assert f"| pid {sleeper.pid} | 1 | stuck | `napping (" in markdown.stdout
    finally:
        os.killpg(sleeper.pid, signal.SIGKILL)
        sleeper.wait(timeout=10)


def test_without_py_spy_and_unarmed_the_reason_and_fix_are_said(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); "
                                "time.sleep(600)"], stdout=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        assert sleeper.stdout.readline().strip() == "ready"
        done = subprocess.run(
            [sys.executable, "-m", "ncclcheck", "hang", "--pid", str(sleeper.pid), "--format",
             "json", "--samples", "1"], capture_output=True, text=True, timeout=60,
            env={**ENV, "NCCLCHECK_PYSPY": "none", "NCCLCHECK_HANG_DIR": str(tmp_path)})
        doc = json.loads(done.stdout)
        notes = {n["id"]: n["text"] for n in doc["notes"]}
        assert "hang.unread" in notes
        assert "from ncclcheck.hang import arm; arm()" in notes["hang.unreadable"]
        assert any("py-spy is not installed" in n for n in doc["hang"]["notes"])
    finally:
        os.killpg(sleeper.pid, signal.SIGKILL)
        sleeper.wait(timeout=10)


def test_two_jobs_on_one_node_are_never_judged_together():
    code = "import time; print('ready', flush=True); time.sleep(600)"
    jobs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             start_new_session=True,
                             env={**ENV, "RANK": "0", "WORLD_SIZE": "1",
                                  "TORCHELASTIC_RUN_ID": f"ncclcheck-test-{n}-{os.getpid()}"})
            for n in (1, 2)]
    try:
        for job in jobs:
            assert job.stdout.readline().strip() == "ready"
        done = hang("--samples", "1")
        assert done.returncode == 2 and "jobs run on this node" in done.stderr
        assert "--job" in done.stderr and len(done.stderr.strip().splitlines()) == 1
        chosen = hang("--samples", "1", "--format", "json", "--job",
                      f"ncclcheck-test-2-{os.getpid()}")
        assert chosen.returncode == 0, chosen.stderr
        assert [p["pid"] for p in json.loads(chosen.stdout)["hang"]["processes"]] == [jobs[1].pid]
        missing = hang("--job", "no-such-job")
        assert missing.returncode == 2 and "no such job on this node" in missing.stderr
    finally:
        for job in jobs:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(timeout=10)


def test_the_timeout_bounds_the_command():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); "
                                "time.sleep(600)"], stdout=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        assert sleeper.stdout.readline().strip() == "ready"
        started = time.monotonic()
        done = hang("--pid", str(sleeper.pid), "--format", "json", "--samples", "20",
                    "--interval", "1", "--timeout", "2")
        took = time.monotonic() - started
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        assert any("--timeout reached after" in n for n in doc["hang"]["notes"])
        assert doc["hang"]["duration_s"] < 3.0 and took < 15
    finally:
        os.killpg(sleeper.pid, signal.SIGKILL)
        sleeper.wait(timeout=10)
