"""The prefilter: find, in a block of log bytes, the lines that hold any signature's literal.

Only those lines are decoded and handed to the regexes, so the cost of a log is one
multi-literal search over its bytes plus the few lines that could be failures. The literal
list comes from the signatures' own patterns (``literals.py``).

Engines, chosen by measurement (benchmarks/explain_speed.py): Hyperscan when its Python
binding is installed (a dependency wherever PyPI has a wheel of it: Linux x86_64 and aarch64),
else an Aho-Corasick automaton (``pyahocorasick``, a dependency everywhere), else Python's
``re`` over one alternation of the literals (always available, slow on big logs).
``NCCLCHECK_EXPLAIN_ENGINE=re|aho|hyperscan`` forces one (tests use it to cover the fallback).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Callable, Iterator, Protocol, Sequence

from ncclcheck.explain.hscache import block_database

ENGINE_VARIABLE = "NCCLCHECK_EXPLAIN_ENGINE"
ENGINES = ("hyperscan", "aho", "re")


@dataclass(frozen=True)
class Literal:
    text: str
    caseless: bool = False


class LiteralIndex(Protocol):
    name: str

    def ends(self, block: bytes) -> Iterator[int]:
        """Offsets in ``block`` just past an occurrence of some literal, in increasing order
        (not every occurrence: at least the first of each line that holds one)."""


class ReIndex:
    """Pure Python: one compiled alternation of every literal, searched line by line."""

    name = "re"

    def __init__(self, literals: Sequence[Literal]) -> None:
        parts = [(b"(?i:%s)" if lit.caseless else b"%s") % re.escape(lit.text.encode())
                 for lit in sorted(set(literals), key=lambda lit: -len(lit.text))]
        self._search = re.compile(b"|".join(parts)).search

    def ends(self, block: bytes) -> Iterator[int]:
        search, pos = self._search, 0
        while True:
            found = search(block, pos)
            if found is None:
                return
            yield found.end()
            pos = block.find(b"\n", found.end())
            if pos < 0:
                return


class AhoIndex:
    """An Aho-Corasick automaton over the bytes read as Latin-1 (one char per byte, so
    offsets are byte offsets); caseless literals go through a second automaton over the
    lower-cased block. Each hit names its literal, as Hyperscan's do, so the gate can count
    the common ones."""

    name = "aho"

    def __init__(self, literals: Sequence[Literal]) -> None:
        import ahocorasick  # deferred: a compiled module, loaded only by this engine

        unique = sorted(set(literals), key=lambda lit: (lit.text, lit.caseless))
        self.literals: tuple[Literal, ...] = tuple(unique)  # a hit's id is its place here
        self._exact = self._caseless = None
        for caseless in (False, True):
            words = {lit.text.encode().decode("latin-1"): place
                     for place, lit in enumerate(unique) if lit.caseless == caseless}
            if not words:
                continue
            automaton = ahocorasick.Automaton()
            for word, place in words.items():
                automaton.add_word(word, place)
            automaton.make_automaton()
            if caseless:
                self._caseless = automaton
            else:
                self._exact = automaton

    def hits(self, block: bytes,
             tokens_found: list[bytes] | None = None) -> list[tuple[int, int]]:
        """(offset just past it, literal id) of every occurrence, in order of offset (the
        scanner's tokens are not looked for: every one may be there)."""
        found: list[tuple[int, int]] = []
        if self._exact is not None:
            found += [(end + 1, place) for end, place in self._exact.iter(block.decode("latin-1"))]
        if self._caseless is not None:
            lowered = block.lower().decode("latin-1")
            found += [(end + 1, place) for end, place in self._caseless.iter(lowered)]
            found.sort()
        return found

    def ends(self, block: bytes) -> Iterator[int]:
        return iter([end for end, _ in self.hits(block)])


class HyperscanIndex:
    """Hyperscan's literal database in block mode: one pass, every literal at once."""

    name = "hyperscan"

    def __init__(self, literals: Sequence[Literal], tokens: Sequence[bytes] = ()) -> None:
        import hyperscan  # deferred: slow to load, and not installed on every platform

        unique = sorted(set(literals), key=lambda lit: (lit.text, lit.caseless))
        self.literals: tuple[Literal, ...] = tuple(unique)  # a hit's id is its place here
        # The scanner's tokens ride along, each reported once a block (scan.py asks).
        self.tokens: tuple[bytes, ...] = tuple(tokens)
        self._db = block_database(
            [lit.text.encode() for lit in unique] + list(self.tokens),
            [hyperscan.HS_FLAG_CASELESS if lit.caseless else 0 for lit in unique]
            + [hyperscan.HS_FLAG_SINGLEMATCH] * len(self.tokens),
            literal=True)

    def hits(self, block: bytes,
             tokens_found: list[bytes] | None = None) -> list[tuple[int, int]]:
        """(offset just past it, literal id) of every occurrence, in order of offset; the
        tokens the block holds are added to ``tokens_found``."""
        found: list[tuple[int, int]] = []
        first_token = len(self.literals)
        tokens, seen = self.tokens, tokens_found if tokens_found is not None else []

        def on_match(pattern_id: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            if pattern_id < first_token:
                found.append((end, pattern_id))
            else:
                seen.append(tokens[pattern_id - first_token])

        self._db.scan(block, match_event_handler=on_match)
        found.sort()
        return found

    def ends(self, block: bytes) -> Iterator[int]:
        return iter([end for end, _ in self.hits(block)])


_BUILDERS: dict[str, Callable[[Sequence[Literal]], LiteralIndex]] = {
    "hyperscan": HyperscanIndex, "aho": AhoIndex, "re": ReIndex,
}


def build_index(literals: Sequence[Literal], engine: str | None = None,
                tokens: Sequence[bytes] = ()) -> LiteralIndex:
    """The fastest available engine (or ``engine`` / $NCCLCHECK_EXPLAIN_ENGINE when given);
    Hyperscan also reports which of ``tokens`` a block holds, in the same pass."""
    wanted = engine or os.environ.get(ENGINE_VARIABLE) or ""
    order = (wanted,) if wanted in ENGINES else ENGINES
    for name in order:
        try:
            if name == "hyperscan":
                return HyperscanIndex(literals, tokens)
            return _BUILDERS[name](literals)
        except ImportError:
            continue
    return ReIndex(literals)
