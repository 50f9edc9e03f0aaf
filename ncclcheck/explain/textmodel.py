"""The second reader: two linear text models over a log's words, for logs no signature decides.

Signatures recognise the messages someone wrote down; on real logs from threads outside the
corpus most misses are logs where explain found nothing although the evidence is there, in a
wording no signature was written for. This reader sees the lines the scanner keeps (error
lines, NCCL INFO lines, launch and setting lines; never chosen by the gate, so every engine
hands it the same lines) and each file's first and last lines, with prefixes stripped and
volatile tokens masked (normalize.py), with the taxonomy's cue words (cues.py) marked by the
kind of line. It reads them twice:

- the run reading: every line's words and word pairs as one bag per run (a class for a healthy
  run among the categories);
- the line reading: each line alone, as the deciding line of a category or as a line that
  decides nothing; a category's reading is its likeliest line, which is also the evidence shown.

Both are trained on the world corpus's dev split and on every signature's example message (the
message formats of NCCL, torch and the launchers, which no set of logs shows all of) by
``scripts/train_explain_model.py`` (scikit-learn's TF-IDF and logistic regression, at training
time only) and shipped as ``textmodel.json``; reading applies them with the standard library.
The shipped file is flat: each feature's idf and weights are one string, parsed only when a log
holds that feature, so a small log loads the few rows it needs instead of all of them.

The model gives a probability per category (and for "clean"); explain uses its reading only
when no signature is decisive, and only above the threshold chosen on dev so clean logs stay
clean (model_reading.py).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Mapping

from ncclcheck.explain.fallback import line_cues, line_weight
from ncclcheck.explain.normalize import normalized, strip_prefix, words

MODEL_FILE = Path(__file__).with_name("textmodel.json")
CLEAN = ""            # the class of a healthy log
NONE = "none"         # the line reader's class of a line that decides nothing
MAX_LINES = 4000      # distinct lines per run the model reads
MAX_LINE_CHARS = 2000
EVIDENCE = 3          # lines shown per category
EVIDENCE_CLASSES = 5
# A frame of a Python traceback (an exception on its way up): a log cut after it, or pasted
# with its header left out, still shows that the run failed (faulthandler's dumps of a live
# process print "line N in", without the comma, and are not failures by themselves).
_TRACEBACK_FRAME = re.compile(r'\s*File "[^"]+", line \d+, in ')
_NUMBERS = re.compile(r"[0-9]+")  # the most likely classes whose evidence lines are kept


def line_features(line: str, message: str | None = None,
                  severity: str | None = None) -> list[str]:
    """The model's features of one raw log line: its words and adjacent word pairs; the
    taxonomy's cue words it holds (cues.py), as ``cue:<category>`` and, by the kind of line,
    ``cue<E|W|I>:<category>``; on an error line, its words again as ``E:<word>`` (the same
    word weighs differently in an error than in an INFO line). ``message`` is the line as the
    log parser left it (launchers' and collectors' prefixes peeled off by lines.py, so that a
    tee's clock or a pod's name add no words), which with ``severity`` says what kind of line
    it is."""
    stripped = strip_prefix(message if message is not None else line)
    tokens = words(stripped)
    out = tokens + [f"{a} {b}" for a, b in zip(tokens, tokens[1:])]
    weight = line_weight(message if message is not None else line, severity)
    kind = "E" if weight >= 2 else "W" if weight >= 1 else "I" if weight > 0 else ""
    for category in line_cues(stripped):
        out.append(f"cue:{category.value}")
        if kind:
            out.append(f"cue{kind}:{category.value}")
    if kind == "E":
        out.extend(f"E:{token}" for token in tokens)
    return out


@dataclass(frozen=True)
class EvidenceLine:
    """A line that weighed for a category, and how much."""

    file: str
    line: int
    text: str
    weight: float

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "text": self.text}


@dataclass
class LogText:
    """The distinct lines of a run the model reads, each with its first place and features."""

    lines: list[tuple[str, int, str, tuple[str, ...]]] = field(default_factory=list)
    failure: EvidenceLine | None = None  # the first line that shows the run failed
    _seen: set[str] = field(default_factory=set)
    _quick: set[str] = field(default_factory=set)

    @property
    def failed(self) -> bool:
        """Whether a line shows the run failed (an exception, an error, a fatal signal)."""
        return self.failure is not None

    def feed(self, file: str, line: int, text: str, message: str | None = None,
             severity: str | None = None) -> None:
        """Keep ``text`` (line ``line`` of ``file``) unless a line of the same words was kept;
        ``message`` is the line as the log parser left it, ``severity`` a glog stamp's (see
        ``line_features``)."""
        if len(self.lines) >= MAX_LINES:
            return
        text = text.strip()[:MAX_LINE_CHARS]
        quick = _NUMBERS.sub("", text)  # the same line again with other numbers: no more work
        if quick in self._quick:
            return
        self._quick.add(quick)
        key = normalized(text)
        if not key or key in self._seen:
            return
        self._seen.add(key)
        message = text if message is None else message[:MAX_LINE_CHARS]
        self.lines.append((file, line, text, tuple(line_features(text, message, severity))))
        if self.failure is None and (line_weight(message, severity) >= 2
                                     or _TRACEBACK_FRAME.match(message)):
            self.failure = EvidenceLine(file, line, text, 1.0)

    def bag(self) -> set[str]:
        """Every feature of the run (presence, not counts: one log repeats a line per rank)."""
        return {feat for *_, feats in self.lines for feat in feats}


@dataclass(frozen=True)
class Reading:
    """The model's probabilities for one run, most likely first, and its evidence lines."""

    probabilities: tuple[tuple[str, float], ...]
    evidence: dict[str, tuple[EvidenceLine, ...]]
    threshold: float
    failure: EvidenceLine | None = None  # the first line that shows the run failed

    @property
    def failed(self) -> bool:
        return self.failure is not None

    @property
    def top(self) -> tuple[str, float]:
        return self.probabilities[0]

    def failing(self) -> list[tuple[str, float]]:
        """The failure categories, most likely first (the clean class left out)."""
        return [(c, p) for c, p in self.probabilities if c != CLEAN]

    def confident(self) -> str | None:
        """The category the model names: its top class, when that is a failure at or above
        the threshold and a line shows the run failed (a healthy log never gets a reading)."""
        category, probability = self.top
        if category == CLEAN or probability < self.threshold or not self.failed:
            return None
        return category


Row = tuple[float, dict[int, float]]  # one feature's idf and its weight per class index


def flat_row(row: list[Any] | str) -> str:
    """One feature's ``[idf, [[class, weight], ...]]`` as the shipped file's string:
    ``"idf class:weight ..."`` (floats written so they read back the same)."""
    if isinstance(row, str):
        return row
    idf, pairs = row
    return " ".join([repr(float(idf))] + [f"{int(c)}:{float(w)!r}" for c, w in pairs])


def _parse_row(row: list[Any] | str) -> Row:
    if isinstance(row, str):
        idf, *pairs = row.split(" ")
        weights = {}
        for pair in pairs:
            c, _, w = pair.partition(":")
            weights[int(c)] = float(w)
        return float(idf), weights
    return float(row[0]), {int(c): float(w) for c, w in row[1]}


class Rows:
    """A linear model's features, each parsed from its stored form on first use and kept (a
    read-only mapping of feature -> row; a plain class, as an abstract base costs the start)."""

    def __init__(self, stored: Mapping[str, list[Any] | str]) -> None:
        self._stored = stored
        self._parsed: dict[str, Row] = {}

    def get(self, feat: str, default: Any = None) -> Any:  # the hot path: no KeyError
        row = self._parsed.get(feat)
        if row is None:
            stored = self._stored.get(feat)
            if stored is None:
                return default
            row = self._parsed[feat] = _parse_row(stored)
        return row

    def __getitem__(self, feat: str) -> Row:
        row = self.get(feat)
        if row is None:
            raise KeyError(feat)
        return row

    def __contains__(self, feat: object) -> bool:
        return feat in self._stored

    def __iter__(self) -> Iterator[str]:
        return iter(self._stored)

    def __len__(self) -> int:
        return len(self._stored)

    @property
    def parsed(self) -> int:
        """How many rows were parsed so far (a small log needs few of them)."""
        return len(self._parsed)


@dataclass(frozen=True)
class Linear:
    """One linear model as trained: per feature its idf and its weight per class (sparse);
    binary tf x idf, l2-normalised, as scikit-learn's TfidfVectorizer + LogisticRegression."""

    classes: tuple[str, ...]
    bias: tuple[float, ...]
    rows: Rows

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Linear":
        """From the trained form (``features``: ``[idf, pairs]`` per feature) or the shipped
        flat one (a string per feature); either is parsed a feature at a time."""
        return cls(tuple(data["classes"]), tuple(float(b) for b in data["bias"]),
                   Rows(data["features"]))

    def norm(self, bag: set[str]) -> float:
        rows = self.rows.get
        return math.sqrt(sum(row[0] ** 2 for row in map(rows, bag) if row is not None)) or 1.0

    def scores(self, bag: set[str], norm: float | None = None) -> list[float]:
        """The class scores of a bag of features."""
        norm = self.norm(bag) if norm is None else norm
        scores = list(self.bias)
        for feat in bag:
            row = self.rows.get(feat)
            if row is not None and row[1]:
                x = row[0] / norm
                for c, w in row[1].items():
                    scores[c] += x * w
        return scores

    def probabilities(self, bag: set[str], norm: float | None = None) -> list[float]:
        scores = self.scores(bag, norm)
        top = max(scores)
        exps = [math.exp(s - top) for s in scores]
        total = sum(exps)
        return [e / total for e in exps]


def mixed(run: dict[str, float], lines: dict[str, float], mix: float) -> dict[str, float]:
    """A run's probabilities: ``(1 - mix)`` of the run reading and ``mix`` of the line reading
    (each category's likeliest line, scaled so the categories sum to at most one; what is left
    goes to the healthy class). Without a line reading, the run reading alone."""
    if not lines or mix <= 0:
        return dict(run)
    scale = max(1.0, sum(lines.values()))
    out = {c: (1 - mix) * p for c, p in run.items()}
    for category, p in lines.items():
        out[category] = out.get(category, 0.0) + mix * p / scale
    out[CLEAN] = out.get(CLEAN, 0.0) + mix * (1 - sum(lines.values()) / scale)
    return out


@dataclass(frozen=True)
class TextModel:
    """The two readings as trained: ``run`` reads a run's lines as one bag (with a class for a
    healthy run); ``lines`` reads each line alone, as a deciding line of a category or as
    ``NONE``, and a category's line reading is its likeliest line. A run's probabilities are
    ``(1 - mix) x run + mix x lines``."""

    run: Linear
    threshold: float
    signature_precision: dict[str, float]
    meta: dict[str, Any]
    lines: Linear | None = None
    mix: float = 0.0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TextModel":
        lines = Linear.from_dict(data["lines"]) if data.get("lines") else None
        return cls(Linear.from_dict(data), float(data["threshold"]),
                   dict(data.get("signature_precision", {})), dict(data.get("meta", {})),
                   lines, float(data.get("mix", 0.0)) if lines else 0.0)

    @property
    def classes(self) -> tuple[str, ...]:
        return self.run.classes

    def scores(self, bag: set[str], norm: float | None = None) -> list[float]:
        """The run reading's class scores of a bag of features."""
        return self.run.scores(bag, norm)

    def read(self, text: LogText) -> Reading:
        bag = text.bag()
        norm = self.run.norm(bag)
        run = dict(zip(self.run.classes, self.run.probabilities(bag, norm)))
        best, best_lines = self._line_reading(text)
        probs = mixed(run, best, self.mix)
        ranked = tuple(sorted(probs.items(), key=lambda item: -item[1]))
        likeliest = [c for c, _ in ranked[:EVIDENCE_CLASSES]]
        evidence = {c: best_lines[c] for c in likeliest if best_lines.get(c)}
        evidence.update(self._evidence(text, norm, [c for c in likeliest if c not in evidence]))
        return Reading(ranked, evidence, self.threshold, text.failure)

    def _line_reading(self, text: LogText) -> tuple[dict[str, float],
                                                    dict[str, tuple[EvidenceLine, ...]]]:
        """Per category, the line reader's probability for its likeliest line (every line, as
        the training script reads them), and the lines it reads likeliest as the deciding line
        (at most EVIDENCE, likeliest first, the probability as their weight) among the lines
        with words: a line with none (a traceback's ^^^^ marker) weighs only the bias and says
        nothing to whoever reads the evidence."""
        if self.lines is None or self.mix <= 0:
            return {}, {}
        top: dict[int, float] = {}
        best: dict[int, list[EvidenceLine]] = {}
        for file, number, line_text, feats in text.lines:
            for c, p in enumerate(self.lines.probabilities(set(feats))):
                if self.lines.classes[c] == NONE:
                    continue
                top[c] = max(top.get(c, 0.0), p)
                if not feats:
                    continue
                kept = best.setdefault(c, [])
                if len(kept) < EVIDENCE or p > kept[-1].weight:
                    kept.append(EvidenceLine(file, number, line_text[:300], p))
                    kept.sort(key=lambda e: -e.weight)
                    del kept[EVIDENCE:]
        return ({self.lines.classes[c]: p for c, p in top.items()},
                {self.lines.classes[c]: tuple(kept) for c, kept in best.items()})

    def _evidence(self, text: LogText, norm: float,
                  categories: list[str]) -> dict[str, tuple[EvidenceLine, ...]]:
        """Per category, the lines whose features weigh most for it in the run reading (each
        feature counted on the first line that has it, as the model counts it once)."""
        index = {c: i for i, c in enumerate(self.run.classes)}
        wanted = [index[c] for c in categories if c in index]
        scored: dict[int, list[EvidenceLine]] = {c: [] for c in wanted}
        counted: set[str] = set()
        for file, number, line_text, feats in text.lines:
            line_weight_of = dict.fromkeys(wanted, 0.0)
            for feat in feats:
                row = self.run.rows.get(feat)
                if row is None or not row[1] or feat in counted:
                    continue
                counted.add(feat)
                x, weights = row[0] / norm, row[1]
                for c in wanted:
                    line_weight_of[c] += x * weights.get(c, 0.0)
            for c, weight in line_weight_of.items():
                if weight > 0:
                    scored[c].append(EvidenceLine(file, number, line_text[:300], weight))
        return {self.run.classes[c]: tuple(sorted(scored[c], key=lambda e: -e.weight)[:EVIDENCE])
                for c in wanted}


def flat(data: dict[str, Any]) -> dict[str, Any]:
    """The trained model as the shipped file holds it: each feature's row one string."""
    out = {**data, "features": {f: flat_row(r) for f, r in data["features"].items()}}
    if data.get("lines"):
        out["lines"] = {**data["lines"], "features": {f: flat_row(r) for f, r in
                                                      data["lines"]["features"].items()}}
    return out


@lru_cache(maxsize=2)
def load_model(path: str | None = None) -> TextModel | None:
    """The shipped model (None when its file is absent: explain then reads with signatures
    alone)."""
    file = Path(path) if path else MODEL_FILE
    if not file.exists():
        return None
    return TextModel.from_dict(json.loads(file.read_bytes()))
