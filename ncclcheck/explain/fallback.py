"""When an error is visible but no signature names it: the most likely category, by its words.

A real log often fails with a message the catalogue does not know (a new wording, a library it
does not cover). The error lines still speak the taxonomy's vocabulary (``ibv_``, ``/dev/shm``,
``getaddrinfo``, ``out of memory``; cues.py). Each error line's cues are scored per category
(an error line counts more than a warning or an INFO line, a distinctive word more than a
shared one); when the best category is clearly ahead, one low-confidence finding
``fallback.<category>`` says so, names the line and the word, and gives the category's general
fix. It is added only when the log shows that the run failed (an exception, a fatal signal, an
error line): a healthy log whose INFO lines or warnings mention the same words stays clean.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from ncclcheck.catalogue import Signature
from ncclcheck.explain.cues import CUES, category_signature
from ncclcheck.explain.findings import Findings, Hit
from ncclcheck.model import Category

PREFIX = "fallback."
PRIORITY = 37          # above the catch-all (36); it only ever competes with consequences
MIN_SCORE = 4.0        # the best category's score needed at all
LEAD = 1.5             # ... and how many times the runner-up's it must be
MAX_DISTINCT = 2048    # distinct error messages scored per run

# A line that shows the run failed (not only that something was retried or probed).
_FAILED = re.compile(
    r"Traceback \(most recent call last\)|^\W*(?:[\w.]+\.)?\w*(?:Error|Exception)\b|"
    r"\b(?:ERROR|FATAL|Fatal error|FAILED)\b|\berror\b(?![:=]?\s*[\d.]+)|Segmentation fault|"
    r"core dumped|\bKilled\b|\bAborted\b|bus error|exit ?code:? ?-?[1-9]|\bSIG[A-Z]{3,5}\b|"
    r"NCCL error|nccl\w+Error|CUDA error|\bfail(?:ed|ure)\b|"
    # what a failure says in words of its own, whatever the program printing it
    r"(?i:\binvalid\b|out of memory|\bstuck\b|\bunable to\b|\bcould not\b|\bcannot\b|"
    r"timed out|refused|\bdenied\b|\bunreachable\b|\bincompatible\b|\bno space\b|"
    # a run that stopped moving, said by whoever watched it (not a warning that something
    # "can cause a hang"); a terse ``err: status 5``
    r"(?<!cause a )(?<!avoid )\bhang(?:s|ing)?\b|\bhung\b|\bfroze\b|"
    r"\berr\b\s*[:=]\s*[a-z])")
# A line that is only information or a warning the program carried on from (glog's
# ``[W socket.cpp:601]`` / ``W0611 11:44:19`` included).
_HARMLESS = re.compile(r"(?<!=)\bINFO\b|(?<!=)\bWARNING\b|Warning\b|deprecat|\bno errors?\b|"
                       r"without errors?|\b0 (?:errors?|fail(?:ed|ures?))\b|\bsuccessfully\b|"
                       r"(?-i:^\W*\[?[WI]\d{0,4}[ \]]\S*\.(?:cpp|cc|h)\b)|"
                       # glog's warning or info stamp after a launcher's prefix:
                       # ``[rank0]:[W316 16:03:36.96 ProcessGroupNCCL.cpp:5072]``
                       r"(?-i:\[[WI]\d{0,4}[^\]\[]*\.(?:cpp|cc|h):\d+\])|"
                       # nccl-tests' column header: older releases name the last column "error"
                       r"^\W*#.*\balgbw\b.*\bbusbw\b|"
                       # a Python warning's location (``file.py:433: It is recommended ...``),
                       # as the warnings module and Lightning's rank_zero_warn print it
                       r"(?-i:^\S*\.py:\d+: (?![\w.]*(?:Error|Exception)\b))",
                       re.I)
# NCCL before 2.4 printed ``host:pid:tid [n] include/socket.h:371 WARN ...``, no "NCCL"
_NCCL_WARN = re.compile(r"\bNCCL WARN\b|^\s*WARN\b|\.(?:cc|cu|h|cpp):\d+ WARN\b")


def is_nccl_warning(message: str) -> bool:
    """Whether the line is NCCL's WARN, in any release's shape (``NCCL WARN``, or before 2.4
    a bare ``WARN`` after the source file: ``include/socket.h:344 WARN ...``)."""
    return _NCCL_WARN.search(message) is not None


@dataclass(frozen=True)
class ErrorLine:
    """Where a cue was read from."""

    file: str
    line: int
    text: str
    cue: str


@dataclass
class ErrorCues:
    """Cue scores per category over the error lines of a run (each distinct message once)."""

    scores: dict[Category, float] = field(default_factory=dict)
    best_line: dict[Category, tuple[float, ErrorLine]] = field(default_factory=dict)
    _seen: set[str] = field(default_factory=set)

    def feed(self, file: str, line: int, text: str, message: str,
             severity: str | None = None) -> None:
        """Score ``message`` when it is an error line (a warning or INFO line counts less)."""
        if message in self._seen or len(self._seen) >= MAX_DISTINCT:
            return
        self._seen.add(message)
        weight = line_weight(message, severity)
        if weight <= 0:
            return
        for category, (cue_weight, word) in line_cues(message).items():
            score = weight * cue_weight
            self.scores[category] = self.scores.get(category, 0.0) + score
            kept = self.best_line.get(category)
            if kept is None or score > kept[0]:
                self.best_line[category] = (score, ErrorLine(file, line, text.strip()[:2000],
                                                             word))

    def verdict(self, failed: bool) -> tuple[Category, ErrorLine] | None:
        """The category clearly ahead, with its best line; None when none is, or the run
        shows no failure at all (``failed``: a line shows it did; the text model's reading of
        the run, textmodel.LogText, owns that fact)."""
        if not failed or not self.scores:
            return None
        ordered = sorted(self.scores.items(), key=lambda item: -item[1])
        best, score = ordered[0]
        runner_up = ordered[1][1] if len(ordered) > 1 else 0.0
        if score < MIN_SCORE or score < LEAD * runner_up:
            return None
        return best, self.best_line[best][1]


@lru_cache(maxsize=8192)  # a run repeats its warnings and errors verbatim, rank after rank
def line_weight(message: str, severity: str | None = None) -> float:
    """2 for a failure line (exception, error, fatal signal), 1 for an NCCL warning, 0.5 for
    an INFO line, 0 for the rest. ``severity`` is a glog stamp's, peeled off the message by
    the line parser: torch's ``[I ...]`` lines are information whatever words they hold (a
    debug line that says "failed" while closing a loop), its ``[W ...]`` lines count as an
    NCCL warning when they speak of a failure (a bind that failed with errno 98 is a warning
    in torch's log, and often the only line that says why the run died), its ``[E ...]`` and
    ``[F ...]`` lines are failures (a watchdog's timeout, whatever its wording)."""
    if severity == "I":
        return 0.5
    if severity in ("E", "F"):  # what the program itself logged as an error
        return 2.0
    if severity == "W":  # as NCCL's WARN: a failure it went on from, or one it reports
        return 1.0 if _FAILED.search(message) else 0.0
    harmless = _HARMLESS.search(message)
    if is_nccl_warning(message):
        return 1.0
    if harmless:
        return 0.5 if "INFO" in message else 0.0
    return 2.0 if _FAILED.search(message) else 0.0


def line_cues(message: str) -> dict[Category, tuple[int, str]]:
    """Per category, the heaviest cue on the line and the word that matched it."""
    found: dict[Category, tuple[int, str]] = {}
    for cue in CUES:
        match = cue.pattern.search(message)
        if match and cue.weight > found.get(cue.category, (0, ""))[0]:
            found[cue.category] = (cue.weight, match.group(0))
    return found


@lru_cache(maxsize=None)
def fallback_signature(category: Category) -> Signature:
    """The finding a keyword verdict for ``category`` reads as."""
    return category_signature(
        PREFIX + category.value, category,
        f"Most likely: {category.value} (inferred from keywords)",
        f"No known failure message matched, but the error on line {{line}} names '{{cue}}', a "
        f"word of the {category.value} category: the run most likely failed for that reason. "
        f"This is an inference from keywords, not a recognised message; read that line to "
        f"confirm.", PRIORITY)


def add_fallback(hits: Findings, cues: ErrorCues, failed: bool) -> None:
    """Add the keyword verdict, a guess the arbiter puts below every recognised failure (even
    the catch-all or a generic NCCL error: letting a cue replace those was measured on a
    held-out half of the world corpus's dev split and lost more cases than it won)."""
    verdict = cues.verdict(failed)
    if verdict is None:
        return
    category, where = verdict
    if hits.says(category):
        return  # a recognised failure or consequence already says so
    facts = {"line": where.line, "cue": where.cue}
    hits.add(Hit(fallback_signature(category), facts, where.file, where.line, where.text,
                 None, None, None, hits.hits,
                 inferred_from={"file": where.file, "line": where.line, "text": where.text[:300]}))
