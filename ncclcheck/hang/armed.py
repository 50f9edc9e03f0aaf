"""The armed way: a training process that writes its own stacks, and its flight recorder, when
``ncclcheck hang`` asks with a signal.

Where nothing may read a process from outside (a container without SYS_PTRACE, another user's
job), the process can still say where it is. One line at the top of the training script,

    from ncclcheck.hang import arm; arm()

or, without touching the script, the job's command run through this module
(``torchrun ... -m ncclcheck.hang.armed train.py ARGS``, ``python -m ncclcheck.hang.armed
train.py ARGS``, ``-m ncclcheck.hang.armed -m package.module ARGS``),
registers Python's faulthandler on a signal (SIGUSR2 unless told otherwise): on that signal the
interpreter itself writes every thread's stack to a file of this process's, from C, even while
the main thread is blocked in a collective or holds the GIL. A small daemon thread watches that
file; when it grows it adds the thread names and, where torch has one, the flight recorder's
dump. A marker file beside them says which signal to send, and to which process (pid and start
time, so a reused pid is never signalled). ``ncclcheck hang`` sends the signal only to a process
whose kernel status shows a handler for it (SigCgt): an unarmed process, which that signal
would kill, is never sent one.

This module runs inside the training process: the standard library only, nothing at import.
"""

from __future__ import annotations

import faulthandler
import json
import os
import runpy
import signal
import socket
import sys
import tempfile
import threading
import time
from typing import IO, Any

DEFAULT_SIGNAL = signal.SIGUSR2
DIR_VARIABLE = "NCCLCHECK_HANG_DIR"   # where armed processes write (default: <tmp>/ncclcheck-hang)
MARKER_KEY = "ncclcheck_armed"
WATCH_S = 0.2
_RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                   "NODE_RANK", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS",
                   "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE",
                   "PMI_RANK", "PMI_SIZE", "TORCHELASTIC_RUN_ID", "MASTER_PORT")

_armed: dict[str, Any] = {}


def armed_dir(env: Any = None) -> str:
    """Where armed processes write: $NCCLCHECK_HANG_DIR, else a folder in the temp directory."""
    env = os.environ if env is None else env
    return env.get(DIR_VARIABLE) or os.path.join(tempfile.gettempdir(), "ncclcheck-hang")


def start_ticks(pid: int | str = "self") -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat, field 22)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _write_json(path: str, data: dict[str, Any]) -> None:
    """Atomically: a reader never sees half a file."""
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)


def _flight_recorder() -> bytes | None:
    """torch's flight-recorder dump (pickle), where torch.distributed is loaded and has one.
    Without stack traces: symbolising them imports half of torch (seconds), and the stacks
    are what faulthandler just wrote."""
    c10d = sys.modules.get("torch._C._distributed_c10d")
    if c10d is None:
        return None
    for name in ("_dump_fr_trace", "_dump_nccl_trace"):
        dump = getattr(c10d, name, None)
        if dump is None:
            continue
        try:
            try:
                return bytes(dump(includeCollectives=True, includeStackTraces=False,
                                  onlyActive=False))
            except TypeError:  # a release whose binding takes no keywords
                return bytes(dump())
        except Exception:  # a dump that fails must never disturb the job
            return None
    return None


def _watch(stacks: str, base: str) -> None:
    """Each time faulthandler adds to the stacks file: the thread names, the flight recorder."""
    seen = os.path.getsize(stacks) if os.path.exists(stacks) else 0
    while _armed.get("base") == base:
        time.sleep(WATCH_S)
        try:
            size = os.path.getsize(stacks)
        except OSError:
            continue
        if size <= seen:
            continue
        seen = size
        try:
            names = {str(t.ident): t.name for t in threading.enumerate() if t.ident}
            fr = _flight_recorder()
            if fr:
                with open(f"{base}.fr.tmp", "wb") as handle:
                    handle.write(fr)
                os.chmod(f"{base}.fr.tmp", 0o644)
                os.replace(f"{base}.fr.tmp", f"{base}.fr")
            _write_json(f"{base}.done.json", {"size": size, "names": names,
                                              "fr": bool(fr), "time": time.time()})
        except OSError:
            continue


def arm(signum: int = DEFAULT_SIGNAL, folder: str | None = None) -> str:
    """Make this process write its stacks (and flight recorder) on ``signum``; returns the
    marker file's path. Calling it again changes nothing."""
    if _armed.get("marker"):
        return str(_armed["marker"])
    folder = folder or armed_dir()
    if not os.path.isdir(folder):
        os.makedirs(folder, exist_ok=True)
        try:
            os.chmod(folder, 0o1777)  # shared like /tmp: every user's job may arm
        except OSError:
            pass
    base = os.path.join(folder, f"{socket.gethostname()}-{os.getpid()}")
    stacks: IO[str] = open(f"{base}.stacks", "w", encoding="utf-8")
    os.chmod(f"{base}.stacks", 0o644)
    previous = signal.getsignal(signum)
    chain = previous not in (signal.SIG_DFL, signal.SIG_IGN, None)
    faulthandler.register(signum, file=stacks, all_threads=True, chain=chain)
    marker = f"{base}.json"
    _armed.update(base=base, marker=marker, file=stacks, signum=signum)
    _write_json(marker, {
        MARKER_KEY: 1, "pid": os.getpid(), "start_ticks": start_ticks(),
        "host": socket.gethostname(), "signal": int(signum), "stacks": f"{base}.stacks",
        "done": f"{base}.done.json", "fr": f"{base}.fr",
        "main_ident": threading.main_thread().ident,
        "env": {k: os.environ[k] for k in _RANK_VARIABLES if k in os.environ}})
    threading.Thread(target=_watch, args=(f"{base}.stacks", base), name="ncclcheck-armed",
                     daemon=True).start()
    return marker


def disarm() -> None:
    """Undo arm(): the signal's handler, the watcher and the files."""
    base = _armed.pop("base", None)
    if base is None:
        return
    faulthandler.unregister(_armed.pop("signum"))
    _armed.pop("file").close()
    _armed.pop("marker", None)
    for suffix in (".json", ".stacks", ".done.json", ".fr"):
        try:
            os.unlink(base + suffix)
        except OSError:
            pass


def main(argv: list[str] | None = None) -> None:
    """``python -m ncclcheck.hang.armed SCRIPT ARGS`` (or ``-m MODULE ARGS``): arm, then run the
    script as its own ``__main__``, as ``python SCRIPT ARGS`` would."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or (argv[0] == "-m" and len(argv) < 2):
        print("usage: python -m ncclcheck.hang.armed SCRIPT [ARGS] | -m MODULE [ARGS]",
              file=sys.stderr)
        raise SystemExit(2)
    # this file runs as __main__: the package's copy of it (imported by ncclcheck.hang first)
    # keeps the state, so that a later `from ncclcheck.hang import arm; arm()` finds it armed
    package = sys.modules.get("ncclcheck.hang.armed")
    (package.arm if package is not None else arm)()
    if argv[0] == "-m":
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
