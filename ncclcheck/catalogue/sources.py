"""The catalogue's TOML sources read as written: a folder of signature files, the known-issues
table, and the compiled file made from the shipped ones (compiled.py).

The only module of the catalogue that parses TOML. A run reads the compiled file instead, so
this is imported only to read a folder other than the shipped one (a test's own catalogue), to
read a source edited since the file was made, or to write that file again.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ncclcheck.catalogue.compiled import (COMPILED, FOLDER, KNOWN_ISSUES, SIGNATURES_DIR, digest,
                                          source_names)
from ncclcheck.catalogue.parse import Folder

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

REGENERATE = "python scripts/compile_catalogue.py"


def read_toml(text: str) -> dict[str, Any]:
    """One TOML document."""
    return tomllib.loads(text)


def signature_entries(folder: Folder) -> dict[str, list[dict[str, Any]]]:
    """The ``[[signature]]`` entries of every ``*.toml`` file in ``folder``, by file name without
    .toml, in name order (the order only lists them: nothing decides by it)."""
    items = sorted((item for item in folder.iterdir() if item.name.endswith(".toml")),
                   key=lambda item: item.name)
    return {item.name[:-5]: read_toml(item.read_text("utf-8")).get("signature", [])
            for item in items}


def known_issues_table() -> dict[str, Any]:
    """The shipped known-issues table as parsed."""
    return read_toml((FOLDER / KNOWN_ISSUES).read_text("utf-8"))


def compile_shipped() -> dict[str, Any]:
    """What compiled.json holds for the shipped sources as they are now."""
    sources = [(name, (FOLDER / name).read_bytes()) for name in source_names()]
    return {"digest": digest(sources),
            "generated_by": REGENERATE,
            "signatures": signature_entries(FOLDER / SIGNATURES_DIR),
            "known_issues": known_issues_table()}


def compiled_text(data: dict[str, Any]) -> str:
    """The file's text: one value per line, so that a changed entry is a small diff."""
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def shipped_compiled_text() -> str | None:
    """The committed compiled file's text (None when there is none)."""
    try:
        return (FOLDER / COMPILED).read_text("utf-8")
    except FileNotFoundError:
        return None
