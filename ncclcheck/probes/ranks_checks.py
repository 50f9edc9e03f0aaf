"""The ranks family's checks: is this process's place in the job consistent with nodes x GPUs
and with the launcher's own variables?

Pure judgement of the launcher's layout (``ncclcheck.launchers``) against the expected shape
(``ranks_layout``); ``ranks.probe`` gathers both and runs every check in turn.
"""

from __future__ import annotations

from ncclcheck.context import ProbeContext
from ncclcheck.gpus import VisibleGpus
from ncclcheck.launchers import Layout
from ncclcheck.model import Category, CheckResult, failed, passed, skipped, warned
from ncclcheck.probes.ranks_layout import INVALID_RANK, Expected, fix_world
from ncclcheck.registry import CheckSpec

MISMATCH = Category.RANK_MISMATCH


def check_launcher(layout: Layout, others: list[str]) -> CheckResult:
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


def check_env_values(layout: Layout) -> CheckResult:
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


def check_layout_source(ctx: ProbeContext, layout: Layout, expected: Expected) -> CheckResult:
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


def check_rank(layout: Layout, expected: Expected) -> CheckResult:
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


def check_world_size(layout: Layout, expected: Expected) -> CheckResult:
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


def check_local_rank(layout: Layout, expected: Expected, gpus: VisibleGpus) -> CheckResult:
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


def check_node_rank(layout: Layout, expected: Expected) -> CheckResult:
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


def check_rank_formula(layout: Layout, expected: Expected) -> CheckResult:
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


def check_agreement(layout: Layout) -> CheckResult:
    agreements = layout.agreements
    details = {"compared": [a.describe() for a in agreements]}
    if not agreements:
        return skipped(AGREEMENT, "no overlapping launcher variables to compare", **details)
    broken = [a for a in agreements if not a.ok]
    if not broken:
        return passed(AGREEMENT, "launcher variables agree: "
                      + "; ".join(a.describe() for a in agreements), **details)
    return failed(AGREEMENT, "launcher variables disagree: "
                  + "; ".join(a.describe() for a in broken),
                  " ".join(a.fix for a in broken), MISMATCH, **details)


def check_master(layout: Layout, expected: Expected) -> CheckResult:
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


# -- declarations: every check above (``ncclcheck checks``, docs/ranks.md) -----------------
LAUNCHER = CheckSpec(
    "ranks.launcher", "the launcher that started this process", (MISMATCH,),
    fails_when="a Kubeflow pod with nprocPerNode > 1 runs the script without "
               "torchrun (RANK is the pod index)",
    warns_when="a Slurm batch script runs the training without srun",
    doc="Says which launcher was detected and why, and lists other launchers "
        "whose variables are also present; the first match in the detection "
        "order wins (see the launcher table).")
ENV = CheckSpec(
    "ranks.env", "launcher variables parse", (MISMATCH, Category.CONFIGURATION),
    fails_when="a rank variable is empty, not an integer, or out of range "
               "(WORLD_SIZE >= 1, ranks >= 0); configuration when only MASTER_* "
               "are malformed",
    doc="One malformed variable becomes one finding naming it, instead of a "
        "ValueError half-way through torch.distributed's setup.")
LAYOUT = CheckSpec(
    "ranks.layout", "the launch matches the intended nodes x GPUs", (MISMATCH,),
    fails_when="--nodes / --gpus-per-node disagree with what the launcher started",
    doc="Flags say what the user means to run (Lightning's num_nodes and devices); "
        "without them the launcher's own node and per-node counts are used. "
        "Skipped when the layout is unknown.")
RANK = CheckSpec(
    "ranks.rank", "RANK is below WORLD_SIZE", (MISMATCH,),
    fails_when="RANK >= WORLD_SIZE: NCCL's `Invalid rank requested : R/N`",
    doc="The failure behind `NCCL WARN Invalid rank requested`; when the world "
        "size is not nodes x GPUs the fix is the catalogue's for that signature.")
WORLD_SIZE = CheckSpec(
    "ranks.world_size", "WORLD_SIZE is nodes x GPUs", (MISMATCH,),
    fails_when="WORLD_SIZE != nodes x GPUs (says when it equals the per-node count "
               "or the node count)",
    doc="Skipped when the layout is unknown: pass --nodes and --gpus-per-node.")
LOCAL_RANK = CheckSpec(
    "ranks.local_rank", "LOCAL_RANK has a GPU of its own",
    (MISMATCH, Category.DUPLICATE_GPU),
    fails_when="LOCAL_RANK >= GPUs per node, or >= the visible GPUs; more "
               "processes per node than visible GPUs (duplicate_gpu)",
    doc="The visible GPU count comes from torch when it imports and sees CUDA; it "
        "is never required.")
NODE_RANK = CheckSpec(
    "ranks.node_rank", "NODE_RANK is below the node count", (MISMATCH,),
    fails_when="NODE_RANK >= nodes (notes 1-based numbering)")
RANK_FORMULA = CheckSpec(
    "ranks.rank_formula", "RANK = NODE_RANK x GPUs + LOCAL_RANK", (MISMATCH,),
    fails_when="RANK != NODE_RANK x M + LOCAL_RANK where the launcher guarantees "
               "that numbering (torchrun, Lightning)",
    doc="Slurm and MPI may number ranks cyclically, so there a different rank is "
        "informational and passes.")
AGREEMENT = CheckSpec(
    "ranks.agreement", "the launcher's variables agree with each other", (MISMATCH,),
    fails_when="the launcher's variables disagree with each other or with exported "
               "torch variables (SLURM_NTASKS vs SLURM_NNODES x "
               "SLURM_NTASKS_PER_NODE vs WORLD_SIZE, OMPI_COMM_WORLD_SIZE vs "
               "WORLD_SIZE, ...)")
MASTER = CheckSpec(
    "ranks.master", "MASTER_ADDR / MASTER_PORT for torch's env:// rendezvous",
    (Category.CONFIGURATION,),
    fails_when="MASTER_ADDR / MASTER_PORT missing where the launcher must set them "
               "(torchrun, Kubeflow, the plain environment), or MASTER_PORT outside "
               "1..65535",
    warns_when="they are missing under Slurm / MPI / LSF, which do not set them "
               "(under srun ncclcheck derives them from SLURM_NODELIST and "
               "SLURM_JOB_ID as Lightning does; details.sources says so)")


CHECKS: tuple[CheckSpec, ...] = (LAUNCHER, ENV, LAYOUT, RANK, WORLD_SIZE, LOCAL_RANK, NODE_RANK,
                                  RANK_FORMULA, AGREEMENT, MASTER)
