"""Ask the real libnccl, in a child process under a deadline.

Loading a library runs its constructors; a broken or mismatched libnccl can abort, segfault or
hang right there. The child (``_child.py``) does the loading, so ncclcheck itself survives
and reports whatever the child managed to say before it died.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ncclcheck.ncclib.version import NcclVersion, decode

CHILD = Path(__file__).with_name("_child.py")
# The subsystems whose INFO lines tell the bootstrap choice and the plugin loading.
DEBUG_SUBSYS = "INIT,BOOTSTRAP,ENV,NET"
_BOOTSTRAP = re.compile(r"Bootstrap ?: Using \[?\d*\]?(?P<ifname>[^:\s]+):"
                        r"(?P<address>\S+?)<(?P<port>\d+)>")
_NO_INTERFACE = re.compile(r"Bootstrap ?: no socket interface found")
_NCCL_LINE = re.compile(r"NCCL (?P<level>INFO|WARN) (?P<msg>.*)$")


@dataclass
class BootstrapChoice:
    """What ncclGetUniqueId said about the interface it bootstraps on."""

    interface: str | None = None
    address: str | None = None
    no_interface: bool = False
    rc: int | None = None
    last_error: str = ""


@dataclass
class LibraryAnswer:
    """Everything the child reported. ``outcome`` is "ok", "load_error", "crashed", "hung" or
    "incomplete" (exited before finishing without a signal)."""

    library: str
    outcome: str
    seconds: float
    loaded_paths: list[str] = field(default_factory=list)
    version_code: int | None = None
    version: NcclVersion | None = None
    error_strings: dict[int, str] = field(default_factory=dict)
    bootstrap: BootstrapChoice | None = None
    stage: str = "start"          # the last stage the child reported
    load_error: str | None = None
    signal: str | None = None
    returncode: int | None = None
    log: list[str] = field(default_factory=list)   # NCCL INFO/WARN lines, bounded
    stderr_tail: str = ""

    def describe_stage(self) -> str:
        return {"start": "while loading the library", "loaded": "in ncclGetVersion",
                "version": "in ncclGetErrorString", "errors": "in ncclGetUniqueId",
                "unique_id": "after answering", "exception": "in a call",
                "load_error": "while loading"}.get(self.stage, self.stage)


def child_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The job's environment plus what makes NCCL say its choices; never the user's log file.

    NCCL_DEBUG_FILE is set, not just dropped: NCCL fills unset variables from its config files
    (setenv without overwrite), so a NCCL_DEBUG_FILE in nccl.conf would otherwise send the log
    into the user's file and away from us. /dev/stdout is the pipe the parent reads, and NCCL
    line-buffers it."""
    child = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    child["NCCL_DEBUG"] = "INFO"
    child["NCCL_DEBUG_SUBSYS"] = DEBUG_SUBSYS
    child["NCCL_DEBUG_FILE"] = "/dev/stdout"
    child.setdefault("PATH", os.environ.get("PATH", "/usr/bin:/bin"))
    return child


def parse_bootstrap(lines: list[str]) -> BootstrapChoice:
    choice = BootstrapChoice()
    for line in lines:
        match = _BOOTSTRAP.search(line)
        if match and choice.interface is None:
            choice.interface, choice.address = match.group("ifname"), match.group("address")
        if _NO_INTERFACE.search(line):
            choice.no_interface = True
    return choice


def ask_library(library: str, env: Mapping[str, str], timeout: float) -> LibraryAnswer:
    """Load ``library`` in a child and collect its answers within ``timeout`` seconds."""
    read_fd, write_fd = os.pipe()
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", str(CHILD), library, str(write_fd)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=child_environment(env), pass_fds=(write_fd,), start_new_session=True)
    except OSError as exc:
        os.close(read_fd)
        answer = LibraryAnswer(library, "load_error", 0.0, load_error=f"cannot start: {exc}")
        return answer
    finally:
        os.close(write_fd)
    hung = False
    try:
        out, err = proc.communicate(timeout=max(0.5, timeout))
    except subprocess.TimeoutExpired:
        hung = True
        _kill_group(proc)
        try:  # a descendant that left the session could keep the pipes open: do not wait on it
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = b"", b""
    seconds = time.monotonic() - started
    answers = _parse_answers(_drain(read_fd))
    answer = LibraryAnswer(library, "ok", round(seconds, 3), returncode=proc.returncode)
    text = (out or b"").decode("utf-8", "replace") + "\n" + (err or b"").decode("utf-8", "replace")
    answer.log = [line.strip() for line in text.splitlines() if _NCCL_LINE.search(line)][:200]
    answer.stderr_tail = (err or b"").decode("utf-8", "replace")[-2000:]
    for item in answers:
        _apply(answer, item)
    if hung:
        answer.outcome = "hung"
    elif proc.returncode is not None and proc.returncode < 0:
        answer.outcome = "crashed"
        answer.signal = _signal_name(-proc.returncode)
    elif answer.load_error is not None:
        answer.outcome = "load_error"
    elif answer.stage != "unique_id":
        answer.outcome = "incomplete"
    if answer.bootstrap is not None or answer.stage in ("errors", "unique_id"):
        choice = parse_bootstrap(answer.log)
        if answer.bootstrap is not None:
            choice.rc, choice.last_error = answer.bootstrap.rc, answer.bootstrap.last_error
            if _NO_INTERFACE.search(choice.last_error):
                choice.no_interface = True
        answer.bootstrap = choice
    return answer


def _apply(answer: LibraryAnswer, item: dict) -> None:
    stage = item.get("stage", "")
    answer.stage = stage
    if stage == "load_error":
        answer.load_error = item.get("error", "")
    elif stage == "exception":
        answer.load_error = item.get("error", "")
    elif stage == "loaded":
        answer.loaded_paths = list(item.get("maps", []))
    elif stage == "version":
        if item.get("rc") == 0:
            answer.version_code = int(item.get("code", 0))
            try:
                answer.version = decode(answer.version_code)
            except ValueError:
                answer.version = None
    elif stage == "errors":
        answer.error_strings = {int(k): v for k, v in item.get("strings", {}).items()}
    elif stage == "unique_id":
        answer.bootstrap = BootstrapChoice(rc=item.get("rc"), last_error=item.get("last_error", ""))


def _parse_answers(text: str) -> list[dict]:
    """One JSON object per line; a line cut short by a crash is dropped."""
    answers = []
    for line in text.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            answers.append(item)
    return answers


def _drain(fd: int) -> str:
    """Whatever the child wrote on its answer pipe, without waiting for writers that linger."""
    os.set_blocking(fd, False)
    chunks = []
    try:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the child leads its own session: only its tree
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
