"""The nccl family: the libnccl a job really loads, what it says about itself, its plugins,
the NCCL/torch settings, and GPU/CUDA readiness.

``facts`` does every read (the library is loaded in a child process under the deadline); each
other module holds one check or a small group, spec beside judge.
"""

from __future__ import annotations

from ncclcheck.context import ProbeContext
from ncclcheck.model import CheckResult
from ncclcheck.probes.nccl.facts import gather_facts
from ncclcheck.probes.registry import run_judges

FAMILY = "nccl"


def probe(ctx: ProbeContext) -> list[CheckResult]:
    return run_judges(FAMILY, gather_facts(ctx))
