"""Leave out the lines that hold only a common literal which no signature can match there.

A healthy run can print "Error: " by the hundred thousand (``Retrying after ConnectionError:
read timed out``); the literal lets every such line through to Python, which decodes it,
peels its prefixes and tries the catch-all on it, for nothing. Once a literal shows up often
in a block (``NOISY_HITS``), the signatures that own it are scanned with Hyperscan databases
of their full patterns (hsregex.py; one per signature, compiled only then and once, as compiling
costs time); with the Aho-Corasick engine Python tries the owners' own patterns on each such
line's message, as the matcher would, remembered per verbatim line (gate_lines.py). A line whose
literals are all such common ones is left out only when nothing that reads candidate lines can
use it:

- no full pattern of those signatures matches it (Hyperscan's expressions err on the side of
  matching; Python's answer is the matcher's own);
- neither the context (context.py) nor the keyword fallback (fallback.py) would keep it;
- it is ASCII, not very long, and has no full date while the log's year is still unknown;
- it does not start with a syslog clock (journald's source after it is not in the prefixes
  the Hyperscan pass peels: lines.SCAN_PREFIXES);
- it is not an exception header whose next line could complete a message of another
  signature than the last-resort ones (a literal of one in either line, or across the join;
  the matcher never joins lines for a last-resort signature).

So what explain reports does not change; only the work for lines that cannot count does.
What a line says by itself is remembered per verbatim line, as a healthy run repeats itself.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any, Iterable, Mapping, Sequence

from ncclcheck.catalogue import Signature
from ncclcheck.explain.context import wants as context_wants
from ncclcheck.explain.fallback import line_weight
from ncclcheck.explain.gate_lines import ClaimLines, HyperscanLines, LineTest, TextLines
from ncclcheck.explain.hscache import block_database
from ncclcheck.explain.hsregex import Untranslatable, prefix_run, to_hyperscan
from ncclcheck.explain.lines import GOES_ON, SCAN_PREFIXES, SYSLOG_START, parse_line
from ncclcheck.explain.prefilter import Literal

NOISY_HITS = 256   # hits of one literal in a block that make a full-pattern pass worth it
MEMO_SIZE = 4096   # distinct messages whose _feeds answer is remembered
SUFFIX = 4         # characters before a literal's space that index the cut
_STRIPPED = b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"  # what str.rstrip() takes off an ASCII line
_FULL_DATE = re.compile(rb"[\s\x1c-\x1f]*\[?\d{4}-\d\d-\d\d")  # as engine.py sets the year


@dataclass(frozen=True)
class LineFacts:
    """What decides, apart from its neighbours, whether a line can be left out."""

    dated: bool                    # starts with a full date (the reader may need its year)
    header: bool                   # may go on below (lines.GOES_ON)
    after: re.Pattern[bytes] | None  # what the line below must hold to complete a literal


_UNSEEN = LineFacts(dated=True, header=True, after=None)  # marks a line not yet remembered

# A line holding literals: (where its text starts, its start, its end, its literal ids); a
# plain tuple, as a dense log has hundreds of thousands of them.
LitLine = tuple[int, int, int, set[int]]


class Gate:
    """Per block, which lines holding only common literals can be left out (the engines that
    name each hit's literal: Hyperscan, Aho-Corasick). ``signature_literals`` holds each
    signature's prefilter literals by id, ``literals`` the index's literals (a hit's id is its
    place there); ``hyperscan`` False: Python asks the owners' patterns, line by line."""

    def __init__(self, signatures: Sequence[Signature],
                 signature_literals: Mapping[str, Sequence[Literal]],
                 literals: Sequence[Literal], hyperscan: bool = True) -> None:
        # what the gate reads is built when a block first has a common literal: a small log
        # never has one, and pays nothing for it
        self._use_hyperscan = hyperscan
        self._signatures = signatures
        self._signature_literals = signature_literals
        self._literals = literals
        self._expressions: dict[str, list[bytes] | None] = {}
        self._after_memo: dict[bytes, re.Pattern[bytes] | None] = {}
        self._facts_memo: dict[bytes, LineFacts | None] = {}
        self._fed: dict[str, bool] = {}

    @cached_property
    def _hs(self) -> Any:
        import hyperscan  # deferred: slow to load, and asked for only by its engine's gate
        return hyperscan

    @cached_property
    def _start(self) -> bytes:
        return prefix_run(SCAN_PREFIXES, re.X)

    @cached_property
    def _place(self) -> dict[Literal, int]:
        return {lit: index for index, lit in enumerate(self._literals)}

    @cached_property
    def _owners(self) -> dict[int, list[Signature]]:
        """A literal's id -> the signatures it leads to."""
        place = self._place
        owners: dict[int, list[Signature]] = {}
        for sig in self._signatures:
            for lit in self._signature_literals[sig.id]:
                if lit in place:
                    owners.setdefault(place[lit], []).append(sig)
        return owners

    @cached_property
    def _firm_owned(self) -> frozenset[int]:
        return frozenset(i for i, owners in self._owners.items()
                         if any(not sig.last_resort for sig in owners))

    @cached_property
    def _cuts(self) -> tuple[tuple[bytes, bool, bytes], ...]:
        return _cuts(lit for lit, i in self._place.items() if i in self._firm_owned)

    @cached_property
    def _cut_index(self) -> dict[bytes, list[int]]:
        """Cuts by the last SUFFIX characters before the space (lower-cased; all when shorter)."""
        index: dict[bytes, list[int]] = {}
        for where, (before, _, _) in enumerate(self._cuts):
            index.setdefault(before[-SUFFIX:].lower(), []).append(where)
        return index

    @cached_property
    def _longest_before(self) -> int:
        return max((len(before) for before, _, _ in self._cuts), default=0) + 1

    def noisy(self, hits: Iterable[tuple[int, int]]) -> frozenset[int]:
        """The literals common enough in this block to be worth a full-pattern pass."""
        counts = Counter(literal_id for _, literal_id in hits)
        return frozenset(i for i, n in counts.items()
                         if n >= NOISY_HITS and self._translatable(i))

    def _translatable(self, literal_id: int) -> bool:
        """Whether every pattern of the literal's owners has a Hyperscan form (Python reads
        them as they are)."""
        if not self._use_hyperscan:
            return True
        for sig in self._owners.get(literal_id, ()):
            if sig.id not in self._expressions:
                try:
                    self._expressions[sig.id] = [to_hyperscan(p, 0, self._start)
                                                 for p in sig.patterns]
                except Untranslatable:
                    self._expressions[sig.id] = None
            if self._expressions[sig.id] is None:
                return False
        return True

    def keep(self, body: bytes, lines: list[LitLine], noisy: frozenset[int], max_line: int,
             year_known: bool) -> list[LitLine]:
        """The lines among ``lines`` that still go to the matcher."""
        owners, afters = self._database(noisy), self._spaced_database()
        if owners is None or afters is None:
            return lines
        owners.prepare(body)  # where an owner's full pattern may match
        afters.prepare(body)  # which lines hold a text that follows a literal's leading space
        ascii_block = body.isascii()
        literals_at = {line_start: ids for _, line_start, _, ids in lines}
        return [line for line in lines
                if not line[3] <= noisy or owners.hit(body, line[1], line[2])
                or not self._droppable(body, line, max_line, year_known, ascii_block,
                                       literals_at, afters)]

    def _droppable(self, body: bytes, line: LitLine, max_line: int, year_known: bool,
                   ascii_block: bool, literals_at: dict[int, set[int]],
                   spaced: LineTest) -> bool:
        _, line_start, line_end, ids = line
        if line_end - line_start > max_line // 2:
            return False
        text = body[line_start:line_end]
        facts = self._facts_memo.get(text, _UNSEEN)
        if facts is _UNSEEN:
            facts = self._facts(text, ascii_block)
        if facts is None or (facts.dated and not year_known):
            return False
        if facts.header:
            below = line_end + 1
            if below >= len(body) or not self._firm_owned.isdisjoint(
                    literals_at.get(below, ())) or not self._firm_owned.isdisjoint(ids):
                return False
            next_end = body.find(b"\n", below)
            next_end = len(body) if next_end < 0 else next_end
            if spaced.hit(body, below, next_end) or (facts.after is not None
                                      and facts.after.search(body, below, next_end)):
                return False
        return True

    def _facts(self, text: bytes, ascii_block: bool) -> LineFacts | None:
        """What a line says by itself; None when it is kept whatever its neighbours
        (remembered: a healthy run repeats its warnings verbatim)."""
        if len(self._facts_memo) >= MEMO_SIZE:
            self._facts_memo.clear()
        facts = None
        if (ascii_block or text.isascii()) and not SYSLOG_START.match(text) \
                and not self._feeds(text):
            header = bool(GOES_ON.search(text))
            tail = text.rstrip(_STRIPPED)
            facts = LineFacts(dated=bool(_FULL_DATE.match(text)), header=header,
                              after=self._afters(tail[-self._longest_before:]) if header
                              else None)
        self._facts_memo[text] = facts
        return facts

    def _feeds(self, text: bytes) -> bool:
        """Whether the context (context.py) or the keyword fallback (fallback.py) could keep
        the line: their own tests on its message, less the ones that only turn a line down."""
        message = parse_line(text.decode("ascii")).message
        known = self._fed.get(message)
        if known is None:
            if len(self._fed) >= MEMO_SIZE:
                self._fed.clear()
            known = self._fed[message] = _feeds(message)
        return known

    def _afters(self, tail: bytes) -> re.Pattern[bytes] | None:
        """What must follow the join for a literal cut at a space to span it, given the text
        before the join (remembered: a repeated error message ends the same way)."""
        if tail in self._after_memo:
            return self._after_memo[tail]
        if len(self._after_memo) >= MEMO_SIZE:
            self._after_memo.clear()
        lowered = tail[-SUFFIX:].lower()
        fitting = frozenset(
            place for size in range(1, len(lowered) + 1)  # leading spaces: see _database
            for place in self._cut_index.get(lowered[len(lowered) - size:], ())
            if (tail.lower() if self._cuts[place][1] else tail).endswith(self._cuts[place][0]))
        found = self._after_memo[tail] = self._union(fitting) if fitting else None
        return found

    @lru_cache(maxsize=256)
    def _union(self, places: frozenset[int]) -> re.Pattern[bytes]:
        """One search for the texts after the cuts at ``places``."""
        parts = sorted({(b"(?i:%s)" if caseless else b"%s") % re.escape(after)
                        for before, caseless, after in (self._cuts[p] for p in places)})
        return re.compile(b"|".join(parts))

    @lru_cache(maxsize=32)
    def _database(self, noisy: frozenset[int]) -> LineTest | None:
        """The full patterns of the owners of ``noisy``; None when there are none or they will
        not compile. Hyperscan: one database per owning signature, each built once (and kept
        in the cache folder): another block's or log's set of noisy literals shares most of
        its owners, and compiling a pattern costs far more than scanning with it."""
        if not self._use_hyperscan:
            found = {sig.id: sig for i in noisy for sig in self._owners.get(i, ())}
            return ClaimLines([found[sig_id] for sig_id in sorted(found)]) if found else None
        owners = sorted({sig.id for i in noisy for sig in self._owners.get(i, ())
                         if self._expressions[sig.id]})
        databases = [self._signature_database(sig_id) for sig_id in owners]
        if not databases or any(database is None for database in databases):
            return None
        return HyperscanLines(databases)

    @lru_cache(maxsize=1024)
    def _signature_database(self, sig_id: str) -> Any:
        """The database of one signature's full patterns; None when they will not compile."""
        expressions = self._expressions[sig_id] or []
        try:
            return block_database(expressions, [self._hs.HS_FLAG_MULTILINE] * len(expressions))
        except self._hs.error:
            return None

    @lru_cache(maxsize=1)
    def _spaced_database(self) -> LineTest | None:
        """The texts that follow a literal's leading space (a header line's join can start
        any of them): the same for every block, so built once, apart from the owners' (it
        was most of each build's time); None when it will not compile."""
        spaced = [(after, caseless) for before, caseless, after in self._cuts if not before]
        if not self._use_hyperscan:
            return TextLines([after for after, _ in spaced], [caseless for _, caseless in spaced])
        flags = [self._hs.HS_FLAG_MULTILINE | (self._hs.HS_FLAG_CASELESS if caseless else 0)
                 for _, caseless in spaced]
        try:
            return HyperscanLines([block_database(
                [re.escape(after) + b"[^\\n]*$" for after, _ in spaced], flags)])
        except self._hs.error:
            return None


def _feeds(message: str) -> bool:
    """Whether the NCCL summary, context.LogContext.feed or fallback.ErrorCues.feed could use
    ``message`` (each owner says for itself)."""
    return "INFO" in message or context_wants(message) or line_weight(message) > 0


def _cuts(literals: Iterable[Literal]) -> tuple[tuple[bytes, bool, bytes], ...]:
    """Each literal cut at each of its spaces: (text before, caseless, text after)."""
    out: set[tuple[bytes, bool, bytes]] = set()
    for lit in literals:
        text = lit.text.encode()
        out.update((text[:cut], lit.caseless, text[cut + 1:])
                   for cut, char in enumerate(text) if char == 0x20)
    return tuple(sorted(out))
