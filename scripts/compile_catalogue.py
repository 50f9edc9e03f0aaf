"""Write the catalogue's generated files: compiled.json from its TOML sources, and
knowledge_index.json from the knowledge tables.

    python scripts/compile_catalogue.py           # rewrite both
    python scripts/compile_catalogue.py --check   # exit 1 when either is stale

The signature files (ncclcheck/catalogue/signatures/*.toml) and known_issues.toml are the
sources, edited by hand; compiled.json holds what the TOML parser gives for them and a digest of
them, so that a run reads one JSON document instead of parsing TOML at every start
(ncclcheck/catalogue/compiled.py). knowledge_index.json holds each knowledge entry's anchor
word (ncclcheck/catalogue/knowledge_index.py), chosen from all the tables' words, with a digest
of the tables. A run reads the sources themselves while a file is stale, and the tests fail
until this script is run: commit the files with their sources.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ncclcheck.catalogue.compiled import COMPILED  # noqa: E402
from ncclcheck.catalogue.knowledge_index import COMPILED_INDEX, compiled_anchors  # noqa: E402
from ncclcheck.catalogue.sources import compile_shipped, compiled_text  # noqa: E402

FOLDER = ROOT / "ncclcheck" / "catalogue"


def anchors_text() -> str:
    return json.dumps(compiled_anchors(), separators=(",", ":"), sort_keys=True) + "\n"


def outputs() -> dict[str, str]:
    """Each generated file's name and the text it should hold now."""
    return {COMPILED: compiled_text(compile_shipped()), COMPILED_INDEX: anchors_text()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="compare with the committed file instead of writing it")
    args = parser.parse_args(argv)
    stale = [name for name, text in outputs().items() if _committed(name) != text]
    if args.check:
        for name in stale:
            print(f"{name} is stale: run python scripts/compile_catalogue.py")
        print("the generated files are " + ("stale" if stale else "current"))
        return 1 if stale else 0
    for name, text in outputs().items():
        (FOLDER / name).write_text(text, "utf-8")
        print(f"wrote ncclcheck/catalogue/{name}: {len(text.encode()) / 1024:.0f} KiB")
    return 0


def _committed(name: str) -> str | None:
    path = FOLDER / name
    return path.read_text("utf-8") if path.exists() else None


if __name__ == "__main__":
    sys.exit(main())
