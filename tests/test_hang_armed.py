"""Where py-spy cannot attach: the job runs as another user (nobody) and `ncclcheck hang` runs as
root without CAP_SYS_PTRACE (capsh drops it), as in a container without SYS_PTRACE. Each process
says why and how to fix it; the job armed itself with the one-line hook, so `ncclcheck hang`
signals it and reads the stacks (and the flight recorder) it wrote — the culprit all the same."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hangjobs import ROOT, explain_json, hung_job, line_of

pytestmark = pytest.mark.slow

NOBODY = 65534
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
             # read the interpreter and this checkout wherever they are (a home folder)
             "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search", "--"]


def _unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root (to run the job as another user and drop a capability)"
    for tool in ("setpriv", "capsh"):
        if shutil.which(tool) is None:
            return f"needs {tool} (util-linux, libcap2-bin)"
    return None


def require() -> None:
    """Skip locally without the tools; under CI=true a missing tool fails (scripts/test.sh
    installs them)."""
    reason = _unavailable()
    if reason and os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {reason}")
    if reason:
        pytest.skip(reason)


@pytest.fixture
def shared_folder():
    """A folder both the job (nobody) and ncclcheck (root) reach: /tmp, like /tmp itself."""
    folder = Path(tempfile.mkdtemp(prefix="ncclcheck-armed-test-", dir="/tmp"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_no_ptrace_rights_then_the_armed_way(shared_folder):
    require()
    armed = shared_folder / "armed"
    armed.mkdir(mode=0o1777)
    armed.chmod(0o1777)
    job = shared_folder / "job"
    job.mkdir(mode=0o777)
    job.chmod(0o777)
    out = shared_folder / "snap"
    with hung_job(job, "outside", 3, wrap=AS_NOBODY, HANG_CULPRIT="1", HANG_ARM="1",
                  NCCLCHECK_HANG_DIR=str(armed), TORCH_FR_BUFFER_SIZE="200",
                  HOME=str(shared_folder)) as (launcher, pids):
        command = [sys.executable, "-m", "ncclcheck", "hang", "--format", "json", "--job",
                   str(launcher), "--out", str(out)]
        done = subprocess.run(["capsh", "--drop=cap_sys_ptrace", "--", "-c",
                               shlex.join(command)], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(ROOT),
                                   "NCCLCHECK_HANG_DIR": str(armed)})
        alive = [pid for pid in pids if os.path.exists(f"/proc/{pid}")]
        joined = explain_json(str(out))
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    processes = doc["hang"]["processes"]
    assert sorted(p["pid"] for p in processes) == sorted(pids) == sorted(alive)
    for proc in processes:
        assert proc["source"] == "armed", proc
        denied = proc["problems"][0]
        assert "no ptrace permission" in denied["what"]
        assert "SYS_PTRACE" in denied["fix"] and f"uid {NOBODY}" in denied["fix"]
    root = doc["findings"][0]
    assert root["root_cause"] and root["id"] == "hang.outside_collective"
    assert root["facts"]["ranks"] == [1]
    assert root["facts"]["where"]["function"] == "load_batch"
    assert root["facts"]["where"]["line"] == line_of("load-batch-line")
    # the armed processes wrote their flight recorder too: explain reads it beside the stacks
    assert len(list(out.glob("fr-*.pkl"))) == 3
    fr = [f for f in joined["findings"] if f["id"].startswith("fr.")]
    assert fr and fr[0]["facts"]["ranks"] == [1]
    assert joined["findings"][0]["id"] == "hang.outside_collective"


def test_the_fix_is_said_where_nothing_can_read_the_process(shared_folder):
    """Not armed and no ptrace rights: the process is listed with the reason and both fixes."""
    require()
    sleeper = subprocess.Popen([*AS_NOBODY, sys.executable, "-c",
                                "import time; print('ready', flush=True); time.sleep(600)"],
                               stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert sleeper.stdout.readline().strip() == "ready"
        command = [sys.executable, "-m", "ncclcheck", "hang", "--pid", str(sleeper.pid),
                   "--samples", "1"]
        done = subprocess.run(["capsh", "--drop=cap_sys_ptrace", "--", "-c",
                               shlex.join(command)], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": str(ROOT),
                                   "NCCLCHECK_HANG_DIR": str(shared_folder)})
        assert done.returncode == 0, done.stderr
        assert "no ptrace permission" in done.stdout and "SYS_PTRACE" in done.stdout
        assert "from ncclcheck.hang import arm; arm()" in done.stdout
    finally:
        os.killpg(sleeper.pid, signal.SIGKILL)
        sleeper.wait(timeout=10)
