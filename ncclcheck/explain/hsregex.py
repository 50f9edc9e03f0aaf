"""A Python pattern as a Hyperscan expression that matches at least where the pattern does.

Hyperscan then tells, in one pass over a block of log bytes, which lines a signature can really
match, so a line that only holds a common literal ("Error: " in a retry warning) need not be
decoded and tried in Python (gate.py). The expression is written from the parsed pattern, not
from its text, and errs on the side of matching: lookarounds and ``$`` are dropped, a ``^``
allows any run of the launcher / logger prefixes that ``lines.parse_line`` peels off, a
trailing optional part is cut, a long bounded repeat is left unbounded, and every expression
runs on to the end of its line, so a line
is reported once, at its newline. It is exact for ASCII text only (a non-ASCII character only
widens a class); the caller treats non-ASCII and very long lines as matching.
"""

from __future__ import annotations

import re

try:  # Python 3.11+
    from re import _constants as _c, _parser as _p  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _p  # type: ignore[no-redef]

_SPACE = frozenset(b"\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f ")  # what str's \s matches in ASCII
_DIGIT = frozenset(b"0123456789")
_WORD = frozenset(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_HIGH = frozenset(range(0x80, 0x100))
_ASCII = frozenset(range(0x80))
_CATEGORIES = {
    _c.CATEGORY_DIGIT: _DIGIT, _c.CATEGORY_NOT_DIGIT: (_ASCII - _DIGIT) | _HIGH,
    _c.CATEGORY_SPACE: _SPACE, _c.CATEGORY_NOT_SPACE: (_ASCII - _SPACE) | _HIGH,
    _c.CATEGORY_WORD: _WORD | _HIGH, _c.CATEGORY_NOT_WORD: (_ASCII - _WORD) | _HIGH,
}
TO_LINE_END = b"[^\\n]*$"   # how every expression ends (compiled with HS_FLAG_MULTILINE)
MAX_BOUNDED_REPEAT = 16     # longer upper bounds are written unbounded


class Untranslatable(ValueError):
    """A construct this translation does not know (the caller gates on literals instead)."""


def to_hyperscan(pattern: str, flags: int = 0, start: bytes = b"^") -> bytes:
    """``pattern`` as a Hyperscan expression; ``start`` is written for each ``^``."""
    parsed = _p.parse(pattern, flags)
    caseless = bool(parsed.state.flags & re.IGNORECASE)
    return _sequence(_trim_tail(list(parsed)), caseless, start) + TO_LINE_END


def prefix_run(pattern: str, flags: int = 0) -> bytes:
    """A line start, then any run of the prefixes ``pattern`` matches one at a time: where a
    message can begin once they are peeled off."""
    parsed = _p.parse(pattern, flags)
    return b"^(?:" + _sequence(list(parsed), bool(flags & re.IGNORECASE), b"^") + b")*"


def _trim_tail(items: list) -> list:
    """A match that ends in an optional part also matches without it: drop the part (a
    repeat keeps only its least count), so a match ends early and is reported once."""
    while items:
        op, arg = items[-1]
        if op not in (_c.MAX_REPEAT, _c.MIN_REPEAT):
            break
        low, _high, body = arg
        if low == 0:
            items = items[:-1]
            continue
        items = items[:-1] + [(op, (low, low, body))]
        break
    return items


def _sequence(items, caseless: bool, start: bytes) -> bytes:
    return b"".join(_node(op, arg, caseless, start) for op, arg in items)


def _node(op, arg, caseless: bool, start: bytes) -> bytes:
    if op is _c.LITERAL:
        return _char(arg, caseless)
    if op is _c.NOT_LITERAL:
        others = _ASCII | _HIGH
        return _class(others - _folded({arg}, caseless) if arg < 0x80 else others)
    if op is _c.ANY:
        return b"."
    if op is _c.IN:
        return _class(_in(arg, caseless))
    if op is _c.BRANCH:
        return b"(?:" + b"|".join(_sequence(b, caseless, start) for b in arg[1]) + b")"
    if op is _c.SUBPATTERN:
        add, drop = arg[1] or 0, arg[2] or 0
        inner = (caseless or bool(add & re.IGNORECASE)) and not drop & re.IGNORECASE
        return b"(?:" + _sequence(arg[-1], inner, start) + b")"
    if op in (_c.MAX_REPEAT, _c.MIN_REPEAT):
        low, high, body = arg
        # A long bounded repeat (.{0,300}) costs Hyperscan much compile time; unbounded, it
        # only lets more lines pass.
        unbounded = high is _c.MAXREPEAT or high > MAX_BOUNDED_REPEAT
        upper = b"" if unbounded else str(high).encode()
        return b"(?:" + _sequence(body, caseless, start) + b"){%d,%s}" % (low, upper)
    if op in (_c.ASSERT, _c.ASSERT_NOT):
        return b""  # a lookaround only narrows a match: without it, more lines pass
    if op is _c.AT:
        return _at(arg, start)
    raise Untranslatable(f"no Hyperscan form for {op}")


def _at(where, start: bytes) -> bytes:
    if where in (_c.AT_BEGINNING, _c.AT_BEGINNING_STRING):
        return start
    if where in (_c.AT_END, _c.AT_END_STRING):
        return b""  # Hyperscan takes no "$" inside an expression; without it, more lines pass
    if where is _c.AT_BOUNDARY:
        return b"\\b"
    if where is _c.AT_NON_BOUNDARY:
        return b"\\B"
    raise Untranslatable(f"no Hyperscan form for {where}")


def _folded(codes: set[int] | frozenset[int], caseless: bool) -> set[int]:
    out = set(codes)
    if caseless:
        for code in codes:
            if code < 0x80:
                out |= {ord(chr(code).lower()), ord(chr(code).upper())}
    return out


def _char(code: int, caseless: bool) -> bytes:
    if code >= 0x80:  # never in an ASCII line; its UTF-8 bytes elsewhere
        return b"".join(b"\\x%02x" % byte for byte in chr(code).encode("utf-8"))
    folded = _folded({code}, caseless)
    return b"\\x%02x" % code if len(folded) == 1 else _class(folded)


def _in(items, caseless: bool) -> set[int]:
    chosen: set[int] = set()
    negate = False
    for op, value in items:
        if op is _c.NEGATE:
            negate = True
        elif op is _c.LITERAL:
            chosen |= {value} if value < 0x80 else set(_HIGH)
        elif op is _c.RANGE:
            low, high = value
            chosen |= set(range(low, min(high, 0x7f) + 1))
            if high >= 0x80:
                chosen |= _HIGH
        elif op is _c.CATEGORY and value in _CATEGORIES:
            chosen |= _CATEGORIES[value]
        else:
            raise Untranslatable(f"no Hyperscan form for class item {op}")
    chosen = _folded(chosen, caseless)
    if negate:  # a negated class also takes every non-ASCII byte
        return (set(_ASCII) - chosen) | _HIGH
    return chosen


def _class(codes) -> bytes:
    """A set of bytes as a Hyperscan class of ranges."""
    ordered = sorted(codes)
    if not ordered:
        raise Untranslatable("empty class")
    parts: list[bytes] = []
    run_start = previous = ordered[0]
    for code in ordered[1:] + [-1]:
        if code == previous + 1:
            previous = code
            continue
        parts.append(b"\\x%02x" % run_start if run_start == previous
                     else b"\\x%02x-\\x%02x" % (run_start, previous))
        run_start = previous = code
    return b"[" + b"".join(parts) + b"]"
