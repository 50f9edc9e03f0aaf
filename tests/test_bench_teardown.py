"""`ncclcheck bench --nproc 32`: every worker is gone within seconds of the deadline.

The workers run in a process group of their own (not the command's), so teardown is one
signal to that group whatever --nproc; the command itself is started here in a session of its
own, and the session is searched for survivors once it has exited.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow


def session_members(sid: int) -> list[tuple[int, int]]:
    """(pid, process group) of every live process in session ``sid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, pgrp, session = fields[0], int(fields[2]), int(fields[3])
        if session == sid and state != "Z":
            found.append((int(entry), pgrp))
    return found


def test_bench_with_32_workers_leaves_no_process_behind():
    timeout = 10
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE",
                                                                     "MASTER_", "LOCAL_"))}
    began = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "ncclcheck", "bench", "--backend", "gloo",
                             "--nproc", "32", "--timeout", str(timeout), "--format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    seen_groups: set[int] = set()
    while proc.poll() is None and time.monotonic() - began < timeout + 30:
        seen_groups |= {g for _, g in session_members(proc.pid)} - {proc.pid}
        time.sleep(0.5)
    try:
        out, err = proc.communicate(timeout=1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
    elapsed = time.monotonic() - began
    assert elapsed < timeout + 8, (elapsed, err[-2000:])
    assert seen_groups, "the workers never ran in a process group of their own"
    time.sleep(0.5)
    left = session_members(proc.pid)
    try:
        assert left == [], f"{len(left)} processes left behind: {left[:5]}"
    finally:
        for group in seen_groups:
            try:
                os.killpg(group, 9)
            except ProcessLookupError:
                pass
