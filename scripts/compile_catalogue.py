"""Write the catalogue's compiled file, ncclcheck/catalogue/compiled.json, from its TOML sources.

    python scripts/compile_catalogue.py           # rewrite compiled.json
    python scripts/compile_catalogue.py --check   # exit 1 when compiled.json is stale

The signature files (ncclcheck/catalogue/signatures/*.toml) and known_issues.toml are the
sources, edited by hand; compiled.json holds what the TOML parser gives for them and a digest of
them, so that a run reads one JSON document instead of parsing TOML at every start
(ncclcheck/catalogue/compiled.py). A run reads the TOML itself while the file is stale, and
tests/test_catalogue.py fails until this script is run: commit the file with the sources.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ncclcheck.catalogue.compiled import COMPILED  # noqa: E402
from ncclcheck.catalogue.sources import (compile_shipped, compiled_text,  # noqa: E402
                                         shipped_compiled_text)

OUT = ROOT / "ncclcheck" / "catalogue" / COMPILED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="compare with the committed file instead of writing it")
    args = parser.parse_args(argv)
    text = compiled_text(compile_shipped())
    if args.check:
        current = shipped_compiled_text() == text
        print(f"{COMPILED} is " + ("current" if current else
                                   "stale: run python scripts/compile_catalogue.py"))
        return 0 if current else 1
    OUT.write_text(text, "utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(text.encode()) / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
