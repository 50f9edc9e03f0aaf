"""How often `ncclcheck explain` names the right root cause on real logs from the world.

    python benchmarks/explain_accuracy.py [--split dev|test|all] [--show-misses] [--smoke]
                                          [--learning-curve] [--nested]

Reads tests/data/logs/world/index.toml: logs copied verbatim from public issue threads and Q&A
pages, each labelled with the category the thread established, split by thread into dev (for
writing signatures) and test (for measuring them; never read while writing signatures).
Prints, per split, top-1 accuracy (the root cause's category equals the label), false alarms
on clean logs (a finding with a category on a log whose run was healthy), the confusion
between categories, and, apart, the project's own corpus (tests/data/logs/index.toml).
Next to explain's figures: the accuracy of a blind reading (world/blind_reading.toml, the
category a reader gave each log from the log alone), i.e. how much the logs themselves show.
Three readers are scored on every log: the signatures alone, the text model alone (its most
likely failure category, never abstaining) and both (what explain answers), each top-1 and
top-3 (top-3: the label is among explain's hypotheses, or the model's three likeliest),
and the failing logs explain gives no hypothesis at all (no failure line, nothing known: the
ceiling of its top-3).
``--learning-curve`` retrains the model on growing shares of dev's threads and scores each on
test (is data or features the lever?); ``--nested`` trains on one half of dev's threads and
scores the other (world_corpus.py's halves, as explain_crossval.py). Both need scikit-learn
(the test extra).
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from world_corpus import LOGS, SMOKE_STRIDE, WORLD, dev_halves, load, smoke_subset  # noqa: E402

from ncclcheck.explain.engine import SHIPPED, explain  # noqa: E402
from ncclcheck.explain.textmodel import TextModel, load_model  # noqa: E402


def predicted(path: Path, model: TextModel | None | str = SHIPPED) -> tuple[str, list[str]]:
    """The root cause's category ("" when nothing was found) and every finding's category."""
    findings = explain([str(path)], model).to_dict()["findings"]
    categories = [f["category"] for f in findings if f["category"]]
    root = findings[0] if findings and findings[0]["root_cause"] else None
    return (root["category"] or "") if root else "", categories


def readers(path: Path, model: TextModel | None | str = SHIPPED) -> dict[str, list[str]]:
    """Per reader, its categories most likely first: ``signatures`` (root cause only),
    ``model`` (the model's likeliest failure categories) and ``both`` (explain's hypotheses)."""
    reader = load_model() if isinstance(model, str) else model
    alone = explain([str(path)], None)
    both = explain([str(path)], reader)
    out = {"signatures": [alone.root.signature.category.value] if alone.root else [],
           "both": [h.category for h in both.hypotheses]
           or ([both.root.signature.category.value] if both.root else []),
           "model": []}
    if reader is not None and alone.text is not None:
        out["model"] = [c for c, _ in reader.read(alone.text).failing()]
    return out


def reader_scores(entries: list[dict], folder: Path,
                  model: TextModel | None | str = SHIPPED) -> dict[str, Counter]:
    """Top-1 and top-3 per reader over the failing logs, and clean logs read as failing."""
    out = {name: Counter() for name in ("signatures", "model", "both")}
    for e in entries:
        got = readers(folder / e["path"], model)
        for name, categories in got.items():
            if not e["category"]:
                out[name]["alarms"] += bool(categories) and name != "model"
                out[name]["clean"] += 1
                continue
            out[name]["logs"] += 1
            out[name]["unread"] += not categories  # no hypothesis at all: a miss in any top-k
            out[name]["top1"] += categories[:1] == [e["category"]]
            out[name]["top3"] += e["category"] in categories[:3]
    return out


def report_readers(name: str, scores: dict[str, Counter]) -> None:
    for reader, c in scores.items():
        n = c["logs"] or 1
        alarms = "" if reader == "model" else f"   false alarms {c['alarms']}/{c['clean']}"
        print(f"{name:<10} {reader:<10} top-1 {c['top1']:>3}/{c['logs']:<3} = "
              f"{100 * c['top1'] / n:5.1f}%   top-3 {c['top3']:>3}/{c['logs']:<3} = "
              f"{100 * c['top3'] / n:5.1f}%{alarms}")
        if reader == "both" and c["unread"]:
            # a failing log with no failure line and nothing a signature knows gets no
            # hypothesis (the contract: a clean log has none, and such logs read like clean ones)
            print(f"{'':<10} {'':<10} no hypothesis on {c['unread']}/{c['logs']} failing logs: "
                  f"top-3 at most {100 * (c['logs'] - c['unread']) / n:.1f}%")


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
                if e.get("deciding_line", "x"):
                    blind["shown_logs"] += 1
                    blind["shown_right"] += read[e["path"]] == e["category"]
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
        if blind["shown_logs"]:
            print(f"{'':<10}   the blind reading on the same {blind['shown_logs']} logs: "
                  f"{blind['shown_right']}/{blind['shown_logs']} = "
                  f"{100.0 * blind['shown_right'] / blind['shown_logs']:.1f}%")
    blind = result["blind"]
    if blind["failing"]:
        share = 100.0 * blind["right"] / blind["failing"]
        print(f"{'':<10}   blind reading of the log alone: {blind['right']}/{blind['failing']} = "
              f"{share:.1f}%, clean logs read as failing {blind['alarms']}/{blind['clean']}")
    for (want, got), count in result["confusion"].most_common():
        print(f"           {count:>3}x  {want:<16} -> {got}")


def out_of_fold() -> None:
    """The model was trained on dev, so its dev figures above are fitted; the training
    script's out-of-fold reading (each log by a model that never saw its thread) is the honest
    dev figure."""
    model = load_model()
    if model is None or "out_of_fold" not in model.meta:
        return
    oof = model.meta["out_of_fold"]
    n = oof["logs"] or 1
    print(f"{'':<10} (model and both on dev are fitted; out of fold: model top-1 "
          f"{oof['model_top1']}/{n} = {100 * oof['model_top1'] / n:.1f}%, top-3 "
          f"{oof['model_top3']}/{n} = {100 * oof['model_top3'] / n:.1f}%, both top-1 "
          f"{oof['both']}/{n} = {100 * oof['both'] / n:.1f}%)")


def learning_curve(world: list[dict], fractions: tuple[float, ...], seed: int) -> None:
    """Retrain on a share of dev's threads, score on test (needs scikit-learn)."""
    from train_explain_model import train  # deferred: scikit-learn, for these figures only

    test = [e for e in world if e["split"] == "test"]
    for fraction in fractions:
        model = TextModel.from_dict(train(fraction, seed, quiet=True))
        scores = reader_scores(test, WORLD, model)
        report_readers(f"dev {fraction:.0%}", {k: scores[k] for k in ("model", "both")})


def nested(seed: int) -> None:
    """Train on one half of dev's threads, score the other (needs scikit-learn)."""
    from train_explain_model import train

    halves = dev_halves()
    for fit_on, measure_on in (("A", "B"), ("B", "A")):
        threads = {e["source"] for e in halves[fit_on]}
        model = TextModel.from_dict(train(1.0, seed, quiet=True, threads=threads))
        report_readers(f"{fit_on}->{measure_on}", reader_scores(halves[measure_on], WORLD, model))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("dev", "test", "all"), default="all")
    parser.add_argument("--show-misses", action="store_true",
                        help="list every miss and false alarm (use on dev only)")
    parser.add_argument("--smoke", action="store_true",
                        help=f"score every {SMOKE_STRIDE}th log only (a quick run of the code)")
    parser.add_argument("--learning-curve", action="store_true",
                        help="retrain on 25/50/75/100%% of dev's threads, score each on test")
    parser.add_argument("--nested", action="store_true",
                        help="train on half of dev's threads, score the other half")
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
        report_readers(f"world/{split}", reader_scores(entries, WORLD))
        if split == "dev":
            out_of_fold()
    own = load(LOGS / "index.toml")
    if args.smoke:
        own = smoke_subset(own)
    for e in own:
        e["category"] = e["category"] if e["root"] else ""
    report("own corpus", score(own, LOGS, False))
    if args.learning_curve:
        learning_curve(world, (0.25, 0.5, 0.75, 1.0), 0)
    if args.nested:
        nested(0)


if __name__ == "__main__":
    main()
