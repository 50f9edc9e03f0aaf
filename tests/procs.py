"""Collecting several test processes: each one's exit code and output, none left running."""

from __future__ import annotations

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor


def collect(procs: list[subprocess.Popen], limit: float) -> list[tuple[int, str, str]]:
    """[(returncode, stdout, stderr)] in the order given; a process still running after
    ``limit`` seconds (or left when another one failed) is killed.

    Every process's pipes are drained at the same time: reading them one after the other
    would leave a later process blocked on a full stdout pipe (a job report is larger than
    the 64 KiB a pipe holds) while the test waits on an earlier one."""
    deadline = time.monotonic() + limit

    def drain(proc: subprocess.Popen) -> tuple[int, str, str]:
        out, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
        return proc.returncode, out, err

    try:
        with ThreadPoolExecutor(max_workers=max(1, len(procs))) as pool:
            return list(pool.map(drain, procs))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
