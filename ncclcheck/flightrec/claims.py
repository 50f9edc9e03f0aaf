"""A pickle's claims checked against its size before the C unpickler believes them.

The C unpickler sizes memory by what opcodes claim, not by what the file holds: a put into
memo slot N grows the memo to 2N slots and clears each one (a 250 KB dump whose first put
names slot 150,000,000 costs 5 to 15 s and 4.7 GB), and a string, bytes or frame that claims
N bytes asks the stream for N bytes at once. No pickler writes such a file: memo slots are
numbered from 0, one per put, so a slot never reaches the number of bytes before it, and a
length never exceeds the bytes left. A corrupted dump is refused here instead, in one line.

The walk reads opcodes, not values: runs of fixed-size opcodes (almost all of a dump: memo
references, small integers, marks, empty containers) are passed over by one regular
expression, and only the opcodes that carry a length or a long memo slot are looked at in
Python. Where the unpickler itself must stop (an unknown opcode, the data running out, a
negative length, ``STOP``), the walk stops too: the unpickler reports those as it always did.
The opcodes' argument sizes come from ``pickletools``' table.
"""

from __future__ import annotations

import functools
import pickletools
import re
import sys

_STOP = ord(".")
_FRAME = 0x95                              # protocol 4: the next N bytes are one frame
_LONG_MEMO = frozenset(b"rj")              # LONG_BINPUT, LONG_BINGET: a 4-byte slot
_TEXT_MEMO = frozenset(b"pg")              # PUT, GET: the slot in decimal, up to a newline
_PAIRS = "stringnl_noescape_pair"          # GLOBAL and INST read two lines
_SHORT = 8                                 # one-byte lengths the run passes over (LONG1 of 64 bits)
# nothing follows the run, so it never gives back: possessive where re has it (a fifth faster)
_MANY = b"*+" if sys.version_info >= (3, 11) else b"*"
_WIDTHS = {pickletools.TAKEN_FROM_ARGUMENT1: (1, False),
           pickletools.TAKEN_FROM_ARGUMENT4: (4, True),
           pickletools.TAKEN_FROM_ARGUMENT4U: (4, False),
           pickletools.TAKEN_FROM_ARGUMENT8U: (8, False)}


class Overclaim(ValueError):
    """A pickle that claims more memo slots or bytes than its size allows: said in one line."""


def _tables() -> tuple[dict[int, int], dict[int, tuple[int, bool]], dict[int, int],
                       dict[int, str]]:
    """Per opcode byte: its fixed argument size, its length prefix (bytes, signed), or the
    lines it reads; and its name."""
    fixed, prefixed, lines, names = {}, {}, {}, {}
    for op in pickletools.opcodes:
        code = ord(op.code)
        names[code] = op.name
        arg = op.arg
        if arg is None:
            fixed[code] = 0
        elif arg.n >= 0:
            fixed[code] = arg.n
        elif arg.n in _WIDTHS:
            prefixed[code] = _WIDTHS[arg.n]
        else:
            lines[code] = 2 if arg.name == _PAIRS else 1
    return fixed, prefixed, lines, names


_FIXED, _PREFIXED, _LINES, _NAMES = _tables()


@functools.lru_cache(maxsize=64)
def _run(bits: int) -> re.Pattern[bytes]:
    """Any number of fixed-size opcodes, long memo slots below ``2**bits`` and one-byte
    lengths up to ``_SHORT`` among them (what falls outside is looked at one by one; a length
    beyond the data never matches); not ``STOP``, not a frame."""
    by_size: dict[int, list[int]] = {}
    for code, size in _FIXED.items():
        if code not in (_STOP, _FRAME) and code not in _LONG_MEMO:
            by_size.setdefault(size, []).append(code)
    # the commonest first: one-byte arguments (memo references, small integers), then runs
    # of opcodes without an argument (marks, empty containers, appends): a quarter faster
    order = sorted(by_size, key=lambda size: (size != 1, size))
    parts = [_any_of(by_size[size]) + (b"." * size if size < 3 else b".{%d}" % size)
             + (b"+" if size == 0 else b"") for size in order]
    parts.append(_any_of(sorted(_LONG_MEMO)) + _below(bits))
    short = [code for code, (width, _) in _PREFIXED.items() if width == 1]
    parts.append(_any_of(short) + b"(?:" + b"|".join(re.escape(bytes([size])) + b"." * size
                                                     for size in range(_SHORT + 1)) + b")")
    return re.compile(b"(?:" + b"|".join(parts) + b")" + _MANY, re.S)


def _any_of(codes: list[int]) -> bytes:
    return b"[" + b"".join(re.escape(bytes([c])) for c in codes) + b"]"


def _below(bits: int) -> bytes:
    """Four little-endian bytes whose number is below ``2**bits``."""
    if bits >= 32:
        return b".{4}"
    whole, rest = divmod(bits, 8)
    top = b"[" + re.escape(b"\x00") + b"-" + re.escape(bytes([(1 << rest) - 1])) + b"]"
    return b".{%d}" % whole + top + b"\x00" * (3 - whole)


def check_claims(data: bytes, slots: int | None = None) -> None:
    """Raise Overclaim when an opcode of the pickle in ``data`` names a memo slot of
    ``slots`` or more (by default: ``len(data)``; a piece cut from a larger pickle keeps the
    whole's numbering and passes the whole's size) or claims more bytes than follow it."""
    limit = len(data) if slots is None else slots
    run = _run(max(limit, 1).bit_length() - 1)
    end = len(data)
    at = 0
    while True:
        at = run.match(data, at).end()  # type: ignore[union-attr]  # "*" always matches
        if at >= end:
            return
        code = data[at]
        if code in _PREFIXED:
            width, signed = _PREFIXED[code]
            start = at + 1 + width
            if start > end:
                return
            length = int.from_bytes(data[at + 1:start], "little", signed=signed)
            if length < 0:
                return
            _room(data, at, length, end - start)
            at = start + length
        elif code == _FRAME:
            if at + 9 > end:
                return
            _room(data, at, int.from_bytes(data[at + 1:at + 9], "little"), end - at - 9)
            at += 9
        elif code in _LONG_MEMO:
            if at + 5 > end:
                return
            _slot(data, at, int.from_bytes(data[at + 1:at + 5], "little"), limit)
            at += 5
        elif code in _LINES:
            found = _line_ends(data, at + 1, _LINES[code])
            if found is None:
                return
            if code in _TEXT_MEMO:
                _slot(data, at, _decimal(data, at, data[at + 1:found - 1]), limit)
            at = found
        else:
            return  # STOP, an unknown opcode, or a fixed argument cut short


def _line_ends(data: bytes, at: int, count: int) -> int | None:
    """Where ``count`` newline-ended lines from ``at`` end; None when the data ends first."""
    for _ in range(count):
        newline = data.find(b"\n", at)
        if newline < 0:
            return None
        at = newline + 1
    return at


def _decimal(data: bytes, at: int, text: bytes) -> int:
    try:
        return int(text)
    except ValueError:
        raise Overclaim(f"{_NAMES[data[at]]} at byte {at} names no memo slot") from None


def _slot(data: bytes, at: int, slot: int, limit: int) -> None:
    if slot >= limit:
        raise Overclaim(f"{_NAMES[data[at]]} at byte {at} names memo slot {slot:,}, more than "
                        f"a pickle of {limit:,} bytes can hold")


def _room(data: bytes, at: int, length: int, left: int) -> None:
    if length > left:
        raise Overclaim(f"{_NAMES[data[at]]} at byte {at} claims {length:,} bytes where "
                        f"{left:,} remain")
