"""Does the launch match the nodes x GPUs the user means to run?"""

from __future__ import annotations

from ncclcheck.model import Category, CheckResult, failed, passed, skipped
from ncclcheck.probes.ranks.facts import RanksFacts
from ncclcheck.probes.spec import CheckSpec, judge

MISMATCH = Category.RANK_MISMATCH


LAYOUT = CheckSpec(
    "ranks.layout", "the launch matches the intended nodes x GPUs", (MISMATCH,),
    fails_when="--nodes / --gpus-per-node disagree with what the launcher started",
    doc="Flags say what the user means to run (Lightning's num_nodes and devices); "
        "without them the launcher's own node and per-node counts are used. "
        "Skipped when the layout is unknown.",
    order=30)


@judge(LAYOUT)
def check_layout_source(facts: RanksFacts) -> CheckResult:
    ctx, layout, expected = facts.ctx, facts.layout, facts.expected
    details = {"nodes": expected.nodes, "gpus_per_node": expected.gpus_per_node,
               "expected_world_size": expected.world, "nodes_from": expected.nodes_from,
               "gpus_per_node_from": expected.gpus_from}
    if layout.single_process:
        wanted = "" if expected.world in (None, 1) or ctx.nodes is None and ctx.gpus_per_node is None \
            else f"; the {expected.describe()} layout is checked when the job's launcher runs"
        return passed(LAYOUT, f"standalone: a single process on this machine{wanted}",
                      **details)
    mismatches = []
    if ctx.nodes is not None and layout.num_nodes is not None and ctx.nodes != layout.num_nodes:
        mismatches.append((f"--nodes {ctx.nodes}", f"{layout.source('num_nodes')}={layout.num_nodes}",
                           f"num_nodes={layout.num_nodes}"))
    if (ctx.gpus_per_node is not None and layout.local_world_size is not None
            and ctx.gpus_per_node != layout.local_world_size):
        mismatches.append((f"--gpus-per-node {ctx.gpus_per_node}",
                           f"{layout.source('local_world_size')}={layout.local_world_size}",
                           f"devices={layout.local_world_size}"))
    if mismatches:
        said = "; ".join(f"you said {a} but the launcher says {b}" for a, b, _ in mismatches)
        trainer = ", ".join(t for _, _, t in mismatches)
        return failed(LAYOUT, f"the launch does not match the intended layout: {said}",
                      f"Make the Trainer and the launcher agree: Trainer({trainer}) for this launch, "
                      "or launch with the nodes and processes per node you meant.", MISMATCH,
                      **details, mismatches=[{"intended": a, "launcher": b} for a, b, _ in mismatches])
    if expected.world is None:
        return skipped(LAYOUT, "layout unknown: pass --nodes N --gpus-per-node M "
                       "(or --num-nodes / --devices) to check ranks against it", **details)
    origin = ", ".join(x for x in (expected.nodes_from, expected.gpus_from) if x)
    return passed(LAYOUT, f"expected layout {expected.describe()} ranks (from {origin})",
                  **details)
