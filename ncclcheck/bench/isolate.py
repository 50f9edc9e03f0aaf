"""``bench --isolate``: which rounds of pair tests to run, and which nodes and links they name.

Pure: nodes are indices 0..n-1, a pair test is two indices and the busbw they reached; nothing
here runs a collective (pairs.py does, and the benchmark models it), so the planner and the
verdict are tested on made-up measurements and timed at any scale.

- ``nodes``: two survey rounds, the two perfect matchings of the ring 0-1-2-...-(n-1)-0, give
  every node two different partners; a node slow with both is a suspect, and confirmation
  rounds pair each suspect with a node already seen fast (a known-good one) it has not met.
- ``links``: a round-robin tournament (the circle method: n-1 rounds of n/2 pairs, n rounds
  with one node resting when n is odd) tests every pair once.

Both end with confirmation rounds: a node is named when every pair it was in was slow and
``EVIDENCE`` of them (one more than it had in the first rounds, if fewer) were with known-good
partners; in links mode a link is named when its pair was slow twice while both its nodes were
fast with others.

A pair that could not finish (an error, or no time before its deadline) is the slowest result
there is, never a gap: it counts as slow, and when the rounds end it is named even without a
second test (a link whose pair failed, in either mode; a node whose pairs with two or more
known-good partners all failed), while a link slow once and never retested is a suspect (a
warning), never a pass. Each round gets a share of the time left (``share``: the rounds still
planned and one confirmation round), and its pairs measure what they can within it
(pair_budget.py).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Callable, Iterable

MODES = ("nodes", "links")
DEFAULT_THRESHOLD = 0.7  # a pair is slow below this fraction of the median pair's busbw
EVIDENCE = 3             # slow pairs with known-good partners that name a node
LINK_EVIDENCE = 2        # slow tests of one pair (both nodes fast elsewhere) that name a link
FAILED_EVIDENCE = 2      # failed pairs with known-good partners that name a node at the end
CONFIRM_ALLOWANCE = 1    # confirmation rounds a round's share of the time leaves room for

Pair = tuple[int, int]


def pair(a: int, b: int) -> Pair:
    """A pair in canonical order, so (3, 1) and (1, 3) are one link."""
    return (a, b) if a < b else (b, a)


@dataclass(frozen=True)
class Round:
    """One round: disjoint pairs that run at the same time. ``kind`` is survey, tournament or
    confirm; only survey and tournament rounds set the median (confirmations are chosen for
    being suspicious, so they would drag it down)."""

    kind: str
    pairs: tuple[Pair, ...]

    @property
    def reference(self) -> bool:
        return self.kind != "confirm"


@dataclass(frozen=True)
class PairTest:
    """One pair's measurement: busbw 0 when the test failed (``error`` says why)."""

    a: int
    b: int
    busbw_gbps: float
    round: int
    reference: bool = True
    time_s: float = 0.0  # the pair's time per all-reduce (its slowest rank's fastest one)
    error: str | None = None
    nbytes: int = 0      # the message measured (0: the set-up's)
    iters: int = 0       # timed all-reduces (0: the set-up's)
    reduced: bool = False  # a smaller message or fewer iterations, to fit its share of time

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def key(self) -> Pair:
        return pair(self.a, self.b)

    def other(self, node: int) -> int:
        return self.b if node == self.a else self.a


# -- the rounds ------------------------------------------------------------------------------
def survey_rounds(n: int) -> list[Round]:
    """The ring's two matchings: (0,1),(2,3),... then (1,2),(3,4),...,(n-1,0). With n odd one
    node rests in each (the last, then node 0); with n = 2 there is one pair only."""
    if n < 2:
        return []
    first = tuple((i, i + 1) for i in range(0, n - 1, 2))
    if n % 2 == 0:
        second = tuple(pair(i, (i + 1) % n) for i in range(1, n, 2))
    else:
        second = tuple((i, i + 1) for i in range(1, n - 1, 2))
    rounds = [Round("survey", first)]
    if n > 2:
        rounds.append(Round("survey", second))
    return rounds


def tournament_rounds(n: int) -> list[Round]:
    """Every pair exactly once, n/2 at a time (the circle method): node 0 stays put and the
    others rotate one place per round. An odd n gets a resting slot."""
    if n < 2:
        return []
    slots: list[int | None] = list(range(n)) + ([None] if n % 2 else [])
    size = len(slots)
    rounds = []
    for _ in range(size - 1):
        pairs = tuple(pair(a, b) for a, b in ((slots[i], slots[size - 1 - i])
                                               for i in range(size // 2))
                      if a is not None and b is not None)
        rounds.append(Round("tournament", pairs))
        slots = [slots[0], slots[-1]] + slots[1:-1]
    return rounds


def first_rounds(mode: str, n: int) -> list[Round]:
    if mode not in MODES:
        raise ValueError(f"unknown isolate mode {mode!r}: one of {', '.join(MODES)}")
    return survey_rounds(n) if mode == "nodes" else tournament_rounds(n)


# -- the verdict -----------------------------------------------------------------------------
@dataclass
class Verdict:
    """What the pair tests so far say. ``suspects`` and ``pending_links`` still need a
    confirmation round; ``good`` are the nodes seen fast at least once."""

    n: int
    median_gbps: float
    cut_gbps: float
    slow_nodes: list[int] = field(default_factory=list)
    slow_links: list[Pair] = field(default_factory=list)
    suspects: list[int] = field(default_factory=list)
    pending_links: list[Pair] = field(default_factory=list)
    suspect_links: list[Pair] = field(default_factory=list)  # slow once, never retested
    good: list[int] = field(default_factory=list)
    evidence: dict[int, int] = field(default_factory=dict)

    @property
    def settled(self) -> bool:
        return not self.suspects and not self.pending_links

    def is_slow(self, test: PairTest) -> bool:
        return test.error is not None or test.busbw_gbps < self.cut_gbps


def cut_of(tests: Iterable[PairTest], threshold: float,
           min_busbw: float | None) -> tuple[float, float]:
    """(median busbw of the reference pairs, the busbw below which a pair is slow)."""
    values = [t.busbw_gbps for t in tests if t.reference and t.error is None]
    median = statistics.median(values) if values else 0.0
    return median, max(threshold * median, min_busbw or 0.0)


def judge(n: int, tests: list[PairTest], threshold: float = DEFAULT_THRESHOLD,
          min_busbw: float | None = None, links: bool = True, final: bool = False) -> Verdict:
    """Name the slow nodes and links the tests prove, and what still needs confirming.

    A node is good once any pair it was in was fast. A node all of whose pairs were slow is a
    suspect; it is named when ``EVIDENCE`` of its slow pairs were with good partners, or one
    more than its pairs of the first rounds when those were fewer (a node that rested in a
    survey), and never more than there are good nodes. A pair slow while both its nodes are
    good is a slow link once it was slow ``LINK_EVIDENCE`` times and never fast; with
    ``links`` False (nodes mode, whose surveys pair few nodes) such pairs are neither retested
    nor named unless they failed. ``final`` (no round follows): a link whose every test failed
    is named, one slow but never retested is a suspect link, and a suspect whose pairs with
    ``FAILED_EVIDENCE`` good partners or more all failed is named.
    """
    median, cut = cut_of(tests, threshold, min_busbw)
    verdict = Verdict(n, median, cut)
    seen: dict[int, list[PairTest]] = {}
    for test in tests:
        seen.setdefault(test.a, []).append(test)
        seen.setdefault(test.b, []).append(test)
    good = {node for node, mine in seen.items() if any(not verdict.is_slow(t) for t in mine)}
    for node in sorted(set(seen) - good):
        count = sum(1 for t in seen[node] if t.other(node) in good)
        verdict.evidence[node] = count
        surveyed = sum(1 for t in seen[node] if t.reference)
        need = max(1, min(EVIDENCE, surveyed + 1, len(good)))
        failed_with_good = {t.other(node) for t in seen[node] if t.failed and t.other(node) in good}
        proven = good and (count >= need or (final and all(t.failed for t in seen[node])
                                             and len(failed_with_good) >= FAILED_EVIDENCE))
        (verdict.slow_nodes if proven else verdict.suspects).append(node)
    by_pair: dict[Pair, list[PairTest]] = {}
    for test in tests:
        if test.a in good and test.b in good and (links or test.failed):
            by_pair.setdefault(test.key, []).append(test)
    for key, mine in sorted(by_pair.items()):
        if not all(verdict.is_slow(t) for t in mine):
            continue
        if len(mine) >= LINK_EVIDENCE or (final and all(t.failed for t in mine)):
            verdict.slow_links.append(key)
        else:
            (verdict.suspect_links if final else verdict.pending_links).append(key)
    verdict.good = sorted(good)
    return verdict


def confirmation_round(verdict: Verdict, tests: list[PairTest]) -> Round | None:
    """Pair each suspect with a good node it has not met (one it has met when none is left),
    then retest the links still pending whose nodes are free; None when nothing can be done."""
    met: dict[int, set[int]] = {}
    for test in tests:
        met.setdefault(test.a, set()).add(test.b)
        met.setdefault(test.b, set()).add(test.a)
    busy: set[int] = set()
    pairs: list[Pair] = []
    partners = [g for g in verdict.good]
    for suspect in sorted(verdict.suspects, key=lambda s: (verdict.evidence.get(s, 0), s)):
        free = [g for g in partners if g not in busy]
        fresh = [g for g in free if g not in met.get(suspect, set())]
        choice = (fresh or free or [None])[0]
        if choice is None:
            break
        busy.update((suspect, choice))
        pairs.append(pair(suspect, choice))
    for a, b in verdict.pending_links:
        if a not in busy and b not in busy:
            busy.update((a, b))
            pairs.append((a, b))
    return Round("confirm", tuple(pairs)) if pairs else None


# -- the rounds, driven ----------------------------------------------------------------------
# measure(index, round, share) -> (the round's pair tests, the round's wall time in seconds);
# ``share`` is the seconds the round may take (its share of the time left)
Measure = Callable[[int, Round, float], "tuple[list[PairTest], float]"]


@dataclass
class Isolation:
    """Every round run, every pair test, and the verdict they gave. ``stopped`` says why the
    rounds ended before everything was settled ("" when they did not)."""

    mode: str
    n: int
    threshold: float
    min_busbw: float | None
    rounds: list[Round] = field(default_factory=list)
    tests: list[PairTest] = field(default_factory=list)
    round_seconds: list[float] = field(default_factory=list)
    verdict: Verdict | None = None
    stopped: str = ""

    def judge(self, final: bool) -> Verdict:
        return judge(self.n, self.tests, self.threshold, self.min_busbw, self.mode == "links",
                     final=final)

    def judged(self) -> Verdict:
        """The final verdict of the rounds run (judged now if the driver did not)."""
        if self.verdict is None:
            self.verdict = self.judge(final=True)
        return self.verdict


def isolate(mode: str, n: int, measure: Measure, *, threshold: float = DEFAULT_THRESHOLD,
            min_busbw: float | None = None, time_left: Callable[[], float] = lambda: 1e9,
            max_confirm_rounds: int | None = None) -> Isolation:
    """Run the first rounds of ``mode``, then confirmation rounds until nothing is pending,
    nothing more can be learned, or no round fits in ``time_left()`` any more (1.5 times the
    shortest round so far: what a round costs when its pairs are quick). ``measure`` runs one
    round within its share: the time left over the rounds still planned, this one and
    ``CONFIRM_ALLOWANCE`` confirmation rounds."""
    result = Isolation(mode, n, threshold, min_busbw)
    planned = first_rounds(mode, n)
    limit = max_confirm_rounds if max_confirm_rounds is not None else 2 * n + 2
    confirms = 0
    while True:
        if planned:
            nxt: Round | None = planned.pop(0)
        else:
            verdict = result.judge(final=False)
            if verdict.settled:
                break
            nxt = confirmation_round(verdict, result.tests) if confirms < limit else None
            if nxt is None:
                result.stopped = "no known-good node left to confirm against" \
                    if confirms < limit else f"{limit} confirmation rounds run"
                break
            confirms += 1
        left = time_left()
        if result.round_seconds and left < 1.5 * min(result.round_seconds):
            result.stopped = "the deadline left no time for another round"
            break
        share = left / (len(planned) + 1 + CONFIRM_ALLOWANCE)
        index = len(result.rounds)
        measured, seconds = measure(index, nxt, share)
        result.rounds.append(nxt)
        result.tests += measured
        result.round_seconds.append(seconds)
    result.verdict = result.judge(final=True)
    return result
