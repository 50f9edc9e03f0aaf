"""The ranks family: is this process's place in the job consistent with nodes x GPUs?

Everything here is arithmetic on the launcher's variables; the only outside question is how
many GPUs this process can see (asked of torch, never required). The expected shape is
``ranks_layout``'s, the checks are ``ranks_checks``'s.
"""

from __future__ import annotations

from ncclcheck.context import ProbeContext
from ncclcheck.gpus import VisibleGpus, nvidia_driver_loaded, visible_gpus
from ncclcheck.launchers import Layout, read_layout
from ncclcheck.model import CheckResult
from ncclcheck.probes.lightning_checks import CHECKS as LIGHTNING_CHECKS
from ncclcheck.probes.ranks_checks import CHECKS as OWN_CHECKS
from ncclcheck.probes.ranks_checks import (check_agreement, check_env_values, check_launcher,
                                           check_layout_source, check_local_rank, check_master,
                                           check_node_rank, check_rank, check_rank_formula,
                                           check_world_size)
from ncclcheck.probes.ranks_layout import expected_layout


def probe(ctx: ProbeContext) -> list[CheckResult]:
    layout, others = read_layout(ctx.env)
    gpus = _gpus(ctx, layout)
    expected = expected_layout(ctx, layout)
    results = [
        check_launcher(layout, others),
        check_env_values(layout),
        check_layout_source(ctx, layout, expected),
        check_rank(layout, expected),
        check_world_size(layout, expected),
        check_local_rank(layout, expected, gpus),
        check_node_rank(layout, expected),
        check_rank_formula(layout, expected),
        check_agreement(layout),
        check_master(layout, expected),
    ]
    for result in results:
        result.rank = layout.rank
    if ctx.options.ranks.wants_lightning:
        results.extend(ctx.options.ranks.lightning_results(ctx))
    return results


def _gpus(ctx: ProbeContext, layout: Layout) -> VisibleGpus:
    """The visible GPU count, from torch only when a local rank needs it and the driver is
    there: importing torch costs seconds, which a short --timeout cannot spare."""
    override = ctx.options.ranks.visible_gpus
    if override is not None:
        return VisibleGpus(int(override), "given by the caller")
    if layout.local_rank is None:
        return VisibleGpus(None, "not needed: no local rank to check")
    if not nvidia_driver_loaded():
        return VisibleGpus(None, "no NVIDIA driver: GPU count unknown, CPU (Gloo) layout assumed")
    return visible_gpus(ctx.env)


# -- declarations: every check this family reports (``ncclcheck checks``, docs/ranks.md): its
# own, then the ranks.lightning.* and ranks.cluster_env.* checks (declared in lightning_checks so
# that listing them does not import ncclcheck.lightning)
CHECKS = OWN_CHECKS + LIGHTNING_CHECKS
