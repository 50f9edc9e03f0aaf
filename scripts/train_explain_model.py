"""Train explain's text model on the world corpus's dev split and write the shipped weights.

    python scripts/train_explain_model.py [--check] [--dev-fraction F] [--seed N]

Reads tests/data/logs/world/index.toml and only the logs of the dev split: the script refuses
to open a log outside ``world/dev/`` (the test split measures the model; it never trains or
tunes it). Each log is read by explain itself (``explain(..., model=None)``): the features are
those of the lines its scanner keeps (ncclcheck/explain/normalize.py), so training and reading
see the same thing. scikit-learn (the ``test`` extra) fits a TF-IDF + multinomial logistic
regression twice: the run reading (a log's lines as one bag) and the line reading (each line as
a category's deciding line), both also on every signature's example message. The
regularisation and the line reading's share are chosen by cross-validation grouped by thread
(the model's own top-1 + top-3 out of fold), and the abstention threshold is the one at which
explain, read out of fold, names the most dev logs right while calling no clean dev log a
failure. The weights go to ncclcheck/explain/textmodel.json, flat (one string per feature, which
explain parses with the standard library only when a log holds that feature). ``--check``
trains and compares with the shipped file instead of writing.
``--dev-fraction`` trains on part of dev only (benchmarks/explain_accuracy.py's learning curve).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ncclcheck.catalogue import load as load_catalogue  # noqa: E402
from ncclcheck.explain.engine import explain  # noqa: E402
from ncclcheck.explain.arbiter import standing_key  # noqa: E402
from ncclcheck.explain.model_reading import leaves_open  # noqa: E402
from ncclcheck.explain.normalize import normalized  # noqa: E402
from ncclcheck.explain.lines import parse_line  # noqa: E402
from ncclcheck.explain.textmodel import (  # noqa: E402
    CLEAN, MODEL_FILE, NONE, flat, line_features, mixed)

WORLD = ROOT / "tests" / "data" / "logs" / "world"
DEV = WORLD / "dev"
C_GRID = (3.0, 10.0, 30.0)
LINE_C = 3.0           # the line reader's regularisation
OTHER_LINE_WEIGHT = 0.3  # a line that decides nothing weighs this much in the line reader
MIX_GRID = (0.0, 0.25, 0.5, 0.75)  # the line reader's share of a run's probabilities
FOLDS = 5
MIN_DF = 2             # a feature seen in one log only is that log's, not a failure's
THRESHOLDS = tuple(round(0.2 + 0.05 * i, 2) for i in range(16))  # 0.2 .. 0.95
WEIGHT_DIGITS = 4
MIN_WEIGHT = 0.05      # lighter weights are left out of the shipped file: on every dev log the
                       # top class is unchanged, a probability moves by 0.02 at most, and the
                       # file loads in a third of the time


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
        root = result.root
        deciding = normalized(entry["deciding_line"]) if entry["deciding_line"] else ""
        lines = [(normalized(text), list(feats)) for _, _, text, feats in result.text.lines]
        rows.append({"bag": sorted(result.text.bag()), "label": entry["category"] or CLEAN,
                     "lines": lines, "deciding": deciding,
                     "group": entry["source"],
                     "sig": root.signature.category.value if root else CLEAN,
                     "standing": standing_key(root) if root else "", "open": leaves_open(root),
                     "failed": result.text.failed})
    return rows


def catalogue_examples() -> list[tuple[list[str], str]]:
    """Every signature's example message with its category: the message formats of NCCL,
    torch and the launchers as their sources print them, which the dev logs show only some of.
    Warnings are left out (a run carries on after one)."""
    return [(_features(sig.example), sig.category.value) for sig in load_catalogue().signatures
            if sig.example and not sig.warning]


def _features(line: str) -> list[str]:
    """A line's features as explain reads them: its prefixes peeled off by the line parser."""
    info = parse_line(line)
    return line_features(line, info.message, info.severity)


def fit(bags: list[list[str]], labels: list[str], c: float,
        examples: list[tuple[list[str], str]] = (), weights: list[float] | None = None):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    bags = list(bags) + [feats for feats, _ in examples]
    labels = list(labels) + [label for _, label in examples]
    weights = (weights or [1.0] * (len(bags) - len(examples))) + [1.0] * len(examples)
    vectorizer = TfidfVectorizer(analyzer=lambda bag: bag, binary=True, min_df=MIN_DF,
                                 norm="l2", use_idf=True, smooth_idf=True, lowercase=False)
    x = vectorizer.fit_transform(bags)
    model = LogisticRegression(C=c, max_iter=5000, class_weight="balanced")
    model.fit(x, labels, sample_weight=weights)
    return vectorizer, model


def deciding(row: dict, text: str) -> bool:
    """Whether a line of ``row`` is its deciding line (as normalised words)."""
    return bool(row["label"] != CLEAN and row["deciding"] and text
                and (row["deciding"] in text or (len(text) > 10 and text in row["deciding"])))


def fit_lines(rows: list[dict], examples: list[tuple[list[str], str]]):
    """The line reader: each dev log's deciding line as its category, every other line as
    NONE (weighing less: most lines of a failed run decide nothing), and the examples."""
    bags, labels, weights = [], [], []
    for row in rows:
        for text, feats in row["lines"]:
            hit = deciding(row, text)
            bags.append(feats)
            labels.append(row["label"] if hit else NONE)
            weights.append(1.0 if hit else OTHER_LINE_WEIGHT)
    return fit(bags, labels, LINE_C, examples, weights)


def line_reading(reader, rows: list[dict]) -> list[dict[str, float]]:
    """Per log, per category, the probability of its likeliest line."""
    vectorizer, model = reader
    out = []
    for row in rows:
        if not row["lines"]:
            out.append({})
            continue
        p = model.predict_proba(vectorizer.transform([feats for _, feats in row["lines"]]))
        out.append({c: float(p[:, i].max()) for i, c in enumerate(model.classes_) if c != NONE})
    return out


def out_of_fold(rows: list[dict], c_grid: tuple[float, ...], seed: int,
                examples: list[tuple[list[str], str]]) -> tuple[dict, list[dict[str, float]]]:
    """Each log's run reading (per C) and line reading from models that did not see its
    thread. The folds' fits are independent: they run in as many processes as there are
    cores (forked, so the rows are not copied), with the same results as one by one."""
    from sklearn.model_selection import GroupKFold

    bags = [r["bag"] for r in rows]
    labels = [r["label"] for r in rows]
    groups = [r["group"] for r in rows]
    folds = GroupKFold(n_splits=FOLDS, shuffle=True, random_state=seed)
    split = [(list(train), list(held)) for train, held in folds.split(bags, labels, groups)]
    tasks = [(fold, c) for fold in range(len(split)) for c in (*c_grid, None)]
    shared = (rows, split, examples)
    workers = min(len(tasks), os.cpu_count() or 1)
    if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_share,
                                 initargs=(shared,)) as pool:
            done = list(pool.map(_fold_fit, tasks))
    else:
        _share(shared)
        done = [_fold_fit(task) for task in tasks]
    runs: dict[float, list[dict[str, float]]] = {c: [{} for _ in rows] for c in c_grid}
    lines: list[dict[str, float]] = [{} for _ in rows]
    for (fold, c), readings in zip(tasks, done):
        target = lines if c is None else runs[c]
        for i, reading in zip(split[fold][1], readings):
            target[i] = reading
    return runs, lines


_SHARED: tuple = ()  # a fold worker's rows, folds and examples (set once per process)


def _share(shared: tuple) -> None:
    global _SHARED
    _SHARED = shared


def _fold_fit(task: tuple[int, float | None]) -> list[dict[str, float]]:
    """One fold's run reading with ``C`` (or, for None, its line reading) of the held logs."""
    rows, split, examples = _SHARED
    fold, c = task
    train, held = split[fold]
    if c is None:
        reader = fit_lines([rows[i] for i in train], examples)
        return line_reading(reader, [rows[i] for i in held])
    vectorizer, model = fit([rows[i]["bag"] for i in train], [rows[i]["label"] for i in train],
                            c, examples)
    p = model.predict_proba(vectorizer.transform([rows[i]["bag"] for i in held]))
    return [dict(zip(model.classes_, (float(x) for x in p[row]))) for row in range(len(held))]


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


MIN_PER_STANDING = 8  # roots of one standing needed for a figure of its own


def signature_precision(rows: list[dict]) -> dict[str, float]:
    """How often a root cause the signatures chose is right, per standing of that root (the
    arbiter's: a decisive cause, a reasoned one, a consequence...; read on dev), and over all
    of them as "other" for a standing with too few roots to say."""
    chosen = [r for r in rows if r["sig"] != CLEAN]
    out = {}
    for kind in sorted({r["standing"] for r in chosen}):
        mine = [r for r in chosen if r["standing"] == kind]
        if len(mine) >= MIN_PER_STANDING:
            out[kind] = round(sum(r["sig"] == r["label"] for r in mine) / len(mine), 3)
    if chosen:
        out["other"] = round(sum(r["sig"] == r["label"] for r in chosen) / len(chosen), 3)
    return out


def export_linear(vectorizer, model, min_weight: float = MIN_WEIGHT) -> dict:
    """A linear model's classes, biases and, per feature, its idf and its weights."""
    classes = [str(c) for c in model.classes_]
    coef = model.coef_
    features = {}
    for feat, column in vectorizer.vocabulary_.items():
        pairs = [[ci, round(float(coef[ci, column]), WEIGHT_DIGITS)]
                 for ci in range(len(classes)) if abs(coef[ci, column]) >= min_weight]
        # every feature keeps its idf, weighty or not: each one counts in a log's norm
        features[feat] = [round(float(vectorizer.idf_[column]), WEIGHT_DIGITS), pairs]
    return {"classes": classes, "bias": [round(float(b), WEIGHT_DIGITS) for b in model.intercept_],
            "features": dict(sorted(features.items()))}


def export(vectorizer, model, threshold: float, precision: dict[str, float], meta: dict,
           min_weight: float = MIN_WEIGHT) -> dict:
    return {**export_linear(vectorizer, model, min_weight), "threshold": threshold,
            "signature_precision": precision, "meta": meta}


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
    examples = catalogue_examples()
    runs, lines = out_of_fold(rows, C_GRID, seed, examples)
    best = None
    for c in C_GRID:
        for mix in MIX_GRID:
            probs = [mixed(run, line, mix) for run, line in zip(runs[c], lines)]
            score = summary(rows, probs, threshold_for(rows, probs))
            if not quiet:
                print(f"C={c:g} mix={mix:g}: {score}")
            # the model's own out-of-fold reading decides: "both" is mostly the signatures,
            # which were written against these logs and right on them far more than on unseen
            key = (score["model_top1"] + score["model_top3"], score["both"])
            if best is None or key > best[0]:
                best = (key, c, mix, probs)
    _, c, mix, probs = best
    threshold = threshold_for(rows, probs)
    score = summary(rows, probs, threshold)
    vectorizer, model = fit([r["bag"] for r in rows], [r["label"] for r in rows], c, examples)
    meta = {"trained_on": "world dev split", "logs": len(rows), "C": c, "min_df": MIN_DF,
            "examples": len(examples), "mix": mix, "out_of_fold": score}
    data = export(vectorizer, model, threshold, signature_precision(rows), meta)
    if mix > 0:
        line_vectorizer, line_model = fit_lines(rows, examples)
        data["lines"] = export_linear(line_vectorizer, line_model)
        data["mix"] = mix
    return data


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
    blob = json.dumps(flat(data), separators=(",", ":"), sort_keys=True).encode() + b"\n"
    if args.check:
        shipped = json.loads(MODEL_FILE.read_bytes())
        same = shipped == json.loads(blob)
        print("the shipped model is " + ("current" if same else "stale: retrain"))
        return 0 if same else 1
    args.out.write_bytes(blob)
    print(f"wrote {args.out.name}: {args.out.stat().st_size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
