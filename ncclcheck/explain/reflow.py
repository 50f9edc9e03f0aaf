"""Re-join lines a terminal wrapped at a fixed width, as a person reading the log would.

A log copied from a terminal (or pasted from one into an issue) is cut every W characters,
mid-word: the line ``... NCCL WARN Invalid rank req`` / ``uested : 6/4``. Such a file shows
itself in its first block: its longest lines all have exactly the same length W, and there are
several of them. Then every line of exactly W characters is joined with the next one. Files
that are not wrapped pass through untouched (the cost is one look at the first block).
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_right
from typing import BinaryIO, Callable

HEAD = 1 << 20      # bytes looked at to decide whether a file is wrapped
MIN_WIDTH = 60      # narrower "wraps" are more likely a column of short lines
MIN_WRAPPED = 2     # lines of exactly the width needed to call a file wrapped
TERMINAL = 80       # a terminal's and fold's default width: one line cut there is enough
_DIGITS = re.compile(rb"\d+")
SHAPE = 24          # leading bytes that tell one line format from another
SAME_PREFIX = 8     # a prefix this long (digits aside) two lines share is a collector's
PREFIX_SPAN = 64    # leading bytes looked at for it
_MARKS = b"|+#[-=*"  # how records of a table or a log format begin; a wrapped line's rest never
# How a new log record begins; a line that begins so is never the tail of a wrapped one.
_RECORD_START = re.compile(
    rb"\s*(?:\[rank\d+\]:|\[[A-Za-z_]+\d+\]:|\[?\d{4}-\d\d-\d\d[ T_]|\[?[IWEF]\d{4} \d\d:"
    rb"|[\w.-]+:\d+:\d+ \[|Traceback \(|File \"|\d{1,6}: |srun: |slurmstepd: )")


def wrap_width(head: bytes, complete: bool) -> int | None:
    """The width W at which ``head`` (the start of a file) was hard-wrapped, else None."""
    lines = head.split(b"\n")
    if not complete:
        lines = lines[:-1]  # the last piece may be a line cut by the read
    plain = b"\t" not in head and head.isascii()  # most logs: a byte is a column
    lengths = [len(line.rstrip(b"\r")) if plain else columns(line.rstrip(b"\r"))
               for line in lines]
    if not lengths:
        return None
    width = max(lengths)
    if width < MIN_WIDTH:
        return None
    wrapped = [i for i, n in enumerate(lengths[:-1])
               if n == width and _wrappable(lines[i]) and _continues(lines[i + 1])
               and not _same_format(lines[i], lines[i + 1])]
    # Pieces of wrapped text differ; full-width lines of one repeated format (NCCL's "comm ...
    # Init COMPLETE" with single-digit ranks) are a format, not a wrap.
    shapes = {_shape(lines[i]) for i in wrapped}
    if len(wrapped) >= MIN_WRAPPED and len(shapes) >= MIN_WRAPPED:
        return width
    # At the terminal's width, pieces of one format are wrapped too when what follows each is
    # not the same format again (two NCCL WARN lines cut at 80, not a table of 80-wide rows)
    if width == TERMINAL and len(wrapped) >= MIN_WRAPPED and all(
            _shape(lines[i + 1]) != _shape(lines[i]) for i in wrapped):
        return width
    # A short paste cut once at the terminal's width, mid-text: the rest starts at column 0
    # with no indent, or with the one space the cut fell on (a traceback's code line, a
    # table's next row would be indented further or be a record)
    once = [i for i in wrapped if width == TERMINAL and not _indented(lines[i + 1])
            and _shape(lines[i + 1]) != _shape(lines[i])]
    return width if len(wrapped) == len(once) == 1 else None


def _shape(line: bytes) -> bytes:
    return _DIGITS.sub(b"0", line[:SHAPE])


def columns(line: bytes) -> int:
    """The columns ``line`` takes on a terminal: a tab to the next multiple of 8, a UTF-8
    character one column (a wrapped capture is cut by columns, not bytes)."""
    if b"\t" not in line and line.isascii():
        return len(line)
    column = 0
    for char in line.decode("utf-8", "replace"):
        column = column + 8 - column % 8 if char == "\t" else column + 1
    return column


def _continues(line: bytes) -> bool:
    """Whether ``line`` can be the rest of the line above (not empty, not a new record)."""
    return bool(line.strip()) and not _RECORD_START.match(line)


def _same_format(above: bytes, line: bytes) -> bool:
    """Whether ``line`` starts as a record of the format of ``above`` does: the same shape, or
    the same leading mark (nccl-tests' "#" rows, "[0] ..." records, a table's "|"), which the
    rest of a wrapped line does not repeat; read after a prefix both share (a collector's:
    a timestamping tee's clock, "train-1  | "), which a collector puts on every line."""
    above, line = _DIGITS.sub(b"0", above[:PREFIX_SPAN]), _DIGITS.sub(b"0", line[:PREFIX_SPAN])
    common = 0
    for a, b in zip(above, line):
        if a != b:
            break
        common += 1
    common = above.rfind(b" ", 0, common) + 1  # a collector's prefix ends at a space
    if common >= SAME_PREFIX:
        above, line = above[common:].lstrip(b" "), line[common:].lstrip(b" ")
        if not line.strip():
            return True  # the collector's prefix on an empty line: a record of its own
    if above[:1] and line[:1] and above[:1] in _MARKS and line[:1] in _MARKS:
        return True
    return _shape(line) == _shape(above)


def _indented(line: bytes) -> bool:
    """Whether ``line`` starts indented: more than the single space a wrap can cut at."""
    return line[:1].isspace() and (line[:1] != b" " or line[1:2].isspace() or not line[1:2])


def _wrappable(line: bytes) -> bool:
    """A separator (``=====``, ``*****``) is as long as the designer liked, not a wrap."""
    return len(set(line.strip())) > 1


class _Chained:
    """The bytes already read, then the rest of the stream."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self._head, self._rest = head, rest

    def read(self, size: int = -1) -> bytes:
        if self._head:
            out, self._head = self._head, b""
            return out
        return self._rest.read(size)


class _Reflowed:
    """The stream with every line of exactly ``width`` characters joined to the next; records
    where joins happened so line numbers can be given back in the file's own numbering."""

    def __init__(self, head: bytes, rest: BinaryIO, width: int) -> None:
        self._source = _Chained(head, rest)
        self._width = width
        self._carry = b""
        self._pieces: list[bytes] = []  # a wrapped line seen so far, waiting for its tail
        self._logical = 0                # logical lines emitted so far
        self._joined_at = array("q")     # logical line number (1-based) made of several lines
        self._joins_upto = array("q")    # joins in logical lines up to that one, cumulative

    def read(self, size: int = -1) -> bytes:
        while True:
            data = self._source.read(size)
            if not data:
                tail = [self._carry] if self._carry else []
                out = self._join(tail) + (b"".join(self._pieces) if self._pieces else b"")
                self._carry, self._pieces = b"", []
                return out
            *complete, self._carry = (self._carry + data).split(b"\n")
            out = self._join(complete)
            if out:
                return out

    def _join(self, lines: list[bytes]) -> bytes:
        out: list[bytes] = []
        for line in lines:
            if self._pieces and (not _continues(line) or _same_format(self._pieces[-1], line)):
                # a full-width line that was not wrapped: what follows is a new record, or
                # the next row of the same format (nccl-tests' "#   Rank  0 Pid ..." rows)
                out.append(self._emit(self._pieces))
                self._pieces = []
            body = line.rstrip(b"\r")
            if columns(body) == self._width and _wrappable(body):
                self._pieces.append(body)
                continue
            out.append(self._emit(self._pieces + [line]))
            self._pieces = []
        return b"".join(part + b"\n" for part in out)

    def _emit(self, pieces: list[bytes]) -> bytes:
        self._logical += 1
        if len(pieces) > 1:
            total = self._joins_upto[-1] if self._joins_upto else 0
            self._joined_at.append(self._logical)
            self._joins_upto.append(total + len(pieces) - 1)
        return b"".join(pieces)

    def physical(self, logical: int) -> int:
        """The file's line number of the first piece of logical line ``logical``."""
        index = bisect_right(self._joined_at, logical - 1)
        return logical + (self._joins_upto[index - 1] if index else 0)


def unwrap(stream: BinaryIO) -> tuple[BinaryIO, Callable[[int], int]]:
    """The stream to scan and how to turn its line numbers into the file's."""
    head = stream.read(HEAD)
    width = wrap_width(head, complete=len(head) < HEAD)
    if width is None:
        return _Chained(head, stream), lambda number: number  # type: ignore[return-value]
    reflowed = _Reflowed(head, stream, width)
    return reflowed, reflowed.physical  # type: ignore[return-value]
