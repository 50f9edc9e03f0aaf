"""The catalogue's prefilter literals kept on disk between runs, beside the Hyperscan databases.

Deriving every pattern's required literals (literals.py) parses every regex of the catalogue
with Python's own regex parser: a tenth of a second or more at each start, a quarter of what
`ncclcheck explain` takes on a small log. The result depends only on the patterns, on the code
that derives it and on the Python that parses them, so it is stored as a JSON table named by a
hash of exactly those; a changed catalogue, a changed literals.py or another Python simply
derives and stores a new table. The folder is hscache.py's (``NCCLCHECK_CACHE_DIR``, ``off``
turns it off), and as there, reading or writing the cache never fails a run.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Sequence

from ncclcheck.explain import literals as _derivation
from ncclcheck.explain.hscache import cache_dir, keep
from ncclcheck.explain.literals import Literals, required_literals

PREFIX = "literals-"


def literal_table(patterns: Sequence[str]) -> dict[str, Literals]:
    """Each pattern's required literals, from the cache when this exact catalogue was read
    before; a pattern without literals raises literals.NoLiteral, as required_literals does."""
    path = _path(patterns)
    table = _load(path) if path is not None else None
    if table is not None and all(p in table for p in patterns):
        return table
    table = {p: required_literals(p) for p in dict.fromkeys(patterns)}
    if path is not None:
        _store(path, table)
    return table


def _path(patterns: Sequence[str]) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    try:
        code = Path(_derivation.__file__).read_bytes()
    except OSError:
        return None  # no source to name the derivation by: derive every time
    key = hashlib.sha256(json.dumps([sys.version_info[:2], sorted(set(patterns)),
                                     hashlib.sha256(code).hexdigest()]).encode())
    return folder / f"{PREFIX}{key.hexdigest()[:32]}.json"


def _load(path: Path) -> dict[str, Literals] | None:
    try:
        data = json.loads(path.read_text("utf-8"))
        return {p: Literals(frozenset(strings), bool(caseless))
                for p, (strings, caseless) in data.items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return None  # missing, truncated or foreign: derive instead


def _store(path: Path, table: dict[str, Literals]) -> None:
    data = {p: [sorted(lit.strings), lit.caseless] for p, lit in table.items()}
    keep(path, json.dumps(data, separators=(",", ":")).encode("utf-8"), PREFIX + "*.json")
