"""The one arbiter: which evidence is the root cause, and in which order the rest is shown.

Readers only say what they see (evidence.py); the arbiter orders it, so that the first failure
wins and never one of its consequences:

1. **Standing** (``STANDING``, best first): causes that name why (a message that names the
   cause, a context fact behind a generic error, the flight recorder's verdict); reasoned
   causes (a signal read with its context, a timeout with nothing deeper); weak causes (a
   generic NCCL result, an exception nobody recognised, a crash with no reason); the guesses,
   the text model's reading then the keyword cues (they read the whole run for why, but
   neither a launcher's report nor a line a signature knows as a consequence: engine.py);
   the consequences (a peer's absence, a watchdog that waited in vain), which only say that
   something failed elsewhere; warnings that name a cause (a connect refused with an errno);
   then, never the root cause, a launcher's report that a worker exited with an error code or
   aborted (its own output says why: the contract's "never a launcher's report of a death";
   with nothing else the run has no root cause and the hypotheses say a rank died) and what a
   launcher did afterwards (stop the survivors). A crash or an outside kill a launcher
   reports is a failure of its own, a weak cause.
2. **Time**: within a standing, the earliest failure across ranks and files, when every
   candidate carries a timestamp (torchrun's own report names its "Root Cause (first observed
   failure)" the same way).
3. **Declared priority**, then **reading order**: a Python exception chain prints its cause
   first ("The above exception was the direct cause of the following exception"), so among
   equals the earlier line wins; among consequences a generic one (NCCL's "remote process
   exited") comes after those that say more.

An exception that reports a failed NCCL call and quotes NCCL's last warning below it ("Last
error:") is read for that warning: it is why the call failed, and says more than the result the
exception names ("unhandled cuda error" over an NVLS bind that failed is peer-to-peer).

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

from ncclcheck.catalogue import LAST_RESORT
from ncclcheck.explain.evidence import NEVER_ROOT, Role, Weight, is_generic, is_specific

# Best first; a (role, weight) pair not listed for causes falls to the weakest cause standing.
STANDING: tuple[tuple[Role, Weight | None], ...] = (
    (Role.CAUSE, Weight.DECISIVE),
    (Role.CAUSE, Weight.REASONED),
    (Role.CAUSE, Weight.WEAK),
    (Role.CAUSE, Weight.MODEL),
    (Role.CAUSE, Weight.KEYWORD),
    (Role.CONSEQUENCE, None),
    (Role.WARNING, None),
    (Role.REPORT, None),      # shown, never the root cause (evidence.NEVER_ROOT)
    (Role.AFTERMATH, None),   # shown, never the root cause (evidence.NEVER_ROOT)
    (Role.CONTEXT, None),     # explains a generic failure, never stands alone
)
_RANK = {entry: n for n, entry in enumerate(STANDING)}
QUOTE_WITHIN = 6  # lines from an exception's first line down to the NCCL warning it quotes
MODEL_STANDING = _RANK[(Role.CAUSE, Weight.MODEL)]


def standing_key(finding) -> str:
    """The finding's standing as a name ("cause:DECISIVE", "consequence"), for the figures
    read per standing on dev (how often a root cause of that standing is right)."""
    role = finding.role
    return f"{role.value}:{finding.weight.name}" if role is Role.CAUSE else role.value


def standing(finding) -> float:
    """The finding's place in STANDING (0 is best). An exception no signature knows stands
    just below the text model's confident reading: its own words, read by the model, say
    more than "a rank died" (unless it only quotes one of NCCL's generic results, which the
    context rules read)."""
    role = finding.role
    key = (role, finding.weight if role is Role.CAUSE else None)
    if (key == (Role.CAUSE, Weight.WEAK) and finding.signature.claim_level == LAST_RESORT
            and not is_generic(finding.signature, finding.first.text)):
        return MODEL_STANDING + 0.5
    return _RANK.get(key, _RANK[(Role.CAUSE, Weight.WEAK)])


def choose_root(findings: Iterable) -> object | None:
    """The root cause among ``findings`` (Finding objects), or None when none may be one (a
    launcher's report of a death, what launchers did after it, context facts)."""
    findings = list(findings)
    eligible = [f for f in findings if f.role not in NEVER_ROOT]
    if not eligible:
        return None
    best = min(standing(f) for f in eligible)
    root = _first([f for f in eligible if standing(f) == best])
    quoted = _quoted_last_error(root, findings)
    if quoted is not None:
        return quoted
    if root.role is Role.CONSEQUENCE:
        # a consequence says that something failed elsewhere; a warning printed before it that
        # names a cause (a net plugin that did not load, a SHARP init error) is that something
        named = [f for f in findings if f.role is Role.WARNING
                 and is_specific(f.signature, f.first.text) and not _after(f, root)]
        if named:
            return min(named, key=lambda f: (-f.signature.priority, f.first.order))
    if is_generic(root.signature, root.first.text):
        # a cause read from the words of the root's own line (the CUDA error a wrapper
        # quotes; not the text model, which reads the whole run) is the wrapper read for its
        # cause
        specific = [f for f in findings if f.role is not Role.AFTERMATH
                    and (f.role is not Role.CAUSE or f.weight == Weight.KEYWORD
                         or (f.weight >= Weight.REASONED and _same_line(f, root)))
                    and is_specific(f.signature, f.first.text) and not _after(f, root)]
        if specific:
            return min(specific, key=lambda f: (f.role is Role.CAUSE, standing(f),
                                                -f.signature.priority, f.first.order))
    return root


def _quoted_last_error(root, findings: list) -> object | None:
    """NCCL's last warning, which the exception reporting a failed NCCL call quotes a few
    lines below its first ("Last error:"), is why the call failed: the exception read for its
    cause, whatever the exception's own words claimed (NCCL's result says less)."""
    if root.role is not Role.CAUSE:
        return None
    here = root.first
    quoted = [f for f in findings if f.first.facts.get("last_error") and f.role is Role.CAUSE
              and f.first.file == here.file and 0 < f.first.line - here.line <= QUOTE_WITHIN
              and f.signature.category != root.signature.category
              and is_specific(f.signature, f.first.text)]
    return min(quoted, key=lambda f: f.first.order) if quoted else None


def _same_line(finding, failure) -> bool:
    here, there = finding.first, failure.first
    return here.file == there.file and here.line == there.line


def _after(finding, failure) -> bool:
    """Whether ``finding`` was printed after ``failure`` in the same file: what comes later
    cannot have caused it."""
    here, there = finding.first, failure.first
    return here.file == there.file and here.line > there.line > 0


def _first(candidates: list) -> object:
    """Among evidence of one standing: the earliest when every one is timed; else, for causes,
    by declared priority (a message that names more before one that names less), and for
    consequences by reading order (the first consequence printed is the nearest to the failure
    they follow; of its category, the one that says most), a generic one (NCCL's "remote
    process exited") after those that say more."""
    if all(f.first.time is not None for f in candidates):
        return min(candidates, key=lambda f: (f.first.time, -f.signature.priority,
                                              f.first.order))
    if candidates[0].role is not Role.CAUSE:
        nearest = min(candidates, key=lambda f: (is_generic(f.signature, f.first.text),
                                                 f.first.order))
        alike = [f for f in candidates if f.signature.category == nearest.signature.category
                 and is_generic(f.signature, f.first.text) == is_generic(nearest.signature,
                                                                         nearest.first.text)]
        return min(alike, key=lambda f: (-f.signature.priority, f.first.order))
    return min(candidates, key=lambda f: (-f.signature.priority, f.first.order))


def ordered(findings: Iterable) -> tuple[object | None, list]:
    """(the root cause or None, then every finding: the root first, the rest by standing,
    priority and reading order)."""
    findings = list(findings)
    root = choose_root(findings)
    rest = sorted((f for f in findings if f is not root),
                  key=lambda f: (standing(f), -f.signature.priority, f.first.order))
    return root, (rest if root is None else [root, *rest])
