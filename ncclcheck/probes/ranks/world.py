"""RANK below WORLD_SIZE, and WORLD_SIZE = nodes x GPUs: the two faces of NCCL's
'Invalid rank requested : R/N'."""

from __future__ import annotations

from ncclcheck.model import Category, CheckResult, failed, passed, skipped
from ncclcheck.probes.ranks.facts import INVALID_RANK, RanksFacts, fix_world
from ncclcheck.probes.spec import CheckSpec, judge

MISMATCH = Category.RANK_MISMATCH


RANK = CheckSpec(
    "ranks.rank", "RANK is below WORLD_SIZE", (MISMATCH,),
    fails_when="RANK >= WORLD_SIZE: NCCL's `Invalid rank requested : R/N`",
    doc="The failure behind `NCCL WARN Invalid rank requested`; when the world "
        "size is not nodes x GPUs the fix is the catalogue's for that signature.",
    order=40)


WORLD_SIZE = CheckSpec(
    "ranks.world_size", "WORLD_SIZE is nodes x GPUs", (MISMATCH,),
    fails_when="WORLD_SIZE != nodes x GPUs (says when it equals the per-node count "
               "or the node count)",
    doc="Skipped when the layout is unknown: pass --nodes and --gpus-per-node.",
    order=50)


@judge(RANK)
def check_rank(facts: RanksFacts) -> CheckResult:
    layout, expected = facts.layout, facts.expected
    rank, world = layout.rank, layout.world_size
    details = {"rank": rank, "world_size": world, "expected_world_size": expected.world}
    if rank is None or world is None:
        missing = [q for q, v in (("rank", rank), ("world_size", world)) if v is None]
        return skipped(RANK, "rank range not checked: "
                       + ", ".join(layout.source(q) for q in missing) + " unknown", **details)
    if rank < world:
        return passed(RANK, f"rank {rank} is within 0..{world - 1}", **details)
    nccl = f"NCCL fails with 'Invalid rank requested : {rank}/{world}'"
    if expected.world is not None and expected.world != world:
        summary = (f"rank {rank} cannot exist in a world of {world} ({layout.source('world_size')}"
                   f"={world}), while {expected.describe()} ranks are launched: {nccl}")
        return failed(RANK, summary, fix_world(expected), MISMATCH, **details,
                      signature=INVALID_RANK)
    summary = (f"rank {rank} cannot exist in a world of {world} (valid ranks 0..{world - 1}): {nccl}")
    fix = (f"{layout.source('rank')} must be below {world}; the world size reaching the process "
           "group must be nodes x GPUs, not the per-node count. Pass --nodes/--gpus-per-node to "
           "see the values to set.")
    if expected.world is not None:
        fix = (f"{layout.source('rank')}={rank} is too large for {expected.describe()} ranks: "
               "each process needs RANK = NODE_RANK x GPUs per node + LOCAL_RANK.")
    return failed(RANK, summary, fix, MISMATCH, **details)


@judge(WORLD_SIZE)
def check_world_size(facts: RanksFacts) -> CheckResult:
    layout, expected = facts.layout, facts.expected
    world = layout.world_size
    details = {"world_size": world, "expected_world_size": expected.world,
               "source": layout.source("world_size")}
    if layout.single_process:
        return passed(WORLD_SIZE, "standalone: world size 1", **details)
    if world is None:
        return skipped(WORLD_SIZE, f"{layout.source('world_size')} not set: world size "
                       "unknown", **details)
    if expected.world is None:
        return skipped(WORLD_SIZE, f"world size {world}; pass --nodes and "
                       "--gpus-per-node to check it against nodes x GPUs", **details)
    if world == expected.world:
        return passed(WORLD_SIZE, f"world size {world} == {expected.describe()}", **details)
    hint = ""
    if world == expected.gpus_per_node:
        hint = " — it is the per-node count, a classic cause of 'Invalid rank requested'"
    elif world == expected.nodes:
        hint = " — it is the node count (one process per node?)"
    summary = (f"world size {world} ({layout.source('world_size')}) != {expected.describe()}{hint}")
    return failed(WORLD_SIZE, summary, fix_world(expected), MISMATCH, **details,
                  signature=INVALID_RANK)
