"""Estimate how `explain` generalises without reading the test split: a nested split of dev.

    python benchmarks/explain_crossval.py [--show-misses A|B] [--smoke]

The world corpus's dev threads are split in two halves by a hash of their source address
(sha256(source) % 2: half A = 0, half B = 1), so every log of one thread lands in one half.
A mechanism designed or tuned while looking at half A only is honestly measured on half B
(and the reverse). Scoring is explain_accuracy.py's own (imported, not copied); the test
split is never read. ``--smoke`` scores explain_accuracy.py's fixed subset of each half only
(seconds; its figures are not the estimate).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from explain_accuracy import report, score  # noqa: E402
from world_corpus import SMOKE_STRIDE, WORLD, dev_halves, smoke_subset  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show-misses", choices=("A", "B"),
                        help="list the misses of one half (only the half you design on)")
    parser.add_argument("--smoke", action="store_true",
                        help=f"score every {SMOKE_STRIDE}th log only (a quick run of the code)")
    args = parser.parse_args()
    halves = dev_halves()
    if args.smoke:
        print(f"# smoke: every {SMOKE_STRIDE}th log of each half; not the estimate")
        halves = {name: smoke_subset(entries) for name, entries in halves.items()}
    for name, entries in halves.items():
        report(f"dev/{name}", score(entries, WORLD, args.show_misses == name))
    report("dev (all)", score(halves["A"] + halves["B"], WORLD, False))


if __name__ == "__main__":
    main()
