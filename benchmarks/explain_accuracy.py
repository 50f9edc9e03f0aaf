"""How often `ncclcheck explain` names the right root cause on real logs from the world.

    python benchmarks/explain_accuracy.py [--split dev|test|all] [--show-misses] [--smoke]

Reads tests/data/logs/world/index.toml: logs copied verbatim from public issue threads and Q&A
pages, each labelled with the category the thread established, split by thread into dev (for
writing signatures) and test (for measuring them; never read while writing signatures).
Prints, per split, top-1 accuracy (the root cause's category equals the label), false alarms
on clean logs (a finding with a category on a log whose run was healthy), the confusion
between categories, and, apart, the project's own corpus (tests/data/logs/index.toml).
Next to explain's figures: the accuracy of a blind reading (world/blind_reading.toml, the
category a reader gave each log from the log alone), i.e. how much the logs themselves show.
``--smoke`` scores every SMOKE_STRIDE-th log of each index only (a fixed subset, seconds), so
the test suite can run this script's whole code path; its figures are not the accuracy.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from ncclcheck.explain.engine import explain

LOGS = Path(__file__).resolve().parents[1] / "tests" / "data" / "logs"
WORLD = LOGS / "world"
SMOKE_STRIDE = 10  # --smoke keeps every 10th log of an index: a fixed subset of each split


def smoke_subset(entries: list[dict]) -> list[dict]:
    """The logs ``--smoke`` scores: a deterministic tenth, in the index's order."""
    return entries[::SMOKE_STRIDE]


def load(index: Path) -> list[dict]:
    return tomllib.loads(index.read_text("utf-8"))["log"]


def predicted(path: Path) -> tuple[str, list[str]]:
    """The root cause's category ("" when nothing was found) and every finding's category."""
    findings = explain([str(path)]).to_dict()["findings"]
    categories = [f["category"] for f in findings if f["category"]]
    return (findings[0]["category"] or "") if findings else "", categories


def readings() -> dict[str, str]:
    """The blind reading's category per world log ("" read as healthy)."""
    path = WORLD / "blind_reading.toml"
    if not path.exists():
        return {}
    return {r["path"]: r["category"] for r in tomllib.loads(path.read_text("utf-8"))["reading"]}


def score(entries: list[dict], folder: Path, show_misses: bool,
          read: dict[str, str] | None = None) -> dict:
    failing = [e for e in entries if e["category"]]
    clean = [e for e in entries if not e["category"]]
    read = read or {}
    blind = Counter()  # the blind reading: logs read, right, clean logs read as failing
    for e in entries:
        if e["path"] in read:
            key = "failing" if e["category"] else "clean"
            blind[key] += 1
            if e["category"]:
                blind["right"] += read[e["path"]] == e["category"]
            else:
                blind["alarms"] += read[e["path"]] != ""
    right, confusion, misses = 0, Counter(), []
    shown = Counter()  # logs whose deciding line shows the cause (not only a generic error)
    for e in failing:
        got, _ = predicted(folder / e["path"])
        right += got == e["category"]
        if e.get("deciding_line", "x"):
            shown["logs"] += 1
            shown["right"] += got == e["category"]
        if got != e["category"]:
            confusion[(e["category"], got or "(nothing)")] += 1
            misses.append((e["path"], e["category"], got or "(nothing)"))
    alarms = []
    for e in clean:
        _, categories = predicted(folder / e["path"])
        if categories:
            alarms.append((e["path"], categories))
    if show_misses:
        for path, want, got in misses:
            print(f"    miss  {path}: want {want}, got {got}")
        for path, categories in alarms:
            print(f"    alarm {path}: {', '.join(categories)}")
    return {"failing": len(failing), "right": right, "clean": len(clean),
            "alarms": len(alarms), "confusion": confusion, "shown": shown, "blind": blind}


def report(name: str, result: dict) -> None:
    n = result["failing"]
    share = 100.0 * result["right"] / n if n else 0.0
    print(f"{name:<10} top-1 {result['right']:>3}/{n:<3} = {share:5.1f}%   "
          f"false alarms {result['alarms']}/{result['clean']} clean logs")
    shown, n_shown = result["shown"], result["shown"]["logs"]
    if n_shown != n:
        share = 100.0 * shown["right"] / n_shown if n_shown else 0.0
        print(f"{'':<10}   on the {n_shown} logs with a deciding line: {shown['right']}/{n_shown}"
              f" = {share:.1f}%; on the {n - n_shown} showing only a generic error or none: "
              f"{result['right'] - shown['right']}/{n - n_shown}")
    blind = result["blind"]
    if blind["failing"]:
        share = 100.0 * blind["right"] / blind["failing"]
        print(f"{'':<10}   blind reading of the log alone: {blind['right']}/{blind['failing']} = "
              f"{share:.1f}%, clean logs read as failing {blind['alarms']}/{blind['clean']}")
    for (want, got), count in result["confusion"].most_common():
        print(f"           {count:>3}x  {want:<16} -> {got}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("dev", "test", "all"), default="all")
    parser.add_argument("--show-misses", action="store_true",
                        help="list every miss and false alarm (use on dev only)")
    parser.add_argument("--smoke", action="store_true",
                        help=f"score every {SMOKE_STRIDE}th log only (a quick run of the code)")
    args = parser.parse_args()
    world = load(WORLD / "index.toml")
    if args.smoke:
        print(f"# smoke: every {SMOKE_STRIDE}th log of each index; not the accuracy")
    splits = ("dev", "test") if args.split == "all" else (args.split,)
    for split in splits:
        entries = [e for e in world if e["split"] == split]
        if args.smoke:
            entries = smoke_subset(entries)
        report(f"world/{split}", score(entries, WORLD, args.show_misses and split == "dev",
                                       readings()))
    own = load(LOGS / "index.toml")
    if args.smoke:
        own = smoke_subset(own)
    for e in own:
        e["category"] = e["category"] if e["root"] else ""
    report("own corpus", score(own, LOGS, False))


if __name__ == "__main__":
    main()
