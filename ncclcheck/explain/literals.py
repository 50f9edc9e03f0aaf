"""The literal strings a regex cannot match without: derived from the pattern itself.

The prefilter lets a line reach a signature's regex only when the line contains one of that
pattern's required literals. Deriving them from the parsed pattern (instead of keeping a hand
list) means a signature can never be starved by a prefilter that forgot it.

``required_literals(pattern)`` returns a set of alternatives: every match of the pattern
contains at least one of them. Alternations give one alternative per branch; small character
classes (``[Ee]rror``) expand into alternatives; case-insensitive parts are lower-cased and
flagged so the prefilter searches them without regard to case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import product

try:  # Python 3.11+
    from re import _constants as _c, _parser as _p  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _p  # type: ignore[no-redef]

MIN_LENGTH = 3            # shorter literals would let most lines through
MAX_ALTERNATIVES = 16     # a set larger than this is worth less than a shorter, smaller one
MAX_CLASS = 4             # a character class of at most this many characters expands

# Node kinds that match nothing (anchors, lookarounds), so a literal run continues over them.
_ZERO_WIDTH = {_c.AT}


class NoLiteral(ValueError):
    """A pattern with no literal every match must contain (it would have to see every line)."""


@dataclass(frozen=True)
class Literals:
    """Alternatives of which every match contains one; ``caseless`` when case does not matter."""

    strings: frozenset[str]
    caseless: bool = False

    @property
    def score(self) -> tuple[int, int]:
        """Longer shortest alternative first, then fewer alternatives."""
        return (min(len(s) for s in self.strings), -len(self.strings))


def required_literals(pattern: str, flags: int = 0) -> Literals:
    """The best set of literals every match of ``pattern`` contains; NoLiteral when none."""
    parsed = _p.parse(pattern, flags)
    caseless = bool(parsed.state.flags & re.IGNORECASE)
    best = _best_of_sequence(list(parsed), caseless)
    if best is None or min(len(s) for s in best.strings) < MIN_LENGTH:
        raise NoLiteral(f"pattern has no literal of {MIN_LENGTH}+ characters that every match "
                        f"contains: {pattern!r}")
    return best


def _best_of_sequence(items: list, caseless: bool) -> Literals | None:
    """Best literal set of a sequence: exact runs (products of adjacent exact pieces) or the
    best set of one required sub-part."""
    candidates: list[Literals] = []
    run: set[str] | None = None

    def close() -> None:
        nonlocal run
        if run and min(len(s) for s in run) > 0:
            candidates.append(Literals(frozenset(run), caseless))
        run = None

    for op, arg in items:
        if op in _ZERO_WIDTH:
            continue
        exact = _exact(op, arg, caseless)
        if exact is not None:
            run = _grow(run, exact, close)
            continue
        # A group or branch that is not exact may still start / end with exact text: the run
        # before it continues into its prefix, and its suffix starts the next run.
        prefix, suffix = _affixes(op, arg, caseless)
        if run and prefix:
            run = _grow(run, prefix, close)
        close()
        inner = _required(op, arg, caseless)
        if inner is not None:
            candidates.append(inner)
        run = set(suffix) if suffix else None
    close()
    return max(candidates, key=lambda c: c.score) if candidates else None


def _grow(run: set[str] | None, exact: set[str], close) -> set[str]:
    """The run followed by one of ``exact``; a run that would grow too many alternatives is
    closed and a new one starts."""
    grown = {a + b for a, b in product(run or {""}, exact)}
    if len(grown) > MAX_ALTERNATIVES:
        close()
        return set(exact)
    return grown


def _affixes(op, arg, caseless: bool) -> tuple[set[str] | None, set[str] | None]:
    """Exact text every match of a group / branch starts with and ends with (None: unknown)."""
    if op is _c.SUBPATTERN:
        return _sequence_affixes(list(arg[-1]), _group_caseless(arg, caseless))
    if op is _c.BRANCH:
        pairs = [_sequence_affixes(list(branch), caseless) for branch in arg[1]]
        prefixes, suffixes = [p for p, _ in pairs], [x for _, x in pairs]
        union = lambda parts: (set().union(*parts)  # noqa: E731
                               if all(parts) and len(set().union(*parts)) <= MAX_ALTERNATIVES
                               else None)
        return union(prefixes), union(suffixes)
    return None, None


def _sequence_affixes(items: list, caseless: bool) -> tuple[set[str] | None, set[str] | None]:
    items = [(op, arg) for op, arg in items if op not in _ZERO_WIDTH]
    ends: list[set[str] | None] = []
    for ordered in (items, items[::-1]):
        text: set[str] = {""}
        for op, arg in ordered:
            part = _exact(op, arg, caseless)
            if part is None:
                break
            joined = {a + b for a, b in product(text, part)} if ordered is items else \
                {b + a for a, b in product(text, part)}
            if len(joined) > MAX_ALTERNATIVES:
                break
            text = joined
        ends.append(text if min(map(len, text)) > 0 else None)
    return ends[0], ends[1]


def _exact(op, arg, caseless: bool) -> set[str] | None:
    """The finite set of strings a node matches, when small; None when not exact."""
    if op is _c.LITERAL:
        char = chr(arg)
        return {char.lower() if caseless else char}
    if op is _c.IN:
        chars = _class_chars(arg)
        if chars is None or len(chars) > MAX_CLASS:
            return None
        return {c.lower() if caseless else c for c in chars}
    if op is _c.SUBPATTERN:
        return _exact_sequence(list(arg[-1]), _group_caseless(arg, caseless))
    if op is _c.BRANCH:
        out: set[str] = set()
        for branch in arg[1]:
            part = _exact_sequence(list(branch), caseless)
            if part is None:
                return None
            out |= part
        return out if len(out) <= MAX_ALTERNATIVES else None
    return None


def _exact_sequence(items: list, caseless: bool) -> set[str] | None:
    out = {""}
    for op, arg in items:
        if op in _ZERO_WIDTH:
            continue
        part = _exact(op, arg, caseless)
        if part is None:
            return None
        out = {a + b for a, b in product(out, part)}
        if len(out) > MAX_ALTERNATIVES:
            return None
    return out


def _group_caseless(arg, caseless: bool) -> bool:
    """Whether a group's body ignores case: ``(?i:...)`` turns it on, ``(?-i:...)`` off."""
    add_flags, del_flags = arg[1] or 0, arg[2] or 0
    return (caseless or bool(add_flags & re.IGNORECASE)) and not del_flags & re.IGNORECASE


def _class_chars(arg) -> list[str] | None:
    chars: list[str] = []
    for op, value in arg:
        if op is _c.LITERAL:
            chars.append(chr(value))
        else:  # a range, a category, a negation: not worth expanding
            return None
    return chars


def _required(op, arg, caseless: bool) -> Literals | None:
    """Literals a non-exact node still requires (a group, a repeat of at least one, a branch)."""
    if op is _c.SUBPATTERN:
        return _best_of_sequence(list(arg[-1]), _group_caseless(arg, caseless))
    if op in (_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", None)):
        low, _high, body = arg
        return _best_of_sequence(list(body), caseless) if low >= 1 else None
    if op is getattr(_c, "ATOMIC_GROUP", None):
        return _best_of_sequence(list(arg), caseless)
    if op is _c.BRANCH:
        strings: set[str] = set()
        for branch in arg[1]:
            part = _best_of_sequence(list(branch), caseless)
            if part is None:
                return None
            strings |= {s.lower() for s in part.strings} if part.caseless else part.strings
            caseless = caseless or part.caseless
        if not strings or len(strings) > MAX_ALTERNATIVES * 2:
            return None
        return Literals(frozenset(s.lower() if caseless else s for s in strings), caseless)
    return None
