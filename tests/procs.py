"""Collecting several test processes: each one's exit code and output, none left running."""

from __future__ import annotations

import subprocess


def collect(procs: list[subprocess.Popen], limit: float) -> list[tuple[int, str, str]]:
    """[(returncode, stdout, stderr)] in the order given; a process still running after
    ``limit`` seconds (or left when another one failed) is killed."""
    outs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=limit)
            outs.append((proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return outs
