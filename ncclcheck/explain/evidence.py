"""What a reader of logs says about a line: its role in the run's failure and how much it says.

Every reader (the catalogue's signatures, the context rules, signals and exit codes, the
flight-recorder dumps, the components' own enumerations, the text model, the keyword cues)
says only what it sees, as evidence with:

- a **role**: a *cause* says why the run failed; a *consequence* follows another failure (a
  peer that lost its connection, a watchdog that timed out waiting, a launcher's report that a
  worker died, the signal it sent the survivors); a *warning* is something the program carried
  on from;
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

from ncclcheck.catalogue import LAST_RESORT, Signature
from ncclcheck.model import Category


class Role(str, enum.Enum):
    CAUSE = "cause"
    CONSEQUENCE = "consequence"
    WARNING = "warning"


class Weight(enum.IntEnum):
    """How much a cause says about why the run failed (higher says more)."""

    KEYWORD = 0    # a word of the category on an error line (fallback.py)
    MODEL = 1      # the text model's reading (model_reading.py)
    WEAK = 2       # that something failed, not why: a generic result, an unknown exception
    REASONED = 3   # a cause read from several facts, or a timeout with nothing deeper
    DECISIVE = 4   # a message that names the cause, a context fact that explains it, the dumps


# Categories that say what happened rather than why.
UNSPECIFIC = frozenset({Category.RANK_CRASHED, Category.OTHER})
# A last-resort finding (an exception no signature knows) that quotes one of NCCL's generic
# results is only as telling as that result.
_GENERIC_TEXT = re.compile(r"nccl(?:System|Internal|Remote)Error|unhandled system error|"
                           r"internal error|remote process exited")
MODEL_PREFIX = "model."
KEYWORD_PREFIX = "fallback."


def role_of(sig: Signature) -> Role:
    if sig.warning:
        return Role.WARNING
    return Role.CONSEQUENCE if sig.consequence else Role.CAUSE


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
    """Whether evidence is only NCCL's generic result (or a last resort quoting one): it says
    that something failed, not what."""
    return sig.generic or (sig.claim_level == LAST_RESORT and bool(_GENERIC_TEXT.search(text)))


def is_specific(sig: Signature, text: str) -> bool:
    """Whether evidence names what failed: neither generic nor of a category that only says
    what happened (a crash, a timeout, other)."""
    return (sig.category not in UNSPECIFIC and sig.category != Category.TIMEOUT
            and not is_generic(sig, text))
