"""The text model's reading (textmodel.py, model_reading.py): the lines a run's words are read
from, and, once every file is read, the model's probabilities per category; a confident
reading is a guess at the cause (model_reading.py).

It reads the guessable lines (printed_by.py) that the scanner hands on as errors, NCCL INFO or
context, and each file's first and last lines. A traceback's header is held until the next
line says whose traceback it is: torchrun's own (a frame of torch.distributed's, on to its
ChildFailedError report) is left out (another rank's line printed in between does not decide;
a launcher's report of the death right after it leaves it the job's, cut there).
"""

from __future__ import annotations

from ncclcheck.explain.lines import parse_line
from ncclcheck.explain.model_reading import add_model_reading
from ncclcheck.explain.normalize import without_progress
from ncclcheck.explain.printers import launcher_frame, printed_by_launcher
from ncclcheck.explain.readers import Reader
from ncclcheck.explain.run import Line, Run

TRACEBACK = "Traceback (most recent call last)"


def read_line(run: Run, line: Line) -> None:
    state = run.state.setdefault(("text_model", line.file), {})
    held = state.pop("held", None)
    if held is not None and (line.guessable
                             or _leaves_header_the_jobs(line.text, line.info.message)):
        run.text.feed(line.file, *held)
    elif held is not None and not printed_by_launcher(line.text, line.info.message):
        state["held"] = held  # another rank's consequence in between: still undecided
    cand = line.candidate
    if not line.guessable:
        return
    text, message = without_progress(line.text), without_progress(line.info.message)
    if not text:
        return  # a progress bar says nothing
    if message.startswith(TRACEBACK):
        state["held"] = (line.number, text, message, line.info.severity)
    elif cand.error or cand.info or cand.context:  # never for the gate alone: the model
        # reads the same lines with any engine
        run.text.feed(line.file, line.number, text, message, line.info.severity)


def read_file_end(run: Run, file: str, edges: list[tuple[int, str]]) -> None:
    """How the file began and ended (its launch, its settings, how it stopped)."""
    held = run.state.get(("text_model", file), {}).pop("held", None)
    if held is not None:
        run.text.feed(file, *held)
    unguessed = run.state.get(("unguessed", file), set())
    held = None
    for number, raw in edges:
        text = without_progress(raw)
        if not text:
            continue
        info = parse_line(text)
        message = info.message
        launcher = printed_by_launcher(text, message)
        guessable = number not in unguessed and not launcher
        if held is not None and (guessable or _leaves_header_the_jobs(text, message)):
            run.text.feed(file, *held)
        if guessable or launcher:
            held = None  # decided (else another rank's consequence came in between)
        if guessable and message.startswith(TRACEBACK):
            held = (number, text, message, info.severity)
        elif guessable:
            run.text.feed(file, number, text, message, info.severity)
    if held is not None:
        run.text.feed(file, *held)


def _leaves_header_the_jobs(text: str, message: str) -> bool:
    """Whether a launcher's line after a held traceback header leaves that header the job's:
    any but a frame of the launcher's own traceback (the job's traceback was cut there, and
    the launcher reported the death)."""
    return printed_by_launcher(text, message) and not launcher_frame(message)


def read_run(run: Run) -> None:
    if run.model is not None:
        run.reading = run.model.read(run.text)
    add_model_reading(run.findings, run.reading)


READER = Reader("text_model", 50, line=read_line, file_end=read_file_end, run=read_run)
