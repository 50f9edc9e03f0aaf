"""Every thread's Python stack of another process, read with py-spy.

py-spy reads the target's memory from outside (process_vm_readv): the target runs no code of
ours and needs no preparation. ``--nonblocking`` keeps it from pausing the target, so the job
is never stopped, even for a moment; a stack read while the interpreter moves may be torn, and
is then read again. Reading another process's memory needs ptrace rights (the same user, or
CAP_SYS_PTRACE; a container without SYS_PTRACE has neither for its neighbours): when they are
missing, the reason and its fix are said per process, and the caller tries the other ways.

py-spy is a dependency (a static binary in its wheel, x86_64 and aarch64); it is found beside
this interpreter first, then on the PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

from ncclcheck.hang.model import Problem, ThreadStack, frame

SYS_PTRACE_FIX = ("give the container CAP_SYS_PTRACE (docker run --cap-add SYS_PTRACE; "
                  "Kubernetes securityContext.capabilities.add: [\"SYS_PTRACE\"]) or run "
                  "ncclcheck hang as the job's user{user}; or arm the job so that it writes "
                  "its own stacks (`from ncclcheck.hang import arm; arm()` in the script, or "
                  "`torchrun ... -m ncclcheck.hang.armed train.py`)")
_DENIED = ("permission denied", "operation not permitted", "eperm", "access denied",
           "ptrace", "process_vm_readv")
_GONE = ("no such process", "failed to find process", "esrch", "process has exited")


@dataclass
class SpyResult:
    """The threads read, or why none could be."""

    threads: list[ThreadStack]
    problem: Problem | None = None
    denied: bool = False           # no ptrace rights: another way may work
    gone: bool = False             # the process ended meanwhile


BINARY_VARIABLE = "NCCLCHECK_PYSPY"  # a py-spy to use instead, or "none" to use none


def pyspy_binary() -> str | None:
    """$NCCLCHECK_PYSPY (a path, or "none"), else py-spy next to this interpreter (its wheel's
    script), else on the PATH."""
    chosen = os.environ.get(BINARY_VARIABLE)
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "none") else chosen
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    if os.access(beside, os.X_OK):
        return beside
    return shutil.which("py-spy")


def parse_dump(text: str, pid: int) -> list[ThreadStack]:
    """py-spy ``dump --json`` output: a list of threads, each with its frames innermost first."""
    data = json.loads(text)
    if isinstance(data, dict):  # some versions wrap the list
        data = data.get("threads") or data.get("stack_traces") or []
    threads = []
    for item in data if isinstance(data, list) else []:
        if not isinstance(item, dict):
            continue
        frames = [frame(str(f.get("name") or "?"),
                        str(f.get("filename") or f.get("short_filename") or "?"),
                        int(f.get("line") or 0))
                  for f in item.get("frames") or [] if isinstance(f, dict)]
        native = item.get("os_thread_id")
        name = item.get("thread_name")
        threads.append(ThreadStack(
            item.get("thread_id"), native if isinstance(native, int) else None,
            name if isinstance(name, str) else None, frames,
            idle=(not item["active"]) if isinstance(item.get("active"), bool) else None,
            main=(native == pid) if isinstance(native, int) else (name == "MainThread" or None)))
    return threads


def dump(pid: int, timeout: float, binary: str | None = None, user: int | None = None,
         tries: int = 2) -> SpyResult:
    """The threads of ``pid`` now, within ``timeout`` seconds; ``user`` (the target's uid) makes
    the fix name the user to run as."""
    spy = binary or pyspy_binary()
    if spy is None:
        return SpyResult([], Problem("py-spy is not installed", "pip install py-spy (a "
                                     "dependency of ncclcheck; a wheel for x86_64 and aarch64)"))
    last = ""
    for _ in range(max(1, tries)):
        try:
            done = subprocess.run([spy, "dump", "--pid", str(pid), "--json", "--nonblocking"],
                                  capture_output=True, text=True, timeout=max(0.2, timeout),
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return SpyResult([], Problem(f"py-spy did not answer within {timeout:.1f} s"))
        except OSError as exc:
            return SpyResult([], Problem(f"py-spy could not run: {exc.strerror or exc}"))
        if done.returncode == 0:
            try:
                return SpyResult(parse_dump(done.stdout, pid))
            except (ValueError, TypeError, KeyError) as exc:
                last = f"unreadable py-spy output ({exc})"
                continue
        last = " ".join((done.stderr or done.stdout or "").split())[:300]
        lowered = last.lower()
        if any(word in lowered for word in _GONE):
            return SpyResult([], Problem("the process exited while it was read"), gone=True)
        if any(word in lowered for word in _DENIED):
            who = f" (uid {user})" if user is not None else ""
            return SpyResult([], Problem(f"py-spy cannot read pid {pid}: no ptrace permission "
                                         f"({last[:160]})", SYS_PTRACE_FIX.format(user=who)),
                             denied=True)
    return SpyResult([], Problem(f"py-spy failed on pid {pid}: {last or 'no output'}"))
