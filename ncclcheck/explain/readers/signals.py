"""How a process died, in any wording (signals.py): a SIGKILL where the log speaks of memory, a
SIGBUS where it speaks of shared memory, as a reasoned cause."""

from __future__ import annotations

from ncclcheck.explain.readers import Reader
from ncclcheck.explain.run import Run
from ncclcheck.explain.signals import add_signal_cause


def read_run(run: Run) -> None:
    add_signal_cause(run.findings, run.text, run.catalogue)


READER = Reader("signals", 30, run=read_run)
