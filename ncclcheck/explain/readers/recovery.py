"""Runs that recovered: a failure the run went on from is a note, not the root cause.

A job that failed once and finished after torchrun restarted its workers, or that logged an
exception it handled and trained on, printed a failure and a completion after it. What decides
is the order in each file: a completion (torchrun's "worker group successfully finished",
Lightning's "`Trainer.fit` stopped: `max_epochs=2` reached", a "training finished") after the
last failure line means those failures did not end the run. The failures stay visible in a
note naming them; no finding with a category is left, and the guessers' readings of those
lines give no hypothesis (the contract: a clean log has none).
"""

from __future__ import annotations

import re
from collections import deque

from ncclcheck.explain.notes import Note
from ncclcheck.explain.readers import CONTEXT, ERROR, GATE, Reader
from ncclcheck.explain.run import Line, Run

COMPLETED = re.compile(
    r"worker group successfully finished|WorkerState\.SUCCEEDED|"        # torchrun's agent
    r"`Trainer\.(?:fit|validate|test|predict)` stopped: `max_(?:epochs|steps)=|"  # Lightning
    r"(?i:\btraining (?:is )?(?:finished|completed?|done)\b|\bfinished training\b)")
KEY = "recovery"
RECENT = 64  # a file's latest failure-looking lines kept to judge after a completion


# What a completion line holds, looked for before its pattern (most lines hold none).
_COMPLETION_WORDS = ("inish", "SUCCEEDED", "stopped", "omplete", "done")


def read_line(run: Run, line: Line) -> None:
    cand = line.candidate
    if not (cand.error or cand.gated or cand.context):
        return  # NCCL INFO, a rate: neither a failure nor a completion
    message = line.info.message
    state = run.state.setdefault(KEY, {})
    if any(word in message for word in _COMPLETION_WORDS) and COMPLETED.search(message):
        completed = state.setdefault("completed", {})
        completed[line.file] = max(completed.get(line.file, 0), line.number)
    elif cand.error or cand.gated:
        # the file's latest lines that may show a failure, judged only if the run completed
        # (most runs never print a completion: no line's weight is read for them)
        recent = state.setdefault("recent", {}).setdefault(line.file, deque(maxlen=RECENT))
        recent.append(line)


def read_edges(run: Run, file: str, edges: list[tuple[int, str]]) -> None:
    """A completion is mostly among a file's last lines, which hold no failure word and so
    are no candidates: the file's edges are read for it."""
    done = [number for number, text in edges if COMPLETED.search(text)]
    if done:
        completed = run.state.setdefault(KEY, {}).setdefault("completed", {})
        completed[file] = max(completed.get(file, 0), *done)


def read_run(run: Run) -> None:
    state = run.state.get(KEY, {})
    completed = state.get("completed", {})
    if not completed or not run.findings.by_id:
        return
    failed = {}  # file -> its latest line that shows a failure, among those kept
    for file, recent in state.get("recent", {}).items():
        latest = next((line.number for line in reversed(recent) if line.weight >= 2), 0)
        if latest:
            failed[file] = latest
    last = run.findings.last_line
    recovered = {f: line for f, line in completed.items()
                 if line > max(failed.get(f, 0), last.get(f, 0))}
    if not recovered:
        return
    run.findings.recovered.update(recovered)
    earlier = [f for f in run.findings.by_id.values() if f.recovered(recovered)]
    if not earlier:
        return
    first = min(earlier, key=lambda f: f.first.order).first
    run.notes.append(Note("explain.recovered", (
        f"the run hit a failure ({first.signature.title}, {first.file}:{first.line}) and went on: "
        f"it completed afterwards ({', '.join(f'{f}:{n}' for f, n in recovered.items())}), so "
        "that failure is not why it ended; it may still be worth fixing")))


READER = Reader("recovery", 90, line=read_line, file_end=read_edges, run=read_run,
                kinds=GATE | CONTEXT | ERROR)
