"""A dump's decoded values walked within a budget before anything renders or compares them.

A pickle can hold one value many times through its memo: a list whose every level holds its
child twice costs a few bytes per level and gives anything that walks it (``repr``, ``str``,
equality, JSON) 2**levels leaves: a 1.1 KB dump nested 22 levels deep kept explain busy for
a minute, and 30 levels would never finish. Without such sharing every value a walk visits
cost the file at least one byte, so a real dump's fields fit in a few values per byte; and a
real shape is a short list of short int lists, dtypes a list of names, two levels at most.
The fields explain renders (sizes, dtypes, and a name that is not text) are walked here
first, depth and count bounded per dump, and a dump beyond either is refused in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_DEPTH = 8                      # containers within containers; a real shape has two
PER_BYTE = 8                       # values (and characters of text) per byte of the dump
FLOOR = 1 << 16                    # the budget of a small dump
_SCALARS = (int, float, type(None))  # bool is an int
_TEXTS = (str, bytes, bytearray)
_NUMBERS = frozenset({int, float, type(None)})


class Overgrown(ValueError):
    """A decoded value nested deeper, or holding more, than a dump can honestly hold."""


@dataclass
class Budget:
    """What the walks of one dump's values may still visit (values plus characters of text):
    ``PER_BYTE`` per byte of the dump and ``FLOOR`` more. One per dump read, spent as its
    entries are read."""

    left: int
    size: int                      # the dump's bytes, for the message

    @classmethod
    def for_size(cls, size: int) -> Budget:
        return cls(FLOOR + PER_BYTE * size, size)

    def check(self, value: Any, what: str) -> Any:
        """``value`` itself, once walked within the depth cap and what is left of the budget;
        raises Overgrown otherwise. ``what`` names the field for the message."""
        left = self.left
        stack = [(value, 1)]
        while stack:
            item, depth = stack.pop()
            left -= 1
            if isinstance(item, _TEXTS):
                left -= len(item)
            elif isinstance(item, (list, tuple, set, frozenset, dict)):
                if depth > MAX_DEPTH:
                    raise Overgrown(f"{what} nests more than {MAX_DEPTH} levels deep")
                count = 2 * len(item) if isinstance(item, dict) else len(item)
                if count >= left:
                    left = -1       # never pushed: the stack stays within the budget
                elif isinstance(item, dict):
                    stack.extend((child, depth + 1) for pair in item.items() for child in pair)
                else:
                    stack.extend((child, depth + 1) for child in item)
            if left < 0:
                raise Overgrown(
                    f"{what} and the values before it hold more than {self.limit:,}, more "
                    f"than a dump of {self.size:,} bytes holds without sharing one value many "
                    "times")
        self.left = left
        return value

    @property
    def limit(self) -> int:
        return FLOOR + PER_BYTE * self.size

    def listed(self, value: Any, what: str) -> Any:
        """Sizes or dtypes as the dump holds them, when they are lists (walked: an entry's
        ``shape`` renders them); else nothing. A list of numbers, of names, or of lists of
        numbers (torch's) is counted in one plain loop: four fields of every entry come here."""
        if not isinstance(value, (list, tuple)):
            return []
        left = self.left - 1 - len(value)
        for item in value:
            if left < 0:
                break                           # before an inner list the memo may share
            kind = type(item)
            if kind is list or kind is tuple:
                left -= len(item)
                if left < 0:
                    break
                for number in item:
                    if type(number) not in _NUMBERS:
                        return self.check(value, what)
            elif kind is str:
                left -= len(item)
            elif kind not in _NUMBERS:
                return self.check(value, what)
        if left < 0:
            return self.check(value, what)      # says so
        self.left = left
        return value

    def text(self, value: Any, what: str) -> str:
        """``str(value)`` as before, for a name that should be text: a number or None as is,
        anything else once walked (``str`` of a shared nested list never ends)."""
        if isinstance(value, str):
            return value
        if isinstance(value, _SCALARS):
            return str(value)
        return str(self.check(value, what))

