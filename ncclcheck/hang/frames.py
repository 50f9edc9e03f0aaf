"""Which frames of a stack matter: the innermost frame of the user's own code, and the
collective the rank is in, if any; and which thread speaks for the process.

A rank's stack is thirty frames of framework and standard library around two that say where it
is: the line of the training script it stands on and the torch.distributed call below it. The
deciding thread is the main one: the watchdog, pin-memory, store and timer threads are always
waiting somewhere and say nothing about the hang; only when the main thread shows neither the
user's code nor a collective (a framework that trains in a thread of its own) does another
thread speak, and never one of the known idle loops. Classifying a file is cached: a 10,240-rank
job has 300,000 frames and a few hundred distinct files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ncclcheck.hang.model import Frame, ThreadStack

# torch.distributed's calls every member of a group must make (the Python API, the object
# collectives, the functional ones), and the calls that wait for everyone to start.
COLLECTIVES = frozenset({
    "all_reduce", "all_reduce_coalesced", "all_gather", "all_gather_into_tensor",
    "all_gather_coalesced", "all_gather_object", "reduce_scatter", "reduce_scatter_tensor",
    "all_to_all", "all_to_all_single", "broadcast", "broadcast_object_list", "reduce", "gather",
    "gather_object", "scatter", "scatter_object_list", "barrier", "monitored_barrier", "send",
    "recv", "send_object_list", "recv_object_list", "batch_isend_irecv", "init_process_group",
    "new_group", "new_subgroups", "destroy_process_group", "wait_tensor", "_store_based_barrier",
    "all_reduce_inplace", "all_gather_tensor", "reduce_scatter_tensor_coalesced",
    "_all_gather_base", "_reduce_scatter_base",
})
_DISTRIBUTED_FILES = re.compile(r"torch/distributed/(?:distributed_c10d|_functional_collectives|"
                                r"c10d_logger|rendezvous)\.py$")
# Where DDP's gradient all-reduce (C++ hooks) runs: a rank blocked there waits for the others.
_BACKWARD = re.compile(r"torch/autograd/(?:__init__|graph)\.py$")
_BACKWARD_FUNCTIONS = frozenset({"backward", "_engine_run_backward", "run_backward"})
_LIBRARY = re.compile(r"/(?:site|dist)-packages/|/lib/python\d+(?:\.\d+)?/|^<frozen "
                      r"|/lib/pypy\d|^<(?!string>|stdin>)[^>]*>$")
# Threads that only wait for work: their stacks never speak for the process.
IDLE_LOOPS = frozenset({"_pin_memory_loop", "_worker_loop", "_run", "_monitor", "run_forever",
                        "_handle_workers", "_handle_tasks", "_handle_results", "serve_forever",
                        "_watch", "_feed", "_thread_receiver"})
_IDLE_FILES = re.compile(r"torch/utils/data/_utils/|tqdm/_monitor\.py$|torch/_inductor/|"
                         r"concurrent/futures/|multiprocessing/|elastic/|rendezvous/utils\.py$|"
                         r"ncclcheck/hang/armed\.py$|/wandb/|tensorboard|queue\.py$")


@lru_cache(maxsize=8192)
def is_library(file: str) -> bool:
    """Whether a file is the standard library or an installed package, not the user's code."""
    return bool(_LIBRARY.search(file.replace("\\", "/")))


@lru_cache(maxsize=8192)
def _distributed(file: str) -> bool:
    return bool(_DISTRIBUTED_FILES.search(file.replace("\\", "/")))


@lru_cache(maxsize=1024)
def _backward(file: str) -> bool:
    return bool(_BACKWARD.search(file.replace("\\", "/")))


@dataclass(frozen=True)
class Where:
    """A rank's place: the collective it is in (None outside any), the innermost frame of the
    user's code, and the innermost frame of all (where it actually waits or runs)."""

    collective: str | None
    user: Frame | None
    inner: Frame | None
    thread: str | None = None

    @property
    def key(self) -> tuple[str | None, str | None, str | None, int | None]:
        """What ranks share when they are at the same place (the innermost library frame's
        line is left out: inside a collective it moves between launch and wait)."""
        frame = self.user or self.inner
        return (self.collective, frame.function if frame else None,
                frame.file if frame else None, frame.line if frame else None)

    def describe(self) -> str:
        """``all_reduce <- step (train.py:55)`` or ``load_batch (train.py:41)``."""
        frame = self.user or self.inner
        place = frame.short() if frame else "no Python frame"
        return f"{self.collective} <- {place}" if self.collective else place


def collective_of(frames: list[Frame]) -> str | None:
    """The outermost torch.distributed call in the stack (what the user called: all_gather_object
    rather than the all_gather inside it), or DDP's backward."""
    found = None
    for frame in frames:  # innermost first: the last match is the outermost
        if frame.function in COLLECTIVES and _distributed(frame.file):
            found = frame.function
    if found is None:
        for frame in frames:
            if frame.function in _BACKWARD_FUNCTIONS and _backward(frame.file):
                return "backward"
    return found


def where(thread: ThreadStack) -> Where:
    frames = thread.frames
    user = next((f for f in frames if not is_library(f.file)), None)
    return Where(collective_of(frames), user, frames[0] if frames else None, thread.name)


def is_idle_loop(thread: ThreadStack) -> bool:
    """A framework thread waiting for work (pin-memory, DataLoader, timers, monitors, store)."""
    if not thread.frames:
        return True
    for frame in thread.frames:
        if frame.function in IDLE_LOOPS or _IDLE_FILES.search(frame.file.replace("\\", "/")):
            return True
    return all(is_library(f.file) for f in thread.frames) and any(
        f.function in ("_bootstrap", "_bootstrap_inner") for f in thread.frames[-2:])


_PARKED = frozenset({"join", "_wait_for_tstate_lock", "wait", "result", "get", "acquire"})


def _parked(thread: ThreadStack) -> bool:
    """A main thread that only waits for another thread of its own (``Thread.join``, a future's
    result): the training runs in that other thread."""
    inner = thread.frames[0] if thread.frames else None
    return inner is not None and inner.function in _PARKED and is_library(inner.file) and \
        collective_of(thread.frames) is None


def deciding_thread(threads: list[ThreadStack], pid: int | None = None) -> ThreadStack | None:
    """The thread that says where the process is: the main thread when it shows a collective, or
    the user's code without merely waiting for a thread of its own; else another thread that
    shows a collective (first) or the user's code and is no idle loop; else the main thread."""
    if not threads:
        return None
    main = next((t for t in threads if t.main), None) or next(
        (t for t in threads if t.name == "MainThread" or (pid and t.native_id == pid)), None)
    if main is not None:
        place = where(main)
        if place.collective or (place.user and not _parked(main)):
            return main
    others = [t for t in threads if t is not main and not is_idle_loop(t)]
    for wanted in ("collective", "user"):
        for thread in others:
            if getattr(where(thread), wanted):
                return thread
    return main or threads[0]
