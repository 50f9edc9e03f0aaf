"""bench.plot: the busbw curve (and, after --isolate, the pair matrix) drawn into --plot FILE.

It runs after the other bench checks: it draws what they measured, and a plot that cannot be
drawn never hides the measurements.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.bench.isolate_report import isolate_details
from ncclcheck.bench.plot import draw
from ncclcheck.model import Category, CheckResult, passed, warned
from ncclcheck.probes.bench.measure import BenchFacts
from ncclcheck.probes.spec import CheckSpec, judge

PLOT = CheckSpec(
    "bench.plot", "the --plot file was drawn", (Category.CONFIGURATION,),
    warns_when="--plot FILE cannot be drawn (the plot extra is missing, or the "
               "path or its suffix is unusable); the measurements stay in the "
               "report",
    order=50)


@judge(PLOT)
def judge_plot(facts: BenchFacts) -> CheckResult | None:
    """Only with --plot and a sweep that measured something; records the file in the section."""
    path = facts.options.plot
    if not path or not facts.rows:
        return None
    isolated = facts.isolated
    pairs: dict[str, Any] | None = None
    if isolated is not None and isolated.isolation is not None and facts.section.isolate:
        pairs = {**isolate_details(isolated.isolation, isolated.hosts, isolated.nbytes),
                 "per_node": facts.section.isolate["per_node"]}
    try:
        draw(facts.section.to_dict(), path, pairs)
    except ImportError as exc:
        return warned(PLOT, f"could not draw {path}: {exc}",
                      "Install the plot extra: pip install 'ncclcheck[plot]'.",
                      Category.CONFIGURATION, path=path)
    except Exception as exc:  # a plot that cannot be drawn must not hide the measurements
        return warned(PLOT, f"could not draw {path}: {type(exc).__name__}: {exc}",
                      "Give --plot a writable .png, .svg or .pdf path.", Category.CONFIGURATION,
                      path=path)
    facts.section.plot = path
    return passed(PLOT, f"busbw curve drawn into {path}", path=path)
