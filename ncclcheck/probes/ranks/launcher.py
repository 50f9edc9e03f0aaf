"""Which launcher started this process, and whether its variables parse at all."""

from __future__ import annotations

from ncclcheck.model import Category, CheckResult, failed, passed, warned
from ncclcheck.probes.ranks.facts import RanksFacts
from ncclcheck.probes.spec import CheckSpec, judge

MISMATCH = Category.RANK_MISMATCH


LAUNCHER = CheckSpec(
    "ranks.launcher", "the launcher that started this process", (MISMATCH,),
    fails_when="a Kubeflow pod with nprocPerNode > 1 runs the script without "
               "torchrun (RANK is the pod index)",
    warns_when="a Slurm batch script runs the training without srun",
    doc="Says which launcher was detected and why, and lists other launchers "
        "whose variables are also present; the first match in the detection "
        "order wins (see the launcher table).",
    order=10)


ENV = CheckSpec(
    "ranks.env", "launcher variables parse", (MISMATCH, Category.CONFIGURATION),
    fails_when="a rank variable is empty, not an integer, or out of range "
               "(WORLD_SIZE >= 1, ranks >= 0); configuration when only MASTER_* "
               "are malformed",
    doc="One malformed variable becomes one finding naming it, instead of a "
        "ValueError half-way through torch.distributed's setup.",
    order=20)


@judge(LAUNCHER)
def check_launcher(facts: RanksFacts) -> CheckResult:
    layout, others = facts.layout, facts.others
    summary = f"launcher: {layout.title} — {layout.reason}"
    if layout.single_process:
        summary = "no launcher: standalone single process (rank 0 of 1); layout checked as such"
    details = {"launcher": layout.launcher, "reason": layout.reason, "also_present": others,
               "variables": layout.variables, "notes": layout.notes}
    advice = layout.advice
    if advice is not None:
        verdict = failed if advice.fails else warned
        return verdict(LAUNCHER, f"{summary}; {advice.note}", advice.fix, MISMATCH, **details)
    return passed(LAUNCHER, summary, **details)


@judge(ENV)
def check_env_values(facts: RanksFacts) -> CheckResult:
    layout = facts.layout
    if not layout.problems:
        if not layout.variables:
            return passed(ENV, "no launcher variables set", variables=[])
        return passed(ENV, f"{len(layout.variables)} launcher variables parse as integers "
                      "in range", variables=sorted(layout.variables))
    problems = [p.describe() for p in layout.problems]
    category = (Category.CONFIGURATION
                if all(p.name.startswith("MASTER_") for p in layout.problems) else MISMATCH)
    fix = "; ".join(_env_fix(p.name) for p in layout.problems)
    return failed(ENV, "malformed launcher variable: " + "; ".join(problems), fix,
                  category, problems=[p.__dict__ for p in layout.problems])


def _env_fix(name: str) -> str:
    if name == "MASTER_PORT":
        return "Set MASTER_PORT to a free TCP port number between 1024 and 65535 (e.g. 29500)"
    if name == "MASTER_ADDR":
        return "Set MASTER_ADDR to the host name or IP address of the rank-0 node"
    if "SIZE" in name or "NTASKS" in name or "NNODES" in name or "NUM_NODES" in name:
        return f"Set {name} to a positive integer: the number of processes/nodes the launcher starts"
    return f"Set {name} to a non-negative integer (let the launcher set it rather than exporting it)"
