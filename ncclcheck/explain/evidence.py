"""What a reader of logs says about a line: its role in the run's failure and how much it says.

Every reader (the catalogue's signatures, the context rules, signals and exit codes, the
flight-recorder dumps, the components' own enumerations, the text model, the keyword cues)
says only what it sees, as evidence with:

- a **role**: a *cause* says why the run failed; a *consequence* follows another failure (a
  peer that lost its connection, a watchdog that timed out waiting, a launcher's report that a
  worker's connection broke); a *report* is a launcher's word that a process exited with an
  error code or aborted (its own output says why: an exception, a watchdog timeout); the
  *aftermath* is what a launcher did then (terminate the survivors, cancel the step); a
  *warning* is something the program carried on from. A launcher's report of a death takes its
  role from how the process died: a crash (SIGSEGV, SIGBUS, ...) or an outside kill (SIGKILL:
  the OOM killer, a scheduler) is a failure of its own, a cause; an exit code or SIGABRT is a
  report, never the root cause (with nothing else, the hypotheses lead with the death it
  reports and a note names the process to read); SIGTERM is the launcher stopping it.
  Appending a launcher's tail to a log does not change why the run failed;
- a **weight**, for causes: how much the evidence says about why. A message that names the
  cause, a context fact that explains a generic error or a flight-recorder verdict is decisive;
  a cause read from several facts (a signal with the memory context around it) or a timeout
  with nothing deeper is reasoned; a generic result, an exception nobody recognised or a crash
  with no reason is weak; the text model's reading and the keyword cues are guesses.

One arbiter (arbiter.py) orders the evidence; no reader decides the root cause alone.
"""

from __future__ import annotations

import enum
import re
import signal
from typing import Any, Mapping

from ncclcheck.catalogue import LAST_RESORT, Signature
from ncclcheck.catalogue.knowledge import quoted
from ncclcheck.model import Category


class Role(str, enum.Enum):
    CAUSE = "cause"
    CONSEQUENCE = "consequence"
    REPORT = "report"        # a launcher's report that a process exited or aborted
    AFTERMATH = "aftermath"  # what a launcher did after the failure: stop the survivors
    WARNING = "warning"
    CONTEXT = "context"      # a fact that can explain a failure, never one by itself


# Roles that never stand as the root cause: a launcher's report that a process exited or
# aborted says how it ended, not why; what a launcher did after a failure (stop the survivors,
# cancel the step) is never why the run failed; a context fact (a subsystem's warning, an
# interface on loopback) only explains a failure the run shows.
NEVER_ROOT = frozenset({Role.REPORT, Role.AFTERMATH, Role.CONTEXT})


class Weight(enum.IntEnum):
    """How much a cause says about why the run failed (higher says more)."""

    KEYWORD = 0    # a word of the category on an error line (fallback.py)
    MODEL = 1      # the text model's reading (model_reading.py)
    WEAK = 2       # that something failed, not why: a generic result, an unknown exception
    REASONED = 3   # a cause read from several facts, or a timeout with nothing deeper
    DECISIVE = 4   # a message that names the cause, a context fact that explains it, the dumps


# Categories that say what happened rather than why.
UNSPECIFIC = frozenset({Category.RANK_CRASHED, Category.OTHER})
# What a component's table files a line under that says no more than "it failed" (a quoted
# entry of these says no more than its wrapper).
UNTOLD = frozenset({"other", "ok", Category.RANK_CRASHED.value, Category.TIMEOUT.value})
# A last-resort finding (an exception no signature knows) that quotes one of NCCL's generic
# results is only as telling as that result.
_GENERIC_TEXT = re.compile(r"nccl(?:System|Internal|Remote)Error|unhandled system error|"
                           r"internal error|remote process exited")
MODEL_PREFIX = "model."
KEYWORD_PREFIX = "fallback."


# How a process died, for a report of its death: signals it cannot have chosen (a crash, an
# outside kill), and those a launcher sends to stop the survivors.
_FAILURE_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE,
                              signal.SIGKILL})
_STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
_HOW = {"killed": signal.SIGKILL, "segmentation fault": signal.SIGSEGV,
        "aborted": signal.SIGABRT, "bus error": signal.SIGBUS}


def role_of(sig: Signature, facts: Mapping[str, Any] | None = None) -> Role:
    if sig.warning:
        return Role.WARNING
    if sig.aftermath:
        return Role.AFTERMATH
    if sig.report:
        died_of = death_signal(facts or {})
        if died_of in _FAILURE_SIGNALS:
            return Role.CAUSE
        return Role.AFTERMATH if died_of in _STOP_SIGNALS else Role.REPORT
    return Role.CONSEQUENCE if sig.consequence else Role.CAUSE


def death_signal(facts: Mapping[str, Any]) -> int | None:
    """The signal a report of a death names: a number, a name, a negative exit code (torchrun,
    Python), an exit status above 128 (a shell), or srun's words."""
    for key in ("signal", "signal_number"):
        value = facts.get(key)
        if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
            return int(value)
    name = facts.get("signal_name")
    if isinstance(name, str) and name.upper() in signal.Signals.__members__:
        return int(signal.Signals[name.upper()])
    how = facts.get("how")
    if isinstance(how, str) and how.lower() in _HOW:
        return int(_HOW[how.lower()])
    code = facts.get("exitcode")
    if isinstance(code, str) and code.lstrip("-").isdigit():
        code = int(code)
    if isinstance(code, int):
        if code < 0:
            return -code
        if 128 < code < 160:
            return code - 128
    return None


def weight_of(sig: Signature) -> Weight:
    """A signature's weight as a cause, from its declared fields (readers may say more)."""
    if sig.id.startswith(KEYWORD_PREFIX):
        return Weight.KEYWORD
    if sig.id.startswith(MODEL_PREFIX):
        return Weight.MODEL
    if sig.generic or sig.claim_level == LAST_RESORT or sig.category in UNSPECIFIC:
        return Weight.WEAK
    if sig.category == Category.TIMEOUT:
        return Weight.REASONED
    return Weight.DECISIVE


def is_generic(sig: Signature, text: str) -> bool:
    """Whether evidence is only NCCL's generic result (or a last resort quoting one), or a
    wrapper whose quoted entry names more than the wrapper does (catalogue ``quotes``): it says
    that something failed, and its words say what."""
    return (sig.generic or (sig.claim_level == LAST_RESORT and bool(_GENERIC_TEXT.search(text)))
            or quoted_category(sig, text) is not None)


def quoted_category(sig: Signature, text: str) -> Category | None:
    """For a signature that quotes an enumeration's entry (``quotes``): the category that
    entry is filed under, where it says more than the signature's own (a CUDA error filed under
    p2p that NCCL printed as "Cuda failure"); None otherwise."""
    if not sig.quotes:
        return None
    hit = quoted(text, sig.quotes)
    if hit is None or hit.category in UNTOLD or hit.category == sig.category.value:
        return None
    return Category(hit.category)


def is_specific(sig: Signature, text: str) -> bool:
    """Whether evidence names what failed: neither generic nor of a category that only says
    what happened (a crash, a timeout, other)."""
    return (sig.category not in UNSPECIFIC and sig.category != Category.TIMEOUT
            and not is_generic(sig, text))
