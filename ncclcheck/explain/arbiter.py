"""The one arbiter: which evidence is the root cause, and in which order the rest is shown.

Readers only say what they see (evidence.py); the arbiter orders it, so that the first failure
wins and never one of its consequences:

1. **Standing**: causes before consequences before warnings; among causes, the ones that say
   more about why (a message that names the cause, a context fact behind a generic error, the
   flight recorder's verdict) before reasoned ones (a signal read with its context, a timeout)
   before weak ones (a generic NCCL result, an exception nobody recognised, a crash with no
   reason). A launcher's report that a worker died, the signal it sent the survivors, a peer's
   broken connection and a watchdog that timed out waiting are consequences: they never hide
   the failure they report. The text model's reading and the keyword cues are guesses: they
   never replace a failure or a consequence a signature recognised (measured on dev's halves,
   each read by a model trained on the other: replacing them lost more than it won).
2. **Time**: within a standing, the earliest failure across ranks and files, when every
   candidate carries a timestamp (torchrun's own report names its "Root Cause (first observed
   failure)" the same way).
3. **Declared priority**, then **reading order**: a Python exception chain prints its cause
   first ("The above exception was the direct cause of the following exception"), so among
   equals the earlier line wins.

A generic result (NCCL's "unhandled system error", an exception quoting one) says that
something failed, not what: when it stands first with nothing that names a cause beside it, a
consequence or a warning that does name one (a verbs provider that did not load, a SHARP
plugin that failed, a refused connection) explains it and takes its place; failing those, an
error line whose words name a category (the keyword cues). The text model's reading does not:
on a log that only mentions a topic ("NCCL version" lines beside an internal error) it reads
that topic, where the keyword cues need an error line that names it.
"""

from __future__ import annotations

from typing import Iterable

from ncclcheck.explain.evidence import Role, Weight, is_generic, is_specific

# Best first; a (role, weight) pair not listed for causes falls to the weakest cause standing.
STANDING: tuple[tuple[Role, Weight | None], ...] = (
    (Role.CAUSE, Weight.DECISIVE),
    (Role.CAUSE, Weight.REASONED),
    (Role.CAUSE, Weight.WEAK),
    (Role.CONSEQUENCE, None),
    (Role.CAUSE, Weight.MODEL),
    (Role.CAUSE, Weight.KEYWORD),
    (Role.WARNING, None),
)
_RANK = {entry: n for n, entry in enumerate(STANDING)}


def standing(finding) -> int:
    """The finding's place in STANDING (0 is best)."""
    role = finding.role
    key = (role, finding.weight if role is Role.CAUSE else None)
    return _RANK.get(key, _RANK[(Role.CAUSE, Weight.WEAK)])


def choose_root(findings: Iterable) -> object | None:
    """The root cause among ``findings`` (Finding objects), or None when there are none."""
    findings = list(findings)
    if not findings:
        return None
    best = min(standing(f) for f in findings)
    root = _first([f for f in findings if standing(f) == best])
    if is_generic(root.signature, root.first.text):
        specific = [f for f in findings if (f.role is not Role.CAUSE or f.weight == Weight.KEYWORD)
                    and is_specific(f.signature, f.first.text)]
        if specific:
            return min(specific, key=lambda f: (f.role is Role.CAUSE, standing(f),
                                                -f.signature.priority, f.first.order))
    return root


def _first(candidates: list) -> object:
    """Among evidence of one standing: the earliest when every one is timed, else by declared
    priority, then reading order."""
    if all(f.first.time is not None for f in candidates):
        return min(candidates, key=lambda f: (f.first.time, -f.signature.priority,
                                              f.first.order))
    return min(candidates, key=lambda f: (-f.signature.priority, f.first.order))


def ordered(findings: Iterable) -> list:
    """The root cause first, then the rest by standing, priority and reading order."""
    findings = list(findings)
    root = choose_root(findings)
    if root is None:
        return []
    rest = sorted((f for f in findings if f is not root),
                  key=lambda f: (standing(f), -f.signature.priority, f.first.order))
    return [root, *rest]
