"""Where the text model's reading enters explain: a finding when no signature recognised
anything, and the ranked hypotheses (root cause first, then the model's next likeliest).

The model reads a log only where the signatures found nothing (the keyword guess of
fallback.py aside): a failure, a consequence or a warning a signature recognised keeps its
place, since letting the model replace those lost more logs than it won on dev, read out of
fold. A confident reading (top class a failure, at or above the threshold chosen on dev, in a
log with a failure line) becomes the root cause as ``model.<category>``, marked as a model's
reading, with the lines that weighed most. Everywhere else the model still ranks the
alternatives to the root cause (``hypotheses``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ncclcheck.catalogue import Signature
from ncclcheck.explain.arbiter import MODEL_STANDING, standing, standing_key
from ncclcheck.explain.cues import category_signature
from ncclcheck.explain.evidence import Role
from ncclcheck.explain.findings import Finding, Findings, Hit
from ncclcheck.explain.notes import Note
from ncclcheck.explain.textmodel import EvidenceLine, Reading, TextModel
from ncclcheck.model import Category

PREFIX = "model."
PRIORITY = 38        # above the keyword fallback (37): the model reads every line, not one word
MAX_HYPOTHESES = 3
MAX_EVIDENCE = 3


@dataclass(frozen=True)
class Hypothesis:
    """One candidate category for the run's failure, with where the evidence is."""

    category: str
    confidence: float
    source: str  # "signature", "rule" or "model"
    evidence: tuple[EvidenceLine, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.category, "confidence": round(self.confidence, 3),
                "source": self.source, "evidence": [e.to_dict() for e in self.evidence]}


def leaves_open(root: Finding | None) -> bool:
    """Whether the root cause without the model would stand below a confident reading of the
    model (the arbiter's order: nothing, a consequence, a launcher's report, a warning or the
    keyword cues), so the model's reading decides the log."""
    return root is None or standing(root) > MODEL_STANDING


@lru_cache(maxsize=None)
def model_signature(category: Category) -> Signature:
    """The finding a model's reading for ``category`` reads as."""
    return category_signature(
        PREFIX + category.value, category, f"A model's reading: {category.value}",
        f"No known failure message decides this log. A text model trained on public failure "
        f"logs reads it as {category.value} (probability {{probability}}); the lines that "
        f"weighed most are listed with it (line {{line}} first). This is a statistical reading, "
        f"not a recognised message: read those lines to confirm.", PRIORITY)


def add_model_reading(hits: Findings, reading: Reading | None) -> bool:
    """Add the model's finding when its reading is confident (a guess: the arbiter puts it
    below every recognised failure and consequence); True when it was added."""
    if reading is None:
        return False
    category = reading.confident()
    if category is None:
        return False
    if hits.says(Category(category), besides=PREFIX):
        return False  # a signature already says so, with its own text and fix
    lines = reading.evidence.get(category, ())
    if not lines:
        return False
    first = lines[0]
    probability = dict(reading.probabilities)[category]
    facts = {"probability": round(probability, 2), "line": first.line,
             "evidence": [e.to_dict() for e in lines]}
    sig = model_signature(Category(category))
    hits.add(Hit(sig, facts, first.file, first.line, first.text, None, None, None, hits.hits,
                 inferred_from={"file": first.file, "line": first.line, "text": first.text}))
    return True


def source_of(sig: Signature) -> str:
    if sig.id.startswith(PREFIX):
        return "model"
    return "rule" if sig.inferred else "signature"


def _root_confidence(root: Finding, reading: Reading | None, model: TextModel | None) -> float:
    sig = root.signature
    if sig.id.startswith(PREFIX) and reading is not None:
        return dict(reading.probabilities).get(sig.category.value, 0.0)
    if model is not None:
        precision = model.signature_precision
        kind = standing_key(root)
        if kind in precision:
            return precision[kind]
        if "other" in precision:
            return precision["other"]
    return 0.5


def hypotheses(findings: list[Finding], reading: Reading | None,
               model: TextModel | None) -> list[Hypothesis]:
    """Up to three categories, most likely first; the root cause's category leads. Without a
    root cause, the model's likeliest failures only where a line shows the run failed (its
    guesses, below the threshold it names a root cause at); none for a log without such a line
    (a clean log has no hypothesis)."""
    if not findings or not findings[0].root_cause:
        out = _death_reported(findings, model)
        if reading is None or not reading.failed:
            return out
        lead = {h.category for h in out}
        return out + [Hypothesis(category, p, "model",
                                 reading.evidence.get(category, ())[:MAX_EVIDENCE])
                      for category, p in reading.failing()
                      if category not in lead][:MAX_HYPOTHESES - len(out)]
    root = findings[0]
    lead = root.signature.category.value
    confidence = _root_confidence(root, reading, model)
    hit = root.first
    out = [Hypothesis(lead, confidence, source_of(root.signature),
                      (EvidenceLine(hit.file, hit.line, hit.text[:300], 1.0),))]
    rest = 1.0 - confidence
    if reading is not None:
        others = [(c, p) for c, p in reading.failing() if c != lead]
        mass = sum(p for _, p in others) or 1.0
        for category, p in others[:MAX_HYPOTHESES - 1]:
            out.append(Hypothesis(category, rest * p / mass, "model",
                                  reading.evidence.get(category, ())[:MAX_EVIDENCE]))
        return out
    seen = {lead}
    for finding in findings[1:]:
        category = finding.signature.category.value
        if category in seen or finding.signature.warning:
            continue
        seen.add(category)
        hit = finding.first
        out.append(Hypothesis(category, rest / 2, source_of(finding.signature),
                              (EvidenceLine(hit.file, hit.line, hit.text[:300], 1.0),)))
        if len(out) == MAX_HYPOTHESES:
            break
    return out


def _death_reported(findings: list[Finding], model: TextModel | None) -> list[Hypothesis]:
    """With no root cause: a launcher's report that a process exited with an error or aborted
    is never the root cause (its own output says why), but that a rank died is still the
    likeliest reading of a run that shows nothing else, as good as a consequence standing
    first (a peer's absence) on dev."""
    reports = [f for f in findings if f.role is Role.REPORT]
    if not reports:
        return []
    hit = reports[0].first
    precision = model.signature_precision if model is not None else {}
    confidence = precision.get("consequence", precision.get("other", 0.5))
    return [Hypothesis(reports[0].signature.category.value, confidence, "signature",
                       (EvidenceLine(hit.file, hit.line, hit.text[:300], 1.0),))]


def unexplained_failure(reading: Reading | None) -> Note | None:
    """With no root cause: the line that shows the run failed, and that the hypotheses are the
    model's guesses, not a finding."""
    if reading is None or reading.failure is None:
        return None
    where = reading.failure
    return Note("explain.unexplained_failure", (
        f"{where.file}:{where.line} shows the run failed ({where.text.strip()[:200]}), but no "
        f"known message decides why and the text model's reading is below the confidence at "
        f"which it names a root cause; its likeliest categories are listed as hypotheses, "
        f"guesses to check against those lines"))
