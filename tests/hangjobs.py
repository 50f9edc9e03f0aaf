"""Real hung jobs for `ncclcheck hang`'s tests: torchrun starts tests/hang/hang_job.py, which
hangs in the shape its scenario names; the job runs in a session of its own and is killed whole
when the test ends (or runs past its limit)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

ROOT = Path(__file__).resolve().parents[1]
JOB = Path(__file__).parent / "hang" / "hang_job.py"
HOLDER = Path(__file__).parent / "hang" / "fd_holder.py"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
READY_S = 150.0


def line_of(marker: str) -> int:
    """The line of hang_job.py that carries ``# <marker>``."""
    for number, line in enumerate(JOB.read_text().splitlines(), 1):
        if f"# {marker}" in line:
            return number
    raise AssertionError(f"no line marked {marker}")


def _workers(folder: Path) -> list[int]:
    return [int(p.read_text()) for p in folder.glob("ready-*") if p.read_text().isdigit()]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def job_env(folder: Path, scenario: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TORCH_", "MASTER_", "RANK", "WORLD_", "LOCAL_", "HANG_"))}
    env.update({"HANG_DIR": str(folder), "HANG_SCENARIO": scenario, "OMP_NUM_THREADS": "1",
                "PYTHONPATH": str(ROOT), "HANG_SECONDS": "300", **extra})
    return env


def wait_ready(folder: Path, ranks: int, procs: Sequence[subprocess.Popen],
               settle: float = 1.0) -> list[int]:
    """The pids of the ranks once each wrote its ready file; then ``settle`` seconds for them
    to reach the place they hang in."""
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        found = sorted(folder.glob("ready-*"))
        if len(found) >= ranks:
            time.sleep(settle)
            return [int(p.read_text()) for p in sorted(found, key=lambda p: int(p.name[6:]))]
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(0.2)
    logs = "\n".join(p.read_text()[-2000:] for p in folder.glob("*.log"))
    raise AssertionError(f"the job did not get ready: {logs}")


def kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def stop_job(job: subprocess.Popen, pids: Sequence[int]) -> None:
    """torchrun starts each worker in a session of its own: ask it to stop them (SIGTERM), then
    kill whichever of the job's workers is left, by pid (each checked to still be the job's)."""
    if job.poll() is None:
        job.send_signal(signal.SIGTERM)
        try:
            job.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if JOB.name.encode() in handle.read():
                    os.kill(pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            continue
    kill(job)


@contextmanager
def hung_job(folder: Path, scenario: str, nproc: int, wrap: Sequence[str] = (),
             **extra: str) -> Iterator[tuple[int, list[int]]]:
    """torchrun with ``nproc`` ranks on this host (``wrap``: a command it runs under, such as
    setpriv); yields torchrun's pid and the ranks' pids once they hang."""
    folder.mkdir(parents=True, exist_ok=True)
    holder = None
    if scenario == "gone":
        sock = folder / "holder.sock"
        holder = subprocess.Popen([sys.executable, str(HOLDER), str(sock)],
                                  start_new_session=True)
        while not sock.exists() and holder.poll() is None:
            time.sleep(0.05)
        extra["HANG_HOLDER"] = str(sock)
    log = open(folder / "torchrun.log", "w")
    job = subprocess.Popen([*wrap, *TORCHRUN, "--standalone", "--nproc-per-node", str(nproc),
                            str(JOB)], stdout=log, stderr=subprocess.STDOUT,
                           env=job_env(folder, scenario, **extra), start_new_session=True)
    pids: list[int] = []
    try:
        pids = wait_ready(folder, nproc, [job], settle=2.0 if scenario == "gone" else 1.0)
        yield job.pid, pids
    finally:
        stop_job(job, pids or _workers(folder))
        log.close()
        if holder is not None:
            kill(holder)


def hang_json(*args: str, env: dict[str, str] | None = None, wrap: Sequence[str] = (),
              timeout: float = 90) -> dict:
    done = subprocess.run([*wrap, sys.executable, "-m", "ncclcheck", "hang", "--format", "json",
                           *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def explain_json(*paths: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "ncclcheck", "explain", "--format", "json",
                           *paths], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def groups_of(doc: dict) -> list[tuple[str, int, str]]:
    """(ranks, count, state) of each group, in the order shown."""
    return [(g["ranks"], g["count"], g["state"]) for g in doc["hang"]["groups"]]
