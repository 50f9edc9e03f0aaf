"""The shipped catalogue's TOML files as one generated JSON file, read at start-up instead of them.

Parsing the TOML sources (the signature files and known_issues.toml) cost a quarter of
`ncclcheck explain`'s start on a small log; ``compiled.json`` holds what the TOML parser gives
for each of them, so a start reads one JSON document. The file carries a digest of the sources
it was made from, and is used only while that digest is the sources' own: a source edited
without regenerating the file is read from its TOML, so what is read is never stale (only
slower). ``scripts/compile_catalogue.py`` writes the file (``--check`` compares), and a test
fails while it is stale. Reading it needs no TOML parser: ``sources.py`` holds that.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

COMPILED = "compiled.json"  # under ncclcheck/catalogue/
SIGNATURES_DIR = "signatures"  # under ncclcheck/catalogue/: one *.toml file per family
KNOWN_ISSUES = "known_issues.toml"  # under ncclcheck/catalogue/
FOLDER = Path(__file__).parent  # the catalogue's folder, where its files are


def source_names() -> list[str]:
    """The shipped TOML sources, relative to the catalogue's folder, in name order."""
    names = sorted(f"{SIGNATURES_DIR}/{item.name}"
                   for item in (FOLDER / SIGNATURES_DIR).iterdir() if item.name.endswith(".toml"))
    return names + [KNOWN_ISSUES]


def digest(sources: Iterable[tuple[str, bytes]]) -> str:
    """A digest of the sources' names and bytes (what the compiled file was made from)."""
    total = hashlib.sha256()
    for name, data in sources:
        total.update(f"{name}\0{len(data)}\0".encode())
        total.update(data)
    return total.hexdigest()


def shipped_digest() -> str:
    """The digest of the shipped sources as they are now."""
    return digest((name, (FOLDER / name).read_bytes()) for name in source_names())


@lru_cache(maxsize=1)
def read_compiled() -> Mapping[str, Any] | None:
    """The compiled sources (``signatures``: file name without .toml -> its entries;
    ``known_issues``: the table), or None when the file is absent or was made from other
    sources than the shipped ones."""
    try:
        text = (FOLDER / COMPILED).read_bytes()
    except FileNotFoundError:
        return None
    data = json.loads(text)
    return data if data.get("digest") == shipped_digest() else None
