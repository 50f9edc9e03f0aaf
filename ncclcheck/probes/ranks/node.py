"""Where this process sits on its node and in the job: local rank, node rank, and the rank
they imply."""

from __future__ import annotations

from ncclcheck.model import Category, CheckResult, failed, passed, skipped
from ncclcheck.probes.ranks.facts import RanksFacts
from ncclcheck.probes.spec import CheckSpec, judge

MISMATCH = Category.RANK_MISMATCH


LOCAL_RANK = CheckSpec(
    "ranks.local_rank", "LOCAL_RANK has a GPU of its own",
    (MISMATCH, Category.DUPLICATE_GPU),
    fails_when="LOCAL_RANK >= GPUs per node, or >= the visible GPUs; more "
               "processes per node than visible GPUs (duplicate_gpu)",
    doc="The visible GPU count comes from torch when it imports and sees CUDA; it "
        "is never required.",
    order=60)


NODE_RANK = CheckSpec(
    "ranks.node_rank", "NODE_RANK is below the node count", (MISMATCH,),
    fails_when="NODE_RANK >= nodes (notes 1-based numbering)",
    order=70)


RANK_FORMULA = CheckSpec(
    "ranks.rank_formula", "RANK = NODE_RANK x GPUs + LOCAL_RANK", (MISMATCH,),
    fails_when="RANK != NODE_RANK x M + LOCAL_RANK where the launcher guarantees "
               "that numbering (torchrun, Lightning)",
    doc="Slurm and MPI may number ranks cyclically, so there a different rank is "
        "informational and passes.",
    order=80)


@judge(LOCAL_RANK)
def check_local_rank(facts: RanksFacts) -> CheckResult:
    layout, expected, gpus = facts.layout, facts.expected, facts.gpus
    local, per_node = layout.local_rank, expected.gpus_per_node
    details = {"local_rank": local, "gpus_per_node": per_node, "visible_gpus": gpus.count,
               "visible_gpus_from": gpus.how, "local_world_size": layout.local_world_size}
    if local is None:
        return skipped(LOCAL_RANK, "local rank unknown (launcher sets none)", **details)
    if per_node is not None and local >= per_node:
        return failed(LOCAL_RANK,
                      f"local rank {local} is outside 0..{per_node - 1} for {per_node} GPUs per node",
                      f"{layout.source('local_rank')} must be below {per_node}: start "
                      f"{per_node} processes per node (torchrun --nproc-per-node {per_node}, srun "
                      f"--ntasks-per-node={per_node}, Trainer(devices={per_node})).", MISMATCH,
                      **details)
    if gpus.count is not None and local >= gpus.count:
        return failed(LOCAL_RANK,
                      f"local rank {local} has no GPU: this process sees {gpus.count} "
                      f"GPU(s) ({gpus.how})",
                      "Start at most as many processes per node as visible GPUs, and do not narrow "
                      "CUDA_VISIBLE_DEVICES per process unless each process then uses device 0.",
                      MISMATCH, **details)
    if (gpus.count is not None and layout.local_world_size is not None
            and layout.local_world_size > gpus.count):
        return failed(LOCAL_RANK,
                      f"{layout.local_world_size} processes per node but only {gpus.count} visible "
                      "GPU(s): ranks would share GPUs",
                      f"Set the processes per node to {gpus.count} (or make more GPUs visible).",
                      Category.DUPLICATE_GPU, **details)
    bound = f"0..{per_node - 1}" if per_node is not None else "range"
    gpu_note = f", {gpus.count} GPU(s) visible" if gpus.count is not None else f" ({gpus.how})"
    return passed(LOCAL_RANK, f"local rank {local} within {bound}{gpu_note}", **details)


@judge(NODE_RANK)
def check_node_rank(facts: RanksFacts) -> CheckResult:
    layout, expected = facts.layout, facts.expected
    node, nodes = layout.node_rank, expected.nodes
    details = {"node_rank": node, "nodes": nodes, "source": layout.source("node_rank")}
    if node is None or nodes is None:
        return skipped(NODE_RANK, "node rank or node count unknown", **details)
    if node < nodes:
        return passed(NODE_RANK, f"node rank {node} within 0..{nodes - 1}", **details)
    return failed(NODE_RANK,
                  f"node rank {node} ({layout.source('node_rank')}) but only {nodes} node(s) "
                  f"(valid 0..{nodes - 1}){' — 1-based node numbering?' if node == nodes else ''}",
                  f"Number nodes from 0 to {nodes - 1} ({layout.source('node_rank')}), or set "
                  f"num_nodes={node + 1} if there really are that many nodes.", MISMATCH, **details)


@judge(RANK_FORMULA)
def check_rank_formula(facts: RanksFacts) -> CheckResult:
    layout, expected = facts.layout, facts.expected
    rank, node, local, per_node = (layout.rank, layout.node_rank, layout.local_rank,
                                   expected.gpus_per_node)
    details = {"rank": rank, "node_rank": node, "local_rank": local, "gpus_per_node": per_node,
               "guaranteed_by_launcher": layout.rank_formula_guaranteed}
    if None in (rank, node, local, per_node):
        return skipped(RANK_FORMULA, "RANK = NODE_RANK x GPUs + LOCAL_RANK not checked "
                       "(a value is unknown)", **details)
    want = node * per_node + local
    details["expected_rank"] = want
    if rank == want:
        return passed(RANK_FORMULA, f"rank {rank} == {node} x {per_node} + {local}", **details)
    summary = f"rank {rank} != node {node} x {per_node} + local {local} = {want}"
    if not layout.rank_formula_guaranteed:
        return passed(RANK_FORMULA, f"{summary}: allowed, {layout.title} does not number "
                      "ranks node by node (e.g. cyclic distribution)", **details)
    return failed(RANK_FORMULA, summary,
                  f"Set {layout.source('rank')}={want} on this process (node {node}, local rank "
                  f"{local}), or derive it as NODE_RANK x {per_node} + LOCAL_RANK.", MISMATCH,
                  **details)
