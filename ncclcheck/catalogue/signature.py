"""One known failure: how to recognise it in a log line, what it means and how to fix it.

A signature is plain data read from the catalogue's TOML files plus the few operations every
reader of it needs: match a line (its facts), render its texts. How a log reader finds the
lines worth matching (prefilter literals, indexes, caches) is that reader's business, kept out
of here so that a probe asking for a fix text pays for none of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Mapping

from ncclcheck.catalogue.facts import counts, derived_facts, fill, holds, typed
from ncclcheck.catalogue.knowledge import quotes_no_failure  # its tables load on first use
from ncclcheck.model import Category

# How a signature claims a line that several signatures match (see ``claim_level``).
SPECIFIC, BROAD, LAST_RESORT = 0, 1, 2


class UnknownSignature(KeyError):
    """Asked for a signature id the catalogue does not have."""


@dataclass(frozen=True)
class Signature:
    """One known failure: how to recognise it in a log, what it means and how to fix it.

    Which signature claims a line that several match (explain's matcher): ``claim_level``
    first (specific, then ``broad`` patterns that read a message in any context, then the
    ``last_resort`` ones that read any exception line), then ``refines`` (this signature reads
    a more specific case of those signatures' lines, so they give way to it), then
    ``priority``. Which finding is the root cause (explain's findings): primary failures before
    ``consequence`` (usually follows another failure: a peer closing its socket because it
    crashed, a timeout after a rank died) before ``warning`` (the library carries on), then
    time, then ``priority`` (0-100). ``generic`` marks NCCL's generic results (system error,
    internal error, remote error), which say that something failed, not what: a cause read
    from the context or a specific failure elsewhere in the log explains them.
    ``quotes`` names the knowledge table (catalogue/knowledge/) whose entry the message quotes
    (a CUDA error that NCCL or nccl-tests prints inside its own words, a verbs event): where
    that table files the quoted entry under a more specific category than the signature's own,
    the entry says why, and the signature is read like a generic result (a wrapper read for its
    cause); where it files the entry as no failure (a GID table change among verbs events), the
    line is none and the signature does not match it.
    ``report`` marks a launcher's or framework's report that a process ended (torchrun's
    exitcode, srun's "task 1: Aborted", mpirun's non-zero exit): it says how the process ended
    (its signal or exit code facts), not why, and explain reads its role from how (a crash or
    an outside kill is a failure of its own; an exit after an error or an abort the process
    chose follows a failure it printed). ``aftermath`` marks what a launcher does after a
    failure (terminate the survivors, cancel the step, abort the job): the last consequence.
    ``settings`` names facts taken from ``NCCL_X set by environment to V`` lines of the same
    log when the matched line does not carry them. ``inferred`` signatures are never matched
    line by line: their patterns read a context line (a setting, a launch command, an INFO
    line) that names the likely cause when NCCL gave only a generic error, or, for the root
    causes listed in ``explains``, when that failure is only the symptom (``"generic"`` in
    that list stands for NCCL's generic errors); an inferred signature with a ``rule`` is
    named by that rule of explain (a fact across several lines), not by one line.
    """

    id: str
    category: Category
    title: str
    meaning: str
    fix: str
    patterns: tuple[str, ...]
    example: str
    consequence: bool = False
    warning: bool = False
    report: bool = False
    aftermath: bool = False
    broad: bool = False
    last_resort: bool = False
    generic: bool = False
    quotes: str = ""
    refines: tuple[str, ...] = ()
    priority: int = 50
    requires: tuple[str, ...] = ()
    settings: tuple[tuple[str, str], ...] = ()
    inferred: bool = False
    explains: tuple[str, ...] = ()
    rule: str = ""

    @property
    def claim_level(self) -> int:
        """SPECIFIC, BROAD or LAST_RESORT: the tier in which it competes for a line."""
        return LAST_RESORT if self.last_resort else BROAD if self.broad else SPECIFIC

    @cached_property
    def compiled(self) -> tuple[re.Pattern[str], ...]:
        """The patterns, compiled when first needed: a log asks for the few signatures whose
        literals it holds, so start-up does not pay for all of them."""
        return tuple(re.compile(p) for p in self.patterns)

    @property
    def explanation(self) -> str:
        """The meaning text (alias used by probes)."""
        return self.meaning

    def match(self, line: str, known: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        """Facts captured from ``line`` when one of the patterns matches it, else None.
        ``known`` facts (an inferred cause's failing line) take part in ``requires``."""
        for pattern in self.compiled:
            found = pattern.search(line)
            if found:
                facts = {k: typed(v) for k, v in found.groupdict().items() if v is not None}
                facts.update(counts(facts))
                checked = {**(known or {}), **facts}
                if all(holds(condition, checked) for condition in self.requires):
                    return None if self.quotes and quotes_no_failure(line, self.quotes) else facts
        return None

    def render(self, facts: Mapping[str, Any] | None = None) -> tuple[str, str]:
        """(explanation, fix) with the facts filled in; unknown facts drop their optional part."""
        full = derived_facts(facts or {})
        return fill(self.meaning, full), fill(self.fix, full)
