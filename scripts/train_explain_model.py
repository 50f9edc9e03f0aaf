"""Train explain's text model on the world corpus's dev split and write the shipped weights.

    python scripts/train_explain_model.py [--check] [--dev-fraction F] [--seed N]

Reads tests/data/logs/world/index.toml and only the logs of the dev split: the script refuses
to open a log outside ``world/dev/`` (the test split measures the model; it never trains or
tunes it). Each log is read by explain itself (``explain(..., model=None)``): the features are
those of the lines its scanner keeps (ncclcheck/explain/normalize.py), so training and reading
see the same thing. scikit-learn (the ``test`` extra) fits a TF-IDF + multinomial logistic
regression; its regularisation is chosen by cross-validation grouped by thread, and the
abstention threshold is the one at which explain, read out of fold, names the most dev logs
right while calling no clean dev log a failure. The weights go to ncclcheck/explain/textmodel.json.gz (read at run time with the
standard library). ``--check`` trains and compares with the shipped file instead of writing.
``--dev-fraction`` trains on part of dev only (benchmarks/explain_accuracy.py's learning curve).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ncclcheck.explain.engine import explain  # noqa: E402
from ncclcheck.explain.model_reading import decisive, leaves_open  # noqa: E402
from ncclcheck.explain.textmodel import CLEAN, MODEL_FILE  # noqa: E402

WORLD = ROOT / "tests" / "data" / "logs" / "world"
DEV = WORLD / "dev"
C_GRID = (3.0, 10.0, 30.0)
FOLDS = 5
MIN_DF = 2             # a feature seen in one log only is that log's, not a failure's
THRESHOLDS = tuple(round(0.2 + 0.05 * i, 2) for i in range(16))  # 0.2 .. 0.95
WEIGHT_DIGITS = 4
MIN_WEIGHT = 1e-3


class TestSplitRefused(RuntimeError):
    pass


def dev_entries() -> list[dict]:
    entries = tomllib.loads((WORLD / "index.toml").read_text("utf-8"))["log"]
    return [e for e in entries if e["split"] == "dev"]


def dev_path(entry: dict) -> Path:
    """The log's path, refused unless it lies in the dev split's folder."""
    path = (WORLD / entry["path"]).resolve()
    if entry["split"] != "dev" or DEV.resolve() not in path.parents:
        raise TestSplitRefused(f"{entry['path']} is not a dev log: the model never sees test")
    return path


def read_logs(entries: list[dict]) -> list[dict]:
    """Per log: its features, its label, its thread, and what the signatures alone said."""
    rows = []
    for entry in entries:
        result = explain([str(dev_path(entry))], model=None)
        root = result.findings[0] if result.findings else None
        rows.append({"bag": sorted(result.text.bag()), "label": entry["category"] or CLEAN,
                     "group": entry["source"],
                     "sig": root.signature.category.value if root else CLEAN,
                     "decisive": decisive(root), "open": leaves_open(root),
                     "failed": result.text.failed})
    return rows


def fit(bags: list[list[str]], labels: list[str], c: float):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    vectorizer = TfidfVectorizer(analyzer=lambda bag: bag, binary=True, min_df=MIN_DF,
                                 norm="l2", use_idf=True, smooth_idf=True, lowercase=False)
    x = vectorizer.fit_transform(bags)
    model = LogisticRegression(C=c, max_iter=5000, class_weight="balanced")
    model.fit(x, labels)
    return vectorizer, model


def out_of_fold(rows: list[dict], c: float, seed: int) -> list[dict[str, float]]:
    """Each log's probabilities from a model that did not see its thread."""
    from sklearn.model_selection import GroupKFold

    bags = [r["bag"] for r in rows]
    labels = [r["label"] for r in rows]
    groups = [r["group"] for r in rows]
    probs: list[dict[str, float]] = [{} for _ in rows]
    folds = GroupKFold(n_splits=FOLDS, shuffle=True, random_state=seed)
    for train, held in folds.split(bags, labels, groups):
        vectorizer, model = fit([bags[i] for i in train], [labels[i] for i in train], c)
        p = model.predict_proba(vectorizer.transform([bags[i] for i in held]))
        for row, i in enumerate(held):
            probs[i] = dict(zip(model.classes_, p[row]))
    return probs


def top(prob: dict[str, float], k: int, failing_only: bool = True) -> list[str]:
    ranked = sorted(prob, key=lambda c: -prob[c])
    return [c for c in ranked if not failing_only or c != CLEAN][:k]


def threshold_for(rows: list[dict], probs: list[dict[str, float]]) -> float:
    """The threshold, among THRESHOLDS, at which explain (signatures, then the model where
    they leave a log open) names the most dev logs right out of fold while calling no clean
    log a failure; the lowest such."""
    best = None
    for threshold in THRESHOLDS:
        score = summary(rows, probs, threshold)
        if score["clean_alarms"]:
            continue
        if best is None or score["both"] > best[0]:
            best = (score["both"], threshold)
    return best[1] if best else THRESHOLDS[-1]


def combined(row: dict, prob: dict[str, float], threshold: float) -> str:
    """What explain answers: the signatures' root cause, unless they leave the log open and
    the model is confident (its top class a failure at the threshold, a failure line seen)."""
    if not (row["open"] and row["failed"]):
        return row["sig"]
    best = max(prob, key=lambda c: prob[c])
    if best != CLEAN and prob[best] >= threshold:
        return best
    return row["sig"]


def summary(rows: list[dict], probs: list[dict[str, float]], threshold: float) -> dict:
    failing = [(r, p) for r, p in zip(rows, probs) if r["label"] != CLEAN]
    n = len(failing)
    sig = sum(r["sig"] == r["label"] for r, _ in failing)
    model1 = sum(top(p, 1) == [r["label"]] for r, p in failing)
    model3 = sum(r["label"] in top(p, 3) for r, p in failing)
    both = sum(combined(r, p, threshold) == r["label"] for r, p in failing)
    alarms = sum(combined(r, p, threshold) != CLEAN for r, p in zip(rows, probs)
                 if r["label"] == CLEAN)
    return {"logs": n, "signatures": sig, "model_top1": model1, "model_top3": model3,
            "both": both, "clean_alarms": alarms}


def signature_precision(rows: list[dict]) -> dict[str, float]:
    """How often a root cause is right, by whether it was decisive (read on dev)."""
    out = {}
    for kind, wanted in (("decisive", True), ("other", False)):
        chosen = [r for r in rows if r["sig"] != CLEAN and r["decisive"] == wanted]
        if chosen:
            out[kind] = round(sum(r["sig"] == r["label"] for r in chosen) / len(chosen), 3)
    return out


def export(vectorizer, model, threshold: float, precision: dict[str, float], meta: dict) -> dict:
    classes = [str(c) for c in model.classes_]
    coef = model.coef_
    features = {}
    for feat, column in vectorizer.vocabulary_.items():
        pairs = [[ci, round(float(coef[ci, column]), WEIGHT_DIGITS)]
                 for ci in range(len(classes)) if abs(coef[ci, column]) >= MIN_WEIGHT]
        # every feature keeps its idf, weighty or not: each one counts in a log's norm
        features[feat] = [round(float(vectorizer.idf_[column]), WEIGHT_DIGITS), pairs]
    return {"classes": classes, "bias": [round(float(b), WEIGHT_DIGITS) for b in model.intercept_],
            "threshold": threshold, "signature_precision": precision, "meta": meta,
            "features": dict(sorted(features.items()))}


def train(fraction: float = 1.0, seed: int = 0, quiet: bool = False,
          threads: set[str] | None = None) -> dict:
    """The model as data (what the shipped file holds), trained on dev, or on ``threads`` of
    it, or on a ``fraction`` of its threads."""
    entries = dev_entries()
    if threads is not None:
        entries = [e for e in entries if e["source"] in threads]
    if fraction < 1.0:  # whole threads, so a thread never straddles train and held-out folds
        threads = sorted({e["source"] for e in entries})
        random.Random(seed).shuffle(threads)
        kept = set(threads[:max(FOLDS, round(len(threads) * fraction))])
        entries = [e for e in entries if e["source"] in kept]
    rows = read_logs(entries)
    best = None
    for c in C_GRID:
        probs = out_of_fold(rows, c, seed)
        score = summary(rows, probs, threshold_for(rows, probs))
        if not quiet:
            print(f"C={c:g}: {score}")
        key = (score["both"], score["model_top1"])
        if best is None or key > best[0]:
            best = (key, c, probs)
    _, c, probs = best
    threshold = threshold_for(rows, probs)
    score = summary(rows, probs, threshold)
    vectorizer, model = fit([r["bag"] for r in rows], [r["label"] for r in rows], c)
    meta = {"trained_on": "world dev split", "logs": len(rows), "C": c, "min_df": MIN_DF,
            "out_of_fold": score}
    return export(vectorizer, model, threshold, signature_precision(rows), meta)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="train and compare with the shipped model instead of writing it")
    parser.add_argument("--dev-fraction", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=MODEL_FILE)
    args = parser.parse_args(argv)
    data = train(args.dev_fraction, args.seed)
    print(f"chosen: C={data['meta']['C']:g}, threshold {data['threshold']}, "
          f"{len(data['features'])} features; out of fold on dev: {data['meta']['out_of_fold']}")
    blob = json.dumps(data, separators=(",", ":"), sort_keys=True).encode()
    if args.check:
        shipped = json.loads(gzip.decompress(MODEL_FILE.read_bytes()))
        same = shipped == json.loads(blob)
        print("the shipped model is " + ("current" if same else "stale: retrain"))
        return 0 if same else 1
    args.out.write_bytes(gzip.compress(blob, mtime=0))
    print(f"wrote {args.out.name}: {args.out.stat().st_size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
