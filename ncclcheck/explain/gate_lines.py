"""Whether a line of a block may hold what the gate looks for: its one question, two ways.

Hyperscan answers it for the whole block in one pass (every expression runs on to its line's
end, so a match is reported at the line's newline). Where Hyperscan is not installed, Python
asks it of each line the gate is about to leave out, and remembers the answer per verbatim line
(a healthy run repeats its warnings):

- whether an owner can claim the line: the owners' own patterns on the line's message, as the
  matcher reads it (lines.parse_line), which is exact where the translated expressions only err
  on the side of matching; the translations are not run by Python's ``re``, whose backtracking
  over a run of optional prefixes grows exponentially with their count;
- whether the line holds a text that follows a literal's leading space: one alternation of
  plain texts.
"""

from __future__ import annotations

import re
from typing import Any, Protocol, Sequence

from ncclcheck.catalogue import Signature
from ncclcheck.explain.lines import parse_line

MEMO_SIZE = 4096   # distinct lines whose answer is remembered


class LineTest(Protocol):
    def prepare(self, body: bytes) -> None:
        """Read a new block (before any ``hit`` on it)."""

    def hit(self, body: bytes, start: int, end: int) -> bool:
        """Whether the line ``body[start:end]`` (``end`` at its newline) may hold a match."""


class HyperscanLines:
    """Hyperscan block databases, scanned as one: the ends of every match in the block."""

    def __init__(self, databases: Sequence[Any]) -> None:
        self._databases = tuple(databases)
        self._ends: set[int] = set()

    def prepare(self, body: bytes) -> None:
        ends: set[int] = set()
        for database in self._databases:
            database.scan(body, match_event_handler=lambda _e, _s, end, _f, _c: ends.add(end))
        self._ends = ends

    def hit(self, body: bytes, start: int, end: int) -> bool:
        return end in self._ends


class _Remembered:
    """A per-line answer, asked once per verbatim line (bounded)."""

    def __init__(self) -> None:
        self._memo: dict[bytes, bool] = {}

    def prepare(self, body: bytes) -> None:
        return None

    def hit(self, body: bytes, start: int, end: int) -> bool:
        text = body[start:end]
        known = self._memo.get(text)
        if known is None:
            if len(self._memo) >= MEMO_SIZE:
                self._memo.clear()
            known = self._memo[text] = self._ask(text)
        return known

    def _ask(self, text: bytes) -> bool:
        raise NotImplementedError


class ClaimLines(_Remembered):
    """Whether one of ``owners`` matches the line's message, as the matcher would try it
    (a line that is not ASCII is kept: the gate leaves out ASCII lines only)."""

    def __init__(self, owners: Sequence[Signature]) -> None:
        super().__init__()
        self._owners = tuple(owners)

    def _ask(self, text: bytes) -> bool:
        try:
            line = text.decode("ascii").rstrip("\r")  # as scan.py decodes a candidate
        except UnicodeDecodeError:
            return True
        message = parse_line(line).message
        return any(sig.match(message) is not None for sig in self._owners)


class TextLines(_Remembered):
    """Whether the line holds one of ``texts`` (each caseless or not)."""

    def __init__(self, texts: Sequence[bytes], caseless: Sequence[bool]) -> None:
        super().__init__()
        parts = sorted({(b"(?i:%s)" if fold else b"%s") % re.escape(text)
                        for text, fold in zip(texts, caseless)})
        self._search = re.compile(b"|".join(parts)).search if parts else None

    def _ask(self, text: bytes) -> bool:
        return self._search is not None and self._search(text) is not None
