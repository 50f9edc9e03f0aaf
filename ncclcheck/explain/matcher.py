"""Which signature claims a log line: the literals it holds name the candidates, their
patterns say which of them match, and declared fields alone choose among those.

The choice, in this order (never the place of an entry in the catalogue's files):

1. claim level: specific signatures, then ``broad`` ones (a message read in any context),
   then the ``last_resort`` ones (any exception line); a level is tried only when no
   signature of the levels before it matches;
2. within the level, a signature that another matching one ``refines`` gives way to it
   (NCCL's "Cuda failure 'out of memory'" is an out-of-memory before it is a CUDA failure);
3. then the higher ``priority``; two matching signatures with the same priority that do not
   refine one another are a conflict the catalogue should declare (tests/test_explain_precedence.py
   fails on one in the corpus or the examples); until then the smaller id wins, so the answer
   never depends on order.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from ncclcheck.catalogue import Catalogue, Signature, refined_by_closure
from ncclcheck.explain.prefilter import Literal

MEMO_SIZE = 4096  # distinct messages whose match is remembered per run

Claim = tuple[Signature, dict[str, Any]]


class Matcher:
    """Matches candidate lines against signatures (see the module's docstring): ``literals``
    holds each one's prefilter literals by id (prepared.py), ``catalogue`` the signatures
    whose ``refines`` are followed."""

    def __init__(self, signatures: Iterable[Signature],
                 literals: Mapping[str, Sequence[Literal]], catalogue: Catalogue) -> None:
        self.signatures = tuple(signatures)
        owners: dict[tuple[str, bool], list[int]] = {}
        for index, sig in enumerate(self.signatures):
            for lit in literals[sig.id]:
                owners.setdefault((lit.text, lit.caseless), []).append(index)
        self._exact = [(text, tuple(o)) for (text, caseless), o in owners.items() if not caseless]
        self._caseless = [(text, tuple(o)) for (text, caseless), o in owners.items() if caseless]
        # ``refines`` is read across the whole catalogue, so a chain through a signature left
        # out of this matcher still holds.
        known = dict(catalogue.by_id)
        known.update((sig.id, sig) for sig in self.signatures)
        self._refines = [refined_by_closure(sig.id, known) for sig in self.signatures]
        # Candidates are tried level by level; within a level, by priority, then id.
        self._order = [(sig.claim_level, -sig.priority, sig.id) for sig in self.signatures]
        self._memo: dict[str, Claim | None] = {}

    def match(self, message: str) -> Claim | None:
        """The signature claiming ``message`` and its facts. Ranks print the same message many
        times, so answers are remembered (a bounded memo, copied out)."""
        if message in self._memo:
            found = self._memo[message]
            return None if found is None else (found[0], dict(found[1]))
        found = self._match(message)
        if len(self._memo) >= MEMO_SIZE:
            self._memo.clear()
        self._memo[message] = found
        return None if found is None else (found[0], dict(found[1]))

    def claimants(self, message: str) -> list[tuple[int, dict[str, Any]]]:
        """Every signature (by index) whose literals and patterns match ``message``, in the
        order they are tried, with its facts; the first level with any match only."""
        wanted = {i for text, owners in self._exact if text in message for i in owners}
        if self._caseless:
            lowered = message.lower()
            wanted.update(i for text, owners in self._caseless if text in lowered for i in owners)
        found: list[tuple[int, dict[str, Any]]] = []
        for index in sorted(wanted, key=self._order.__getitem__):
            if found and self._order[index][0] != self._order[found[0][0]][0]:
                break  # a level below one that already matched
            facts = self.signatures[index].match(message)
            if facts is not None:
                found.append((index, facts))
        return found

    def _match(self, message: str) -> Claim | None:
        found = self.claimants(message)
        if not found:
            return None
        refined = {sig_id for index, _ in found for sig_id in self._refines[index]}
        for index, facts in found:  # already by priority, then id
            sig = self.signatures[index]
            if sig.id not in refined:
                return sig, facts
        raise ValueError("'refines' goes round in a circle")  # the catalogue refuses that

    def match_continued(self, header: str, message: str) -> Claim | None:
        """A message cut over two lines (an exception header and its reason below): matched
        as one line, unless only a last-resort signature claims it (the header already
        said that)."""
        matched = self.match(header.rstrip() + " " + message.lstrip())
        if matched is None or matched[0].last_resort:
            return None
        return matched
