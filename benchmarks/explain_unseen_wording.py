"""How explain reads a failure whose message no signature knows: each signature left out in turn.

    python benchmarks/explain_unseen_wording.py [--show-misses] [--smoke]

Logs nobody here has seen fail with messages in wordings no signature was written for (another
release's, another launcher's). On the dev split that cannot be measured directly (the
signatures were written against it), but it can be simulated: for every failing dev log whose
root cause a catalogue signature names rightly, explain reads the log again with that one
signature left out, and what is left (the component tables generated from the software's own
enumerations, the context rules, the signals, the keyword cues, the text model, the other
signatures) must name the category. Signatures named by a rule (a fact read across several
lines), and those others refine, stay in: they are reasoning, not one message's wording.
Prints how many logs keep the right root cause, how many get a wrong one or none, and whether
the label is among the hypotheses (top-3). Only dev is read; ``--smoke`` reads every
SMOKE_STRIDE-th such log (seconds; not the figure).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from world_corpus import SMOKE_STRIDE, WORLD, load  # noqa: E402

from ncclcheck.catalogue import Catalogue, load as load_catalogue  # noqa: E402
from ncclcheck.explain.engine import explain  # noqa: E402
from ncclcheck.explain.textmodel import load_model  # noqa: E402

# readings that are no catalogue signature: nothing to leave out
_NOT_SIGNATURES = ("model.", "fallback.", "component.")


def without(catalogue: Catalogue, sig_id: str) -> Catalogue:
    return Catalogue(tuple(s for s in catalogue.signatures if s.id != sig_id),
                     {name: tuple(i for i in ids if i != sig_id)
                      for name, ids in catalogue.files.items()})


def removable(catalogue: Catalogue, sig_id: str) -> bool:
    sig = catalogue.by_id[sig_id]
    return not sig.rule and not any(sig_id in other.refines for other in catalogue.signatures)


def rightly_decided(entries: list[dict], model) -> dict[str, list[dict]]:
    """Per signature, the failing logs whose root cause it names with the right category."""
    by: dict[str, list[dict]] = defaultdict(list)
    for entry in entries:
        root = explain([str(WORLD / entry["path"])], model).root
        if (root is not None and root.signature.category.value == entry["category"]
                and not root.signature.id.startswith(_NOT_SIGNATURES)):
            by[root.signature.id].append(entry)
    return by


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show-misses", action="store_true")
    parser.add_argument("--smoke", action="store_true",
                        help=f"every {SMOKE_STRIDE}th log only (a quick run of the code)")
    args = parser.parse_args()
    entries = [e for e in load(WORLD / "index.toml") if e["split"] == "dev" and e["category"]]
    model, shipped = load_model(), load_catalogue()
    start = time.perf_counter()
    decided = rightly_decided(entries, model)
    cases = [(sid, e) for sid in sorted(decided) if removable(shipped, sid) for e in decided[sid]]
    kept_in = sum(len(v) for sid, v in decided.items() if not removable(shipped, sid))
    if args.smoke:
        cases = cases[::SMOKE_STRIDE]
        print(f"# smoke: every {SMOKE_STRIDE}th log; not the figure")
    tally: Counter[str] = Counter()
    went: Counter[str] = Counter()
    catalogues: dict[str, Catalogue] = {}
    for sid, entry in cases:
        reduced = catalogues.setdefault(sid, without(shipped, sid))
        found = explain([str(WORLD / entry["path"])], model, reduced)
        got = found.root.signature.category.value if found.root else ""
        tally["right" if got == entry["category"] else "wrong" if got else "none"] += 1
        tally["top3"] += entry["category"] in [h.category for h in found.hypotheses][:3]
        if got != entry["category"]:
            went[f"{entry['category']} -> {got or '(nothing)'}"] += 1
            if args.show_misses:
                print(f"    {entry['path']}: without {sid}: {got or '(nothing)'} "
                      f"({found.root.signature.id if found.root else '-'}); label "
                      f"{entry['category']}")
    n = len(cases)
    pct = (lambda k: 100.0 * tally[k] / n if n else 0.0)
    print(f"dev, each deciding signature left out: {n} logs ({len(decided)} signatures; "
          f"{kept_in} logs decided by a rule's or a refined signature stay out)")
    print(f"  root cause still right {tally['right']:>3}/{n} = {pct('right'):5.1f}%   wrong "
          f"{tally['wrong']:>3}   none {tally['none']:>3}   label in top-3 "
          f"{tally['top3']:>3}/{n} = {pct('top3'):5.1f}%")
    for move, count in went.most_common(12):
        print(f"  {count:>3}x  {move}")
    print(f"wall {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
