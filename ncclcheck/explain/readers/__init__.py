"""The readers of a run: each module here reads one kind of evidence, and the engine calls
every one of them without knowing what it does.

A reader module defines ``READER = Reader(name, order, ...)`` with up to three hooks: ``line``
(each candidate line of each file, in reading order), ``file_end`` (a file's first and last
lines, once it is read) and ``run`` (once every file is read). It adds evidence to
``run.findings`` with the role and weight it sees (evidence.py), facts to the run's context,
lines to what the guessers read, notes; it never chooses the root cause (arbiter.py does).
``kinds`` says which candidate lines it is handed (scan.py's flags). ``order`` is when it
reads among the others: the signatures claim a line before anyone asks
who claimed it, and a reader that explains other evidence (the context rules) reads after the
evidence it explains. Adding a reader is adding a module here (docs/architecture.md).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from ncclcheck.explain.run import Line, Run
from ncclcheck.explain.scan import CONTEXT, ERROR, GATE, INFO, RATE  # noqa: F401 (readers' kinds)

LineHook = Callable[[Run, Line], None]
FileEndHook = Callable[[Run, str, list[tuple[int, str]]], None]
RunHook = Callable[[Run], None]


@dataclass(frozen=True)
class Reader:
    """One reader: its name, when it reads, and what it reads."""

    name: str
    order: int
    line: LineHook | None = None
    file_end: FileEndHook | None = None
    run: RunHook | None = None
    # the kinds of candidate line it reads (scan.py's GATE, INFO, CONTEXT, ERROR, RATE bits): a
    # line goes only to the readers of one of its kinds (a debug log is mostly NCCL INFO)
    kinds: int = GATE | INFO | CONTEXT | ERROR


@lru_cache(maxsize=1)
def readers() -> tuple[Reader, ...]:
    """Every reader of this package, in declared order (found once per process: modules do
    not change while it runs)."""
    found = []
    for info in pkgutil.iter_modules(__path__, __name__ + "."):
        reader = getattr(importlib.import_module(info.name), "READER", None)
        if isinstance(reader, Reader):
            found.append(reader)
    return tuple(sorted(found, key=lambda r: (r.order, r.name)))
