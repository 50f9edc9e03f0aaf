"""Do the launcher's variables agree with each other and with exported torch variables?"""

from __future__ import annotations

from ncclcheck.model import Category, CheckResult, failed, passed, skipped
from ncclcheck.probes.ranks.facts import RanksFacts
from ncclcheck.probes.spec import CheckSpec, judge

MISMATCH = Category.RANK_MISMATCH


AGREEMENT = CheckSpec(
    "ranks.agreement", "the launcher's variables agree with each other", (MISMATCH,),
    fails_when="the launcher's variables disagree with each other or with exported "
               "torch variables (SLURM_NTASKS vs SLURM_NNODES x "
               "SLURM_NTASKS_PER_NODE vs WORLD_SIZE, OMPI_COMM_WORLD_SIZE vs "
               "WORLD_SIZE, ...)",
    order=90)


@judge(AGREEMENT)
def check_agreement(facts: RanksFacts) -> CheckResult:
    layout = facts.layout
    agreements = layout.agreements
    details = {"compared": [a.describe() for a in agreements]}
    if not agreements:
        return skipped(AGREEMENT, "no overlapping launcher variables to compare", **details)
    broken = [a for a in agreements if not a.ok]
    if not broken:
        return passed(AGREEMENT, "launcher variables agree: "
                      + "; ".join(a.describe() for a in agreements), **details)
    return failed(AGREEMENT, "launcher variables disagree: "
                  + "; ".join(a.describe() for a in broken),
                  " ".join(a.fix for a in broken), MISMATCH, **details)
