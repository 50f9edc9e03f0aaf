"""Snapshots of a live hang (``ncclcheck hang``, or the files its ``--out`` wrote on every
node): the rank that holds the others up, as a decisive cause; notes when the job moves, when
the snapshots are incomplete or could not be read.

The snapshots of every node in the folder are joined into one job (ncclcheck/hang/files.py)
and judged once (ncclcheck/hang/verdict.py): ranks that wait in one collective are the
consequence, the culprits outside it are the cause, as the flight recorder's dumps say after
the watchdog fired.
"""

from __future__ import annotations

from ncclcheck.explain.findings import Hit
from ncclcheck.explain.notes import Note
from ncclcheck.explain.reader import InputError
from ncclcheck.explain.readers import Reader
from ncclcheck.explain.run import Run


def read_snapshots(run: Run) -> None:
    if not run.snapshots:
        return
    # deferred: the hang command's snapshot files and verdict, only for a run given snapshots
    from ncclcheck.hang.facts import notes, state
    from ncclcheck.hang.files import Loaded, SnapshotError, join, load  # deferred: as above
    from ncclcheck.hang.verdict import judge_job  # deferred: as above
    loaded: list[Loaded] = []
    names: dict[tuple[str, int], str] = {}
    for source in run.snapshots:
        try:
            stream = source.open()
            try:
                item = load(stream, source.name)
            finally:
                if source.path is not None:
                    stream.close()
        except (SnapshotError, InputError, OSError) as exc:
            run.notes.append(Note("hang.unreadable_snapshot", str(exc)))
            continue
        loaded.append(item)
        if item.process is not None:
            names[(item.process.host, item.process.pid)] = source.name
    processes, nodes = join(loaded)
    verdict = judge_job(processes, nodes)
    for note_id, text in notes(verdict):
        run.notes.append(Note(note_id, text))
    stated = state(verdict)
    if stated is None:
        return
    sig = run.catalogue.by_rule(stated.rule)
    where = names.get((stated.host or "", stated.pid or -1)) or (
        run.snapshots[0].name if run.snapshots else "snapshot")
    run.findings.add(Hit(sig, stated.facts, where, 0, stated.text, stated.rank, stated.host,
                         None, run.findings.hits))


READER = Reader("hang_snapshots", 45, run=read_snapshots)
