"""How fast the run went: step times and throughput that fell several-fold while nothing errors.

A run can fail without an error: a link renegotiated to a lower speed, a GPU that throttles, a
straggler rank, a checkpoint filesystem that stalls every step. Its log still says how fast it
went, in the words of whatever printed it: tqdm's ``3.52it/s`` and ``1.20s/it``, Megatron's
``elapsed time per iteration (ms): 812.4``, ``samples/s``, ``tokens/s``, ``ms/step``. Each such
figure is read as a speed (a time per step inverted), kept per file and per kind of line (the
words before it: a validation bar's it/s is not the training bar's), and compared: the median of
the run's last quarter (three in four of its figures) against the median of its first quarter
after warm-up. A fall of ``FOLD`` times or more is ``degraded``: a cause only when nothing else failed (a guess that
every failure the signatures know outranks), shown with the figures and the line where it fell.
A run that completed still gets it (a slow run that finished is not a failure it recovered from).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from statistics import median

from ncclcheck.explain.evidence import Role, Weight
from ncclcheck.explain.findings import Hit
from ncclcheck.explain.lines import parse_line
from ncclcheck.explain.readers import RATE, Reader
from ncclcheck.explain.run import Line, Run

RULE = "throughput_fell"
FOLD = 3.0           # how many times slower the end must be than the start
MIN_SAMPLES = 12     # figures of one kind needed before a fall is read
WARM_UP = 2          # first figures left out (compilation, caches, the first batch)
MAX_SAMPLES = 20_000  # figures kept per file and kind (the scanner caps lines per file too)
MAX_PIECES = 4_096    # progress updates read from one line
MAX_PIECE = 200       # characters of an update shown
_NUMBER = r"(?P<value>\d+(?:\.\d+)?)"
# (pattern, True when the figure is a rate (higher is faster), the unit's name)
_FIGURES = (
    (re.compile(_NUMBER + r"\s*(?P<unit>it/s|steps/s|samples/s(?:ec)?|tokens/s(?:ec)?|tok/s|"
                r"img/s|images/s(?:ec)?)\b"), True),
    (re.compile(_NUMBER + r"\s*(?P<unit>s/it|ms/step|ms/it(?:er)?)\b"), False),
    (re.compile(r"(?P<unit>elapsed time per iteration \(ms\)|step_time(?:_ms)?)\s*[:=]\s*"
                + _NUMBER), False),
)
_KIND = re.compile(r"[A-Za-z][A-Za-z_ ]*")
# What a figure counts: tqdm writes "it/s" and, below one a second, "s/it" (the same series)
_DIMENSION = {"samples": "samples/s", "tokens": "tokens/s", "tok": "tokens/s",
              "img": "images/s", "images": "images/s"}


@dataclass(frozen=True)
class Figure:
    line: int
    speed: float   # steps (or items) per second, the larger the faster
    shown: str     # the figure as the log wrote it
    piece: str = ""  # the update it is part of (one progress bar update, one log line)


def figure(message: str) -> tuple[str, Figure | None]:
    """(kind, the figure) a step-time or throughput line gives; kind names the unit and the
    words the line starts with."""
    for pattern, is_rate in _FIGURES:
        found = pattern.search(message)
        if found is None:
            continue
        value = float(found.group("value"))
        if value <= 0:
            return "", None
        speed = value if is_rate else 1.0 / value
        lead = _KIND.match(message.strip())
        unit = found.group("unit")
        kind = f"{_DIMENSION.get(unit.split('/')[0], 'steps')}|" \
               f"{lead.group(0).strip().lower()[:24] if lead else ''}"
        return kind, Figure(0, speed, found.group(0))
    return "", None


def _keep(run: Run, file: str, number: int, message: str) -> None:
    """The figures of one line: a progress bar written without a terminal puts each update
    after a carriage return on the same line, so every piece is read, in order."""
    kinds = run.state.setdefault(RULE, {}).setdefault(file, {})
    for piece in message.split("\r")[-MAX_PIECES:]:
        kind, found = figure(piece)
        if found is None:
            continue
        series = kinds.setdefault(kind, [])
        if len(series) < MAX_SAMPLES and not (series and series[-1].line > number):
            series.append(Figure(number, found.speed, found.shown, piece.strip()[:MAX_PIECE]))


def read_line(run: Run, line: Line) -> None:
    if line.candidate.rate:
        _keep(run, line.file, line.number, line.info.message)


def read_edges(run: Run, file: str, edges: list[tuple[int, str]]) -> None:
    """The file's last lines: how fast it went at the end, past the scanner's cap."""
    kinds = run.state.get(RULE, {}).get(file, {})
    read_to = max((series[-1].line for series in kinds.values() if series), default=0)
    for number, text in edges:
        if number > read_to:
            _keep(run, file, number, parse_line(text).message)


def fall(figures: list[Figure]) -> tuple[float, float, Figure] | None:
    """(the start's median speed, the end's, the first figure of the slow end) when the end
    is FOLD times slower or more."""
    figures = figures[WARM_UP:]  # in the order written
    if len(figures) < MIN_SAMPLES:
        return None
    quarter = max(3, len(figures) // 4)
    start = median(f.speed for f in figures[:quarter])
    late = sorted(f.speed for f in figures[-quarter:])
    # the end is slow when most of it is: three figures in four (an uneven run is not)
    if late[(3 * len(late)) // 4] * FOLD > start:
        return None
    end = median(late)
    slow = next(f for f in figures if f.speed * FOLD <= start
                and all(g.speed * FOLD <= start for g in figures[figures.index(f):][:3]))
    return start, end, slow


def read_run(run: Run) -> None:
    sig = run.catalogue.by_rule(RULE)
    for file, kinds in sorted(run.state.get(RULE, {}).items()):
        for kind, series in sorted(kinds.items()):
            found = fall(series)
            if found is None:
                continue
            start, end, slow = found
            first = series[0]
            facts = {"fold": round(start / end, 1), "before": _shown(start, kind),
                     "after": _shown(end, kind), "from_line": first.line,
                     "since": f"line {slow.line} ('{slow.piece}')"}
            run.findings.add(Hit(sig, facts, file, slow.line, slow.piece, None, None, None,
                                 run.findings.hits, role=Role.CAUSE, weight=Weight.KEYWORD,
                                 inferred_from={"file": file, "line": slow.line,
                                                "text": slow.piece}))
            return  # one slowdown is enough to say so


def _shown(speed: float, kind: str) -> str:
    """A median speed in the unit of its series (steps a second, below one seconds a step)."""
    unit = kind.split("|", 1)[0]
    if unit != "steps":
        return f"{speed:.4g} {unit}"
    return f"{speed:.3g} steps/s" if speed >= 1 else f"{1.0 / speed:.3g} s per step"


READER = Reader("throughput", 36, line=read_line, file_end=read_edges, run=read_run,
                kinds=RATE)
