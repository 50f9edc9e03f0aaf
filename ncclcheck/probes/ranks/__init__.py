"""The ranks family: is this process's place in the job consistent with nodes x GPUs?

Everything here is arithmetic on the launcher's variables; the only outside question is how
many GPUs this process can see (asked of torch, never required). ``facts`` gathers the layout
and the expected shape; every other module holds one check or a small group, spec beside judge.
The Lightning checks (``lightning``) are reported by the part the caller hands in with
``--lightning`` / ``--cluster-env``, so this family never imports Lightning-facing code.
"""

from __future__ import annotations

from ncclcheck.context import ProbeContext
from ncclcheck.model import CheckResult
from ncclcheck.probes.ranks.facts import gather_facts
from ncclcheck.probes.registry import run_judges

FAMILY = "ranks"


def probe(ctx: ProbeContext) -> list[CheckResult]:
    facts = gather_facts(ctx)
    results = run_judges(FAMILY, facts)
    for result in results:
        result.rank = facts.layout.rank
    if ctx.options.ranks.wants_lightning:
        results.extend(ctx.options.ranks.lightning_results(ctx))
    return results
