"""The job's flight-recorder dumps (hangs.py): the rank that never arrived or called something
else, as a decisive cause; notes for dumps that do not read or show no disagreement."""

from __future__ import annotations

from ncclcheck.explain.readers import Reader
from ncclcheck.explain.run import Run


def read_run(run: Run) -> None:
    if not run.dumps:
        return  # no dump given: the flight recorder's machinery is not even loaded
    # deferred: pickle and the dumps' analysis, only for a run given dumps
    from ncclcheck.explain.hangs import add_hang, read_dumps
    job = read_dumps(run.dumps)
    notes = add_hang(run.findings, job, run.catalogue)[1]
    run.notes += job.notes + notes


READER = Reader("dumps", 40, run=read_run)
