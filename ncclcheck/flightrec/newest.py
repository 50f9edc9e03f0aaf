"""A large dump's newest entries, decoded without decoding the rest.

A hang is decided by the last collectives each rank entered, and a 1,024-rank job's dumps hold
two million entries: decoding every one costs seconds. torch writes a dump as a protocol-2
pickle of one dict whose last key is ``entries``; the entries are dicts written one after the
other, each opening the same way (an empty dict, a mark, the memo reference to its first
key). So the newest entries can be cut out of the bytes and decoded alone, with the memo the
head and the first entries built (the keys, the shared frames, the strings). Every cut is checked by the
decoding itself: the head must decode to the dict with an empty ``entries`` list, the tail to
exactly as many dicts as boundaries were found. A file of any other layout (JSON, other
protocols, a key after ``entries``, a string first written after the longest head tried) is
not cut: ``None`` tells the caller to decode it whole.

The decoding is the restricted unpickler's: no global, no persistent id, no code; and every
piece it is given is first checked for memo slots and lengths beyond the file (claims.py).
"""

from __future__ import annotations

import io
import pickle
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ncclcheck.flightrec.claims import check_claims

_PUT = rb"(?:q.|r....)?"                   # the memo put an encoder may write after an opcode
_ENTRIES_OPEN = re.compile(rb"(?:X\x07\x00\x00\x00|\x8c\x07)entries" + _PUT + rb"\]" + _PUT
                           + rb"\(", re.S)
_DICT_OPEN = re.compile(rb"\}" + _PUT + rb"\(", re.S)
_ENTRIES_CLOSE = re.compile(rb"e" + _PUT + rb"u" + _PUT + rb"\.\Z", re.S)
_STREAM_BUFFER = 1 << 20
HEAD_ENTRIES = (16, 128, 1024)             # entries decoded at the head, for the memo, in turn
_MEMO_MISSING = object()


@dataclass(frozen=True)
class Newest:
    """The cut: the dump's dict with ``entries`` holding only the newest ones."""

    data: dict
    first: dict                    # the oldest entry the buffer holds (was the ring wrapped?)


def newest_entries(raw: bytes, newest: int,
                   unpickler: Callable[[io.BufferedReader], pickle.Unpickler]) -> Newest | None:
    """The dump in ``raw`` with only its ``newest`` entries decoded; None when the file is not
    laid out so that it can be cut, or holds too few entries for a cut to save anything."""
    if newest < 1 or len(raw) < 8 or raw[:2] not in (b"\x80\x02", b"\x80\x03"):
        return None
    opened = _ENTRIES_OPEN.search(raw)
    closed = _ENTRIES_CLOSE.search(raw, len(raw) - 16 if len(raw) > 16 else 0)
    if opened is None or closed is None or closed.start() <= opened.end():
        return None
    first, end = opened.end(), closed.start()
    boundary = _boundary(raw, first)
    if boundary is None:
        return None
    starts = _last_starts(raw, boundary, first + 1, end, newest + 1)
    if len(starts) <= newest:
        return None                 # hardly more than the window: decode it whole
    tail_start = starts[-newest]
    for count, head_end in _heads(raw, boundary, first + 1, tail_start):
        cut = _cut(raw[:head_end] + b"eu.", count, raw[tail_start:end], newest, unpickler,
                   len(raw))
        if cut is not _MEMO_MISSING:
            return cut
    return None


def _heads(raw: bytes, boundary: re.Pattern[bytes], start: int,
           tail_start: int) -> Iterator[tuple[int, int]]:
    """Where the head ends when it holds 16, 128, 1,024... entries, while that is short of the
    tail: the memo of a longer head holds the strings and frames a later entry first used."""
    wanted = iter(HEAD_ENTRIES)
    count = next(wanted)
    for seen, found in enumerate(boundary.finditer(raw, start, tail_start), 1):
        if seen == count:
            yield count, found.start()
            count = next(wanted, 0)
            if not count:
                return


def _cut(head_bytes: bytes, count: int, tail_bytes: bytes, newest: int,
         unpickler: Callable[[io.BufferedReader], pickle.Unpickler],
         size: int) -> Newest | None | object:
    """The head's first ``count`` entries decoded (for the memo), then the tail with that memo
    (its memo slots numbered as in the whole file of ``size`` bytes). ``_MEMO_MISSING`` when
    the tail refers to something the head did not define; None when a piece does not decode
    (or claims more than the file holds: the whole decode then says why)."""
    tail_bytes = b"\x80\x02](" + tail_bytes + b"e."
    head_reader = unpickler(_stream(head_bytes))
    tail_reader = unpickler(_stream(tail_bytes))
    try:
        check_claims(head_bytes)
        check_claims(tail_bytes, size)
        head = head_reader.load()
        tail_reader.memo = head_reader.memo
        entries = tail_reader.load()
    except pickle.UnpicklingError as exc:
        return _MEMO_MISSING if "memo" in str(exc).lower() else None
    except (EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError,
            OverflowError, MemoryError, RecursionError, UnicodeDecodeError):
        return None
    if not (isinstance(head, dict) and isinstance(head.get("entries"), list)
            and len(head["entries"]) == count and isinstance(head["entries"][0], dict)):
        return None
    if not (isinstance(entries, list) and len(entries) == newest
            and all(isinstance(e, dict) for e in entries)):
        return None
    first_entry = head["entries"][0]
    head["entries"] = entries
    return Newest(head, first_entry)


def _boundary(raw: bytes, first: int) -> re.Pattern[bytes] | None:
    """How every entry after the first opens: its dict, a mark, and the memo reference to the
    key the first entry defined (or referred to) at the same place."""
    opened = _DICT_OPEN.match(raw, first)
    if opened is None:
        return None
    at = opened.end()
    index = _memo_index(raw, at, b"h", b"j")       # the key referred to
    if index is None:
        if raw[at:at + 1] == b"X":                  # the key written, then put in the memo
            after = at + 5 + int.from_bytes(raw[at + 1:at + 5], "little")
        elif raw[at:at + 1] == b"\x8c":
            after = at + 2 + raw[at + 1]
        else:
            return None
        index = _memo_index(raw, after, b"q", b"r")
        if index is None:
            return None
    long_ref = re.escape(b"j" + index.to_bytes(4, "little"))
    ref = long_ref if index > 0xFF else rb"(?:h" + re.escape(bytes([index])) + b"|" + long_ref + b")"
    return re.compile(_DICT_OPEN.pattern + ref, re.S)


def _memo_index(raw: bytes, at: int, short: bytes, long: bytes) -> int | None:
    """The memo index of the get or put opcode at ``at`` (one byte after ``short``, four after
    ``long``); None when another opcode is there."""
    op = raw[at:at + 1]
    if op == short:
        return raw[at + 1]
    if op == long:
        return int.from_bytes(raw[at + 1:at + 5], "little")
    return None


def _last_starts(raw: bytes, boundary: re.Pattern[bytes], lowest: int, end: int,
                 wanted: int) -> list[int]:
    """The starts of the last ``wanted`` entries (fewer when the file holds fewer), found by
    looking back from the end over a span that doubles until it holds enough."""
    span = max(4096, (end - lowest) // 64)
    while True:
        start = max(lowest, end - span)
        starts = [m.start() for m in boundary.finditer(raw, start, end)]
        if len(starts) >= wanted or start == lowest:
            return starts[-wanted:] if len(starts) >= wanted else starts
        span *= 4


def _stream(data: bytes) -> io.BufferedReader:
    """A stream the unpickler can look ahead in (without ``peek`` it reads in small pieces,
    twice as slow)."""
    return io.BufferedReader(io.BytesIO(data), _STREAM_BUFFER)


def decode(data: bytes, unpickler: Callable[[io.BufferedReader], pickle.Unpickler]) -> Any:
    """A whole pickle, through a stream the unpickler can look ahead in; raises
    claims.Overclaim, before decoding anything, for a memo slot or length beyond its size."""
    check_claims(data)
    return unpickler(_stream(data)).load()
