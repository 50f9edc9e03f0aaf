"""A catalogue made ready for reading logs: each signature's prefilter literals, the literal
index and the gate per engine, and the matcher.

The catalogue (ncclcheck.catalogue) is plain data that probes read for fix texts; how explain
finds the lines worth matching is explain's own business and cost. The literals a line must
hold to reach a signature are derived here from its patterns (literals.py; the table of those
already derived is kept in the user's cache folder, literal_cache.py), and the indexes over them
are built here (prefilter.py, gate.py, with their Hyperscan databases in the same folder), each
when first needed and then kept on this object. There is one Prepared per catalogue object:
``prepared()`` is the shipped catalogue's, ``prepared(load(folder))`` another's, so a test
that reads another catalogue gets fresh indexes without clearing anything.
"""

from __future__ import annotations

from functools import cached_property, lru_cache
from types import MappingProxyType
from typing import Iterable, Mapping

from ncclcheck.catalogue import Catalogue, Signature, load
from ncclcheck.explain.gate import Gate
from ncclcheck.explain.literal_cache import literal_table
from ncclcheck.explain.literals import Literals, NoLiteral, required_literals
from ncclcheck.explain.matcher import Matcher
from ncclcheck.explain.prefilter import Literal, LiteralIndex, build_index
from ncclcheck.explain.scan import TOKENS

KEPT = 8  # prepared catalogues kept (the shipped one, and a test's few)


class Prepared:
    """One catalogue and what explain builds from it, each part built on first use."""

    def __init__(self, catalogue: Catalogue) -> None:
        self.catalogue = catalogue
        self._indexes: dict[str, LiteralIndex] = {}
        self._gates: dict[str, Gate | None] = {}

    @cached_property
    def literals(self) -> Mapping[str, tuple[Literal, ...]]:
        """Every signature's prefilter literals, by id; a pattern without a literal every match
        contains is refused, naming its signature (it would starve behind the prefilter)."""
        sigs = self.catalogue.signatures
        try:
            table = literal_table([p for sig in sigs for p in sig.patterns])
        except NoLiteral:
            table = {}  # signature_literals names the signature whose pattern has no literal
        return MappingProxyType({sig.id: signature_literals(sig, table) for sig in sigs})

    def index(self, engine: str = "") -> LiteralIndex:
        """The prefilter over the line signatures' literals, for ``engine`` ("" for the
        fastest available or $NCCLCHECK_EXPLAIN_ENGINE)."""
        found = self._indexes.get(engine)
        if found is None:
            literals = [lit for sig in self.catalogue.line_signatures
                        for lit in self.literals[sig.id]]
            found = self._indexes[engine] = build_index(literals, engine or None, tokens=TOKENS)
        return found

    def gate(self, engine: str = "") -> Gate | None:
        """The gate over common literals: with the engines whose hits name their literal
        (Hyperscan, Aho-Corasick); ``re`` reads every line holding a literal."""
        if engine not in self._gates:
            index = self.index(engine)
            self._gates[engine] = (
                Gate(self.catalogue.line_signatures, self.literals,
                     index.literals,  # type: ignore[attr-defined]
                     hyperscan=index.name == "hyperscan")
                if index.name in ("hyperscan", "aho") else None)
        return self._gates[engine]

    def matcher(self, signatures: Iterable[Signature] | None = None) -> Matcher:
        """A matcher over ``signatures`` (the line signatures when None); a new one for each
        run, as it remembers the messages it was asked about."""
        chosen = self.catalogue.line_signatures if signatures is None else signatures
        return Matcher(chosen, self.literals, self.catalogue)


def prepared(catalogue: Catalogue | None = None) -> Prepared:
    """The Prepared of ``catalogue`` (the shipped one when None), the same object for as long
    as that catalogue is among the last few asked for."""
    return _prepared(load() if catalogue is None else catalogue)


@lru_cache(maxsize=KEPT)
def _prepared(catalogue: Catalogue) -> Prepared:  # keyed by the catalogue object itself
    return Prepared(catalogue)


def signature_literals(sig: Signature, table: Mapping[str, Literals]) -> tuple[Literal, ...]:
    """The prefilter literals of a signature, derived from its patterns (see literals.py;
    ``table`` holds those already derived)."""
    out: list[Literal] = []
    for pattern in sig.patterns:
        found = table.get(pattern)
        if found is None:
            try:
                found = required_literals(pattern)
            except NoLiteral as exc:
                raise ValueError(f"{sig.id}: {exc}") from None
        out += [Literal(text, found.caseless) for text in sorted(found.strings)]
    return tuple(dict.fromkeys(out))
