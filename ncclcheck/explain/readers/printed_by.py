"""Who printed a line, for the readers after the signatures: a launcher's own report of a
death (printers.py) and a line a signature knows as a consequence are left out of what the
guessers (the text model, the keyword cues) read. Both say how the run ended or that something
failed elsewhere, never why; leaving them out keeps a guess the same when a launcher's tail or
other ranks' consequence lines are added to a log."""

from __future__ import annotations

from ncclcheck.explain.evidence import Role, role_of
from ncclcheck.explain.printers import printed_by_launcher
from ncclcheck.explain.readers import Reader
from ncclcheck.explain.run import Line, Run


def read_line(run: Run, line: Line) -> None:
    if line.claim is None and "NCCL INFO" in line.text:
        return  # NCCL's own INFO line: no launcher prints one (most lines of a debug log)
    line.guessable = not printed_by_launcher(line.text, line.info.message) and (
        line.claim is None or role_of(*line.claim) is Role.CAUSE)
    if not line.guessable:
        run.state.setdefault(("unguessed", line.file), set()).add(line.number)


READER = Reader("printed_by", 1, line=read_line)
