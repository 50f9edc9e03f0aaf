"""The net family: interfaces, the interface NCCL and Gloo will pick, MASTER_ADDR / MASTER_PORT,
and (cluster mode) the node-to-node mesh.

Node scope: in cluster mode only each node's leader runs it. ``facts`` gathers every fact (all
of the I/O, the mesh included); ``interfaces``, ``master`` and ``mesh`` hold the checks that
judge them. The interface prediction itself is pure (``ncclcheck.network.interfaces``).
"""

from __future__ import annotations

from ncclcheck.context import ProbeContext
from ncclcheck.model import CheckResult
from ncclcheck.probes.net.facts import Facts, gather_facts
from ncclcheck.probes.registry import run_judges

FAMILY = "net"


def probe(ctx: ProbeContext) -> list[CheckResult]:
    return judge_facts(gather_facts(ctx))


def judge_facts(facts: Facts) -> list[CheckResult]:
    """Every net check from gathered facts, in report order; no I/O."""
    return run_judges(FAMILY, facts)
