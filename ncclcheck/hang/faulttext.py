"""Stacks in faulthandler's text: what a process writes of itself (the armed hook, armed.py) and
what torch's debug server answers (its worker's ``dump_traceback`` handler).

faulthandler names threads by their ``pthread_t`` only, in hexadecimal, innermost frame first:

    Thread 0x00007f42fffdfb80 (most recent call first):
      File "/job/train.py", line 5 in load_batch
      File "/job/train.py", line 15 in main

    Current thread 0x00007f42de0746c0 (most recent call first):
      <no Python frame>

It says nothing of which thread is the main one; the one whose outermost frame is a module's
body (not ``threading``'s bootstrap) is.
"""

from __future__ import annotations

import re

from ncclcheck.hang.model import ThreadStack
from ncclcheck.hang.model import frame as make_frame

_HEADER = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+)(?: \[([^\]]*)\])?"
                     r"(?: \(most recent call first\))?:\s*$")
_FRAME = re.compile(r'^\s+File "(.*)", line (\d+)(?: in (.*))?\s*$')


def parse(text: str, names: dict[int, str] | None = None,
          main_ident: int | None = None) -> list[ThreadStack]:
    """The threads of one faulthandler dump. ``names`` (thread id -> name) and ``main_ident``,
    where the process wrote them, name the threads; otherwise the main thread is guessed from
    its outermost frame."""
    threads: list[ThreadStack] = []
    current: ThreadStack | None = None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            ident = int(header.group(2), 16)
            name = (names or {}).get(ident) or header.group(3) or None
            current = ThreadStack(ident, None, name, [], None, None)
            threads.append(current)
            continue
        frame = _FRAME.match(line)
        if frame and current is not None:
            current.frames.append(make_frame(frame.group(3) or "?", frame.group(1),
                                             int(frame.group(2))))
    threads = [t for t in threads if t.frames]
    if main_ident is not None and any(t.ident == main_ident for t in threads):
        for thread in threads:
            thread.main = thread.ident == main_ident
    else:
        guessed = [t for t in threads if _looks_main(t)]
        for thread in threads:
            thread.main = thread is guessed[-1] if guessed else None
    for thread in threads:
        if thread.main and not thread.name:
            thread.name = "MainThread"
    return threads


def _looks_main(thread: ThreadStack) -> bool:
    outermost = thread.frames[-1]
    return outermost.function == "<module>" and not outermost.file.endswith("threading.py")
