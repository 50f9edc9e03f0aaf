"""How often explain's root cause moves when a log takes another shape it has in the wild.

    python benchmarks/explain_invariance.py [--show-moves] [--transform NAME] [--split dev|test|own|all]
                                            [--smoke]

Every log with a known root cause (tests/data/logs/world/index.toml's failing logs, dev and
test, and tests/data/logs/index.toml's logs with a root) is explained as it is and after each
transformation of tests/logshapes.py and tests/logtails.py: a real launcher's tail appended
(torchrun, srun, mpirun), every line under a real collector's prefix, other ranks' consequence
lines interleaved, Ray's folding of repeats, a hard wrap at 80 columns, the middle cut out.
A move: the root cause's category differs from the original's. Printed per transformation:
moves per split, how many of them left a right root cause (the labelled category) or started
from none, signature-id changes within the same category, and where the moves went. The goal
is 0 moves everywhere; tests/test_explain_invariance.py holds ceilings that only go down.
``--transform`` takes a name or a group (``tail``, ``prefix``); ``--smoke`` reads every
SMOKE_STRIDE-th log only (a fixed subset, seconds), so the suite can run the code path.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from invariance import (SPLITS, Case, Tally, cases, compare, moves_by_split,  # noqa: E402
                        moves_from_nothing, moves_from_right, transforms)

SMOKE_STRIDE = 25  # --smoke reads every 25th log: about two dozen, a few seconds


def chosen_transforms(name: str | None) -> list:
    found = [t for t in transforms()
             if name is None or t.name == name or t.name.split(":")[0] == name]
    if not found:
        raise SystemExit(f"no transformation {name!r}; one of: "
                         + ", ".join(t.name for t in transforms()))
    return found


def report(name: str, tally: Tally, splits: tuple[str, ...]) -> None:
    per = moves_by_split(tally)
    cells = []
    for split in splits:
        n = tally.logs[split]
        share = 100.0 * per[split] / n if n else 0.0
        cells.append(f"{split} {per[split]:>3}/{n:<3} {share:5.1f}%")
    total = len(tally.moves)
    went = Counter(after.category or "(nothing)" for _, _, after in tally.moves)
    where = ", ".join(f"{category} {count}" for category, count in went.most_common())
    right = sum(tally.right.values())
    print(f"{name:<22} {'  '.join(cells)}  | from right {moves_from_right(tally):>3}/{right:<3} "
          f"from none {moves_from_nothing(tally):>3}  ids {len(tally.id_moves):>3}  "
          f"changed {sum(tally.changed.values()):>3}" + (f"  -> {where}" if total else ""))


def show(name: str, tally: Tally) -> None:
    for kind, rows in (("move", tally.moves), ("id", tally.id_moves)):
        for case, before, after in rows:
            print(f"    {kind:<4} {name} {case.split}/{_short(case)}: "
                  f"{before.category or '(nothing)'} ({before.id or '-'}) -> "
                  f"{after.category or '(nothing)'} ({after.id or '-'}); label {case.category}")


def _short(case: Case) -> str:
    parts = case.path.parts
    return "/".join(parts[parts.index("logs") + 1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("dev", "test", "own", "all"), default="all")
    parser.add_argument("--transform", help="one transformation, or a group: tail, prefix")
    parser.add_argument("--show-moves", action="store_true",
                        help="list every log whose root cause moved (and every id change)")
    parser.add_argument("--smoke", action="store_true",
                        help=f"every {SMOKE_STRIDE}th log only (a quick run of the code)")
    args = parser.parse_args()
    chosen = cases(args.split)
    if args.smoke:
        chosen = chosen[::SMOKE_STRIDE]
        print(f"# smoke: every {SMOKE_STRIDE}th log; not the figures")
    shapes = chosen_transforms(args.transform)
    splits = tuple(s for s in SPLITS if any(c.split == s for c in chosen))
    counts = Counter(c.split for c in chosen)
    print(f"# {len(chosen)} logs with a known root cause ("
          + ", ".join(f"{s} {counts[s]}" for s in splits) + f"), {len(shapes)} transformations;"
          " a move: the root cause's category differs from the original's")
    start = time.perf_counter()
    tallies = compare(chosen, shapes)
    wall = time.perf_counter() - start
    for shape in shapes:
        report(shape.name, tallies[shape.name], splits)
        if args.show_moves:
            show(shape.name, tallies[shape.name])
    total = sum(len(t.moves) for t in tallies.values())
    explained = len(chosen) + sum(sum(t.changed.values()) for t in tallies.values())
    print(f"all transformations: {total} moves; wall {wall:.1f} s for {explained} explains "
          f"({1000.0 * wall / max(explained, 1):.1f} ms each)")


if __name__ == "__main__":
    main()
