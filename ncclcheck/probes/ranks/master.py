"""MASTER_ADDR / MASTER_PORT for torch's env:// rendezvous, as this launcher provides them."""

from __future__ import annotations

from ncclcheck.model import Category, CheckResult, failed, passed, warned
from ncclcheck.probes.ranks.facts import RanksFacts
from ncclcheck.probes.spec import CheckSpec, judge

MISMATCH = Category.RANK_MISMATCH


MASTER = CheckSpec(
    "ranks.master", "MASTER_ADDR / MASTER_PORT for torch's env:// rendezvous",
    (Category.CONFIGURATION,),
    fails_when="MASTER_ADDR / MASTER_PORT missing where the launcher must set them "
               "(torchrun, Kubeflow, the plain environment), or MASTER_PORT outside "
               "1..65535",
    warns_when="they are missing under Slurm / MPI / LSF, which do not set them "
               "(under srun ncclcheck derives them from SLURM_NODELIST and "
               "SLURM_JOB_ID as Lightning does; details.sources says so)",
    order=100)


@judge(MASTER)
def check_master(facts: RanksFacts) -> CheckResult:
    layout = facts.layout
    addr, port = layout.master_addr, layout.master_port
    details = {"master_addr": addr, "master_port": port, "required": layout.master_required,
               "sources": {k: v for k, v in layout.sources.items() if k.startswith("master_")}}
    if any(p.name.startswith("MASTER_") for p in layout.problems):
        bad = [p.describe() for p in layout.problems if p.name.startswith("MASTER_")]
        return failed(MASTER, "unusable rendezvous address: " + "; ".join(bad),
                      "Set MASTER_ADDR to the rank-0 host and MASTER_PORT to a free port in "
                      "1024..65535, identical on every node.", Category.CONFIGURATION, **details)
    missing = [n for n, v in (("MASTER_ADDR", addr), ("MASTER_PORT", port)) if v is None]
    derived = [n for n, v in (("MASTER_ADDR", addr), ("MASTER_PORT", port))
               if v is not None and layout.sources.get(n.lower(), n) != n]
    if not missing and not derived:
        return passed(MASTER, f"rendezvous at {addr}:{port}", **details)
    if not missing:
        return warned(MASTER, f"{' and '.join(derived)} not set: {addr}:{port} derived "
                      f"from {', '.join(layout.sources[n.lower()] for n in derived)}, as "
                      "ncclcheck's gather and Lightning do; torch's env:// rendezvous needs "
                      "them exported", f"Export MASTER_ADDR={addr} and MASTER_PORT={port} on "
                      "every task when the training uses torch's env:// rendezvous.",
                      Category.CONFIGURATION, **details)
    if layout.single_process or (layout.world_size == 1 and not layout.master_required):
        return passed(MASTER, "single process: no rendezvous address needed", **details)
    summary = f"{' and '.join(missing)} not set"
    fix = ("Export MASTER_ADDR=<rank-0 host> and MASTER_PORT=<free port>, identical on every "
           "node, before starting the processes.")
    if layout.master_required:
        return failed(MASTER, f"{summary}: torch's env:// rendezvous cannot start",
                      fix, Category.CONFIGURATION, **details)
    return warned(MASTER, f"{summary}: {layout.title} does not set them; torch's env:// "
                  "rendezvous needs them (Lightning derives them for Slurm and LSF)", fix,
                  Category.CONFIGURATION, **details)
