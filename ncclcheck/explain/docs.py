"""docs/failures.md and `ncclcheck explain --list`, both generated from the catalogue.

Run ``python -m ncclcheck.explain.docs`` to rewrite docs/failures.md; ``--check`` exits 1 when
the committed file differs from what the catalogue produces.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ncclcheck.catalogue import Catalogue, Signature, load
from ncclcheck.explain.cues import CUES, GENERAL_FIX

DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "failures.md"


def listed(catalogue: Catalogue | None = None) -> list[Signature]:
    """The signatures as listings show them: by family file, then id (never file order)."""
    catalogue = load() if catalogue is None else catalogue
    family = {sig_id: name for name, ids in catalogue.files.items() for sig_id in ids}
    return sorted(catalogue.signatures, key=lambda sig: (family[sig.id], sig.id))


def catalogue_table(catalogue: Catalogue | None = None) -> str:
    """One line per signature, for `ncclcheck explain --list`."""
    sigs = listed(catalogue)
    width = max(len(s.id) for s in sigs)
    lines = [f"{'id':<{width}}  {'category':<16} title", f"{'-' * width}  {'-' * 16} -----"]
    for sig in sigs:
        mark = " (consequence)" if sig.consequence else " (warning)" if sig.warning else ""
        lines.append(f"{sig.id:<{width}}  {sig.category.value:<16} {sig.title}{mark}")
    lines.append(f"\n{len(sigs)} signatures; details: docs/failures.md")
    return "\n".join(lines)


def failures_markdown(catalogue: Catalogue | None = None) -> str:
    """docs/failures.md's text for ``catalogue`` (the shipped one when None)."""
    catalogue = load() if catalogue is None else catalogue
    sigs = listed(catalogue)
    out = [
        "# Known failures",
        "",
        "<!-- Generated from ncclcheck/catalogue/signatures/*.toml by "
        "`python -m ncclcheck.explain.docs`; do not edit by hand. -->",
        "",
        f"`ncclcheck explain` knows {len(sigs)} failure signatures, kept in one file per family "
        "(`ncclcheck/catalogue/signatures/<family>.toml`, listed here by family, then id). Each "
        "has a stable id, a category from the taxonomy, the pattern(s) it matches, what it means "
        "and the fix. *Consequence* signatures usually follow another failure and are never "
        "chosen as the root cause while a primary failure is in view; *warning* signatures are "
        "messages after which the library carries on. When several signatures match one line, "
        "declared fields decide which claims it (specific before *broad* before *last resort*, "
        "then *refines*, then priority; see docs/explain.md), never an entry's place. Words in "
        "`<angle brackets>` are filled in from the matched line.",
        "",
        "| id | family file | category | title |",
        "|---|---|---|---|",
    ]
    family = {sig_id: name for name, ids in catalogue.files.items() for sig_id in ids}
    out += [f"| [`{s.id}`](#{_anchor(s.id)}) | {family[s.id]} | {s.category.value} | {s.title} |"
            for s in sigs]
    for sig in sigs:
        out += ["", *_section(sig)]
    out += ["", *_fallback_section()]
    return "\n".join(out) + "\n"


def _fallback_section() -> list[str]:
    """The keyword fallback's findings (fallback.<category>) and the words behind them."""
    lines = ["## Keyword fallback: fallback.&lt;category&gt;", "",
             "When the log shows that the run failed (an exception, an error or fatal line, a "
             "fatal signal) but no signature above explains it — no finding, or only "
             "consequences and warnings — the error lines' words are scored per category "
             "(failure lines 2, NCCL warnings 1, INFO lines 0.5; times the word's weight). "
             "When the best category scores at least 4 and 1.5 times the runner-up, one "
             "low-confidence finding `fallback.<category>` (\"Most likely: <category>\") names "
             "the line and the word, and gives the category's general fix. It never replaces a "
             "recognised failure.", "", "| category | words (weight) | general fix |",
             "|---|---|---|"]
    for category, fix in GENERAL_FIX.items():
        words = "; ".join(f"`{c.pattern.pattern.replace('|', chr(92) + '|')}` ({c.weight})"
                          for c in CUES if c.category == category)
        lines.append(f"| {category.value} | {words or '—'} | {fix} |")
    return lines


def _section(sig: Signature) -> list[str]:
    kind = "consequence" if sig.consequence else "warning" if sig.warning else "primary failure"
    if sig.inferred:
        kind = "inferred from the log's context when NCCL gave only a generic error"
    if sig.rule:
        kind = f"inferred by the rule `{sig.rule}` (a fact read across several lines)"
    explanation, fix = sig.render({})
    lines = [f"## {sig.id}", "", f"**{sig.title}** — category `{sig.category.value}`, {kind}, "
             f"priority {sig.priority}.", ""]
    claims = _claims(sig)
    if claims:
        lines += [claims, ""]
    lines += [f"What it means: {explanation}", "",
             f"Fix: {fix}", "", "Example:", "", "```", sig.example, "```", "", "Patterns:", ""]
    lines += [f"- `{p}`" for p in sig.patterns]
    if sig.requires:
        lines += ["", "Only when: " + ", ".join(f"`{c}`" for c in sig.requires)]
    return lines


def _claims(sig: Signature) -> str:
    """How the signature competes for a line and stands among root causes, in a sentence."""
    parts = []
    if sig.broad:
        parts.append("*broad*: claims a line only when no specific signature does")
    if sig.last_resort:
        parts.append("*last resort*: claims a line only when no other signature does")
    if sig.refines:
        parts.append("*refines* " + ", ".join(f"[`{r}`](#{_anchor(r)})" for r in sig.refines)
                     + (": wins a line they also match" if len(sig.refines) > 1
                        else ": wins a line it also matches"))
    if sig.generic:
        parts.append("*generic*: NCCL's result says that something failed, not what; a cause "
                     "in the log's context or a specific failure explains it")
    if not parts:
        return ""
    text = "; ".join(parts)  # each part starts with an *emphasised* word
    return text[0] + text[1].upper() + text[2:] + "."


def _anchor(sig_id: str) -> str:
    return sig_id.replace(".", "").lower()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = failures_markdown()
    if "--check" in args:
        current = DOC_PATH.read_text("utf-8") if DOC_PATH.exists() else ""
        if current != text:
            print(f"{DOC_PATH.name} is stale: run python -m ncclcheck.explain.docs",
                  file=sys.stderr)
            return 1
        return 0
    DOC_PATH.parent.mkdir(exist_ok=True)
    DOC_PATH.write_text(text, "utf-8")
    print(f"wrote {DOC_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
