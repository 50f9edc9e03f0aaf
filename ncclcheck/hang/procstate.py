"""A process's state as the kernel tells anyone who asks: /proc/PID/stat, status, wchan and its
threads' own stat and status.

Nothing here needs ptrace or stops the process: these files are world-readable, so the state is
known even where py-spy may not attach. Two readings a moment apart say whether the process is
moving: a rank blocked in a collective shows the same stack, no CPU time and no wake-ups on its
main thread; a rank that loops through collectives shows the same stack and hundreds of
wake-ups a second.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ncclcheck.hang.model import ProcState

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class Gone(Exception):
    """The process no longer exists (it exited while it was being looked at)."""


@dataclass(frozen=True)
class StatLine:
    """The fields of /proc/PID/stat this package reads."""

    comm: str
    state: str
    ppid: int
    cpu_s: float
    threads: int
    start_ticks: int


def read_stat(pid: int, tid: int | None = None) -> StatLine:
    """/proc/PID/stat (or a thread's, /proc/PID/task/TID/stat); Gone when it does not exist."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    try:
        with open(path, "rb") as handle:
            raw = handle.read().decode("utf-8", "replace")
    except (FileNotFoundError, ProcessLookupError):
        raise Gone(pid) from None
    except OSError as exc:  # ESRCH from a process half-way out
        raise Gone(pid) from exc
    head, _, tail = raw.rpartition(")")
    comm = head.partition("(")[2]
    fields = tail.split()
    try:
        return StatLine(comm, fields[0], int(fields[1]),
                        (int(fields[11]) + int(fields[12])) / _TICKS, int(fields[17]),
                        int(fields[19]))
    except (IndexError, ValueError):
        raise Gone(pid) from None


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _voluntary_switches(pid: int, tid: int) -> int | None:
    text = _read_text(f"/proc/{pid}/task/{tid}/status")
    for line in (text or "").splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            try:
                return int(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


def wchan(pid: int, tid: int | None = None) -> str | None:
    """Where in the kernel the thread waits ("futex_do_wait", "hrtimer_nanosleep"); None when
    the kernel hides it or it runs ("0")."""
    path = f"/proc/{pid}/wchan" if tid is None else f"/proc/{pid}/task/{tid}/wchan"
    text = (_read_text(path) or "").strip()
    return text if text and text != "0" else None


def read_state(pid: int) -> ProcState:
    """The process's state now; the main thread is the one whose id is the pid."""
    stat = read_stat(pid)
    try:
        main = read_stat(pid, pid)
        main_cpu: float | None = main.cpu_s
    except Gone:
        main_cpu = None
    return ProcState(stat.state, round(stat.cpu_s, 3), stat.threads, wchan(pid),
                     main_cpu, _voluntary_switches(pid, pid))


def thread_names(pid: int) -> dict[int, str]:
    """The kernel's name of each thread (``comm``: "pt_workerserver", "gloo_tcp_loop")."""
    names: dict[int, str] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return names
    for tid in tids:
        if tid.isdigit():
            text = _read_text(f"/proc/{pid}/task/{tid}/comm")
            if text is not None:
                names[int(tid)] = text.strip()
    return names


def caught_signals(pid: int) -> int:
    """The mask of signals the process has a handler for (SigCgt in /proc/PID/status): a signal
    it does not catch would kill it, so none is ever sent without its bit here."""
    text = _read_text(f"/proc/{pid}/status") or ""
    for line in text.splitlines():
        if line.startswith("SigCgt:"):
            try:
                return int(line.split()[1], 16)
            except (IndexError, ValueError):
                return 0
    return 0


def uid_of(pid: int) -> int | None:
    """The process's real user id (from /proc/PID/status)."""
    text = _read_text(f"/proc/{pid}/status") or ""
    for line in text.splitlines():
        if line.startswith("Uid:"):
            try:
                return int(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


def exists(pid: int) -> bool:
    try:
        return read_stat(pid).state not in ("Z", "X")
    except Gone:
        return False


def moved(first: ProcState | None, last: ProcState | None) -> tuple[float | None, int | None]:
    """(CPU seconds, voluntary wake-ups) of the main thread between two readings; None where a
    reading lacks it."""
    if first is None or last is None:
        return None, None
    cpu = (None if first.main_cpu_s is None or last.main_cpu_s is None
           else round(last.main_cpu_s - first.main_cpu_s, 3))
    switches = (None if first.main_switches is None or last.main_switches is None
                else last.main_switches - first.main_switches)
    return cpu, switches
