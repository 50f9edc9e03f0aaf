"""Asking an armed process (armed.py) for its stacks: find its marker, check that it is the same
process and that it catches the signal, send it, read what it wrote.

Three checks stand before any signal: the marker names this pid, the process's start time is
the marker's (a pid the kernel reused for another program is never signalled), and the kernel
shows a handler for that signal in the process's SigCgt mask (a process that disarmed, or never
armed, would be killed by it). Everything else is reading files the process wrote.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from ncclcheck.hang.armed import MARKER_KEY, armed_dir, start_ticks
from ncclcheck.hang.faulttext import parse
from ncclcheck.hang.model import Problem, ThreadStack
from ncclcheck.hang.procstate import caught_signals

POLL_S = 0.05
SETTLE_S = 0.15      # the stacks file has stopped growing for this long: the dump is whole
DONE_WAIT_S = 2.0    # how long the watcher thread may take to add names and the flight recorder


@dataclass
class Marker:
    """What an armed process said of itself."""

    pid: int
    start_ticks: int | None
    signal: int
    stacks: str
    done: str
    fr: str
    main_ident: int | None
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Answer:
    """What one signal brought: the threads, the flight recorder's bytes, or why not."""

    threads: list[ThreadStack]
    fr: bytes | None = None
    problem: Problem | None = None


def _load(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def find_marker(pid: int, folder: str | None = None) -> Marker | None:
    """The marker of ``pid`` in the armed folder, when that process armed itself."""
    folder = folder or armed_dir()
    paths = [os.path.join(folder, f"{socket.gethostname()}-{pid}.json")]
    paths += sorted(set(glob.glob(os.path.join(glob.escape(folder), f"*-{pid}.json"))) - set(paths))
    for path in paths:
        data = _load(path)
        if not data or data.get(MARKER_KEY) != 1 or data.get("pid") != pid:
            continue
        try:
            return Marker(pid, data.get("start_ticks"), int(data["signal"]), str(data["stacks"]),
                          str(data["done"]), str(data["fr"]), data.get("main_ident"),
                          {str(k): str(v) for k, v in (data.get("env") or {}).items()})
        except (KeyError, TypeError, ValueError):
            continue
    return None


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return -1


def ask(marker: Marker, timeout: float) -> Answer:
    """Send the marker's signal and read the stacks written, within ``timeout`` seconds."""
    if marker.start_ticks is not None and start_ticks(marker.pid) != marker.start_ticks:
        return Answer([], problem=Problem(
            f"pid {marker.pid} is not the process that armed itself (it started at another "
            "time): no signal sent"))
    if not caught_signals(marker.pid) & (1 << (marker.signal - 1)):
        return Answer([], problem=Problem(
            f"pid {marker.pid} does not catch signal {marker.signal} (disarmed): no signal sent"))
    before = _size(marker.stacks)
    if before < 0:
        return Answer([], problem=Problem(f"cannot read {marker.stacks}"))
    sent = time.time()
    try:
        os.kill(marker.pid, marker.signal)
    except ProcessLookupError:
        return Answer([], problem=Problem("the process exited while it was asked"))
    except PermissionError:
        return Answer([], problem=Problem(f"not allowed to signal pid {marker.pid}",
                                          "run ncclcheck hang as the job's user (or as root)"))
    deadline = time.monotonic() + timeout
    size, stable_since = before, time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(POLL_S)
        now = _size(marker.stacks)
        if now != size:
            size, stable_since = now, time.monotonic()
        elif size > before and time.monotonic() - stable_since >= SETTLE_S:
            break
    if size <= before:
        return Answer([], problem=Problem(
            f"pid {marker.pid} wrote no stacks within {timeout:.1f} s"))
    with open(marker.stacks, "rb") as handle:
        handle.seek(before)
        text = handle.read(size - before).decode("utf-8", "replace")
    done = _wait_done(marker, size, min(deadline, time.monotonic() + DONE_WAIT_S))
    names = {int(k): str(v) for k, v in (done or {}).get("names", {}).items() if k.isdigit()}
    threads = parse(text, names, marker.main_ident)
    fr = None
    if done and done.get("fr"):
        try:
            if os.path.getmtime(marker.fr) >= sent - 1:
                with open(marker.fr, "rb") as handle:
                    fr = handle.read()
        except OSError:
            fr = None
    return Answer(threads, fr)


def _wait_done(marker: Marker, size: int, deadline: float) -> dict[str, Any] | None:
    """The watcher's note for this dump (thread names, whether it wrote the flight recorder);
    None when its thread could not run in time (the GIL held), which only loses the names."""
    while True:
        done = _load(marker.done)
        if done and int(done.get("size") or 0) >= size:
            return done
        if time.monotonic() >= deadline:
            return None
        time.sleep(POLL_S)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
