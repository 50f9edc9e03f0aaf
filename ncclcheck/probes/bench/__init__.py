"""The bench family: an nccl-tests style all-reduce sweep, judged and put into the report.

``measure`` runs the sweep (and the pair tests of --isolate) and gathers what the checks judge;
each other module holds one check, spec beside judge. The sweep's table goes into the report's
`bench` section (returned beside the checks, as a ``FamilyOutput``).
"""

from __future__ import annotations

from ncclcheck.bench.faults import FAULT_VARIABLE, parse_faults
from ncclcheck.context import ProbeContext
from ncclcheck.model import FamilyOutput
from ncclcheck.needs import needs_torch, torch_missing
from ncclcheck.probes.bench.allreduce import ALLREDUCE, bad_fault_setting, no_gpu_for_nccl
from ncclcheck.probes.bench.isolate import ISOLATE
from ncclcheck.probes.bench.measure import NcclWithoutGpu, measure
from ncclcheck.probes.registry import run_judges

FAMILY = "bench"


def probe(ctx: ProbeContext) -> FamilyOutput:
    fault = ctx.env.get(FAULT_VARIABLE, "")
    try:
        parse_faults(fault)
    except ValueError as exc:
        return FamilyOutput([bad_fault_setting(str(exc))])
    missing = torch_missing()
    if missing:  # the sweep runs torch.distributed: nothing to measure without it
        isolate = [ISOLATE] if ctx.options.bench.isolate else []
        return FamilyOutput([needs_torch(spec, missing) for spec in [ALLREDUCE] + isolate])
    try:
        facts = measure(ctx, fault)
    except NcclWithoutGpu:
        return FamilyOutput([no_gpu_for_nccl()])
    if facts is None:
        return FamilyOutput()
    return FamilyOutput(run_judges(FAMILY, facts), facts.section)
