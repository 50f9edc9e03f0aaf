"""The bench family: an nccl-tests style all-reduce sweep, judged and put into the report.

``measure`` runs the sweep (and the pair tests of --isolate) and gathers what the checks judge;
each other module holds one check, spec beside judge. The sweep's table goes into the report's
`bench` section (returned beside the checks, as a ``FamilyOutput``).
"""

from __future__ import annotations

from ncclcheck.bench.faults import FAULT_VARIABLE, parse_faults
from ncclcheck.context import ProbeContext
from ncclcheck.model import FamilyOutput
from ncclcheck.probes.bench.allreduce import bad_fault_setting, no_gpu_for_nccl
from ncclcheck.probes.bench.measure import NcclWithoutGpu, measure
from ncclcheck.probes.registry import run_judges

FAMILY = "bench"


def probe(ctx: ProbeContext) -> FamilyOutput:
    fault = ctx.env.get(FAULT_VARIABLE, "")
    try:
        parse_faults(fault)
    except ValueError as exc:
        return FamilyOutput([bad_fault_setting(str(exc))])
    try:
        facts = measure(ctx, fault)
    except NcclWithoutGpu:
        return FamilyOutput([no_gpu_for_nccl()])
    if facts is None:
        return FamilyOutput()
    return FamilyOutput(run_judges(FAMILY, facts), facts.section)
