"""The ranks family: is this process's place in the job consistent with nodes x GPUs?

Everything here is arithmetic on the launcher's variables; the only outside question is how
many GPUs this process can see (asked of torch, never required).
"""

from __future__ import annotations

from dataclasses import dataclass

from ncclcheck.context import ProbeContext
from ncclcheck.explain.catalogue import signature
from ncclcheck.gpus import VisibleGpus, nvidia_driver_loaded, visible_gpus
from ncclcheck.launchers import Layout, read_layout
from ncclcheck.model import Category, CheckResult, failed, passed, skipped, warned
from ncclcheck.probes.lightning_checks import CHECKS as LIGHTNING_CHECKS
from ncclcheck.registry import CheckSpec

RANK = Category.RANK_MISMATCH
INVALID_RANK = "nccl.invalid_rank"  # the catalogue signature these failures lead to


@dataclass(frozen=True)
class Expected:
    """The job shape the ranks are checked against, and where each number came from."""

    nodes: int | None
    gpus_per_node: int | None
    nodes_from: str
    gpus_from: str

    @property
    def world(self) -> int | None:
        if self.nodes is None or self.gpus_per_node is None:
            return None
        return self.nodes * self.gpus_per_node

    def describe(self) -> str:
        if self.world is None:
            return "unknown"
        return f"{self.nodes} x {self.gpus_per_node} = {self.world}"


def expected_layout(ctx: ProbeContext, layout: Layout) -> Expected:
    """Flags win (they say what the user means to run); else the launcher's own variables."""
    nodes, nodes_from = ctx.nodes, "--nodes"
    if nodes is None and layout.num_nodes is not None:
        nodes, nodes_from = layout.num_nodes, layout.source("num_nodes")
    gpus, gpus_from = ctx.gpus_per_node, "--gpus-per-node"
    if gpus is None and layout.local_world_size is not None:
        gpus, gpus_from = layout.local_world_size, layout.source("local_world_size")
    return Expected(nodes, gpus, nodes_from if nodes is not None else "",
                    gpus_from if gpus is not None else "")


def fix_world(expected: Expected) -> str:
    """The fix for a world size that disagrees with nodes x GPUs: the catalogue's text for
    NCCL's 'Invalid rank requested', so the probe and `explain` say the same thing."""
    return signature(INVALID_RANK).render({"nodes": expected.nodes,
                                           "gpus_per_node": expected.gpus_per_node,
                                           "expected_world_size": expected.world})[1]


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


def check_launcher(layout: Layout, others: list[str]) -> CheckResult:
    summary = f"launcher: {layout.title} — {layout.reason}"
    if layout.single_process:
        summary = "no launcher: standalone single process (rank 0 of 1); layout checked as such"
    details = {"launcher": layout.launcher, "reason": layout.reason, "also_present": others,
               "variables": layout.variables, "notes": layout.notes}
    advice = layout.advice
    if advice is not None:
        verdict = failed if advice.fails else warned
        return verdict("ranks.launcher", f"{summary}; {advice.note}", advice.fix, RANK, **details)
    return passed("ranks.launcher", summary, **details)


def check_env_values(layout: Layout) -> CheckResult:
    if not layout.problems:
        if not layout.variables:
            return passed("ranks.env", "no launcher variables set", variables=[])
        return passed("ranks.env", f"{len(layout.variables)} launcher variables parse as integers "
                      "in range", variables=sorted(layout.variables))
    problems = [p.describe() for p in layout.problems]
    category = (Category.CONFIGURATION
                if all(p.name.startswith("MASTER_") for p in layout.problems) else RANK)
    fix = "; ".join(_env_fix(p.name) for p in layout.problems)
    return failed("ranks.env", "malformed launcher variable: " + "; ".join(problems), fix,
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
        return passed("ranks.layout", f"standalone: a single process on this machine{wanted}",
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
        return failed("ranks.layout", f"the launch does not match the intended layout: {said}",
                      f"Make the Trainer and the launcher agree: Trainer({trainer}) for this launch, "
                      "or launch with the nodes and processes per node you meant.", RANK,
                      **details, mismatches=[{"intended": a, "launcher": b} for a, b, _ in mismatches])
    if expected.world is None:
        return skipped("ranks.layout", "layout unknown: pass --nodes N --gpus-per-node M "
                       "(or --num-nodes / --devices) to check ranks against it", **details)
    origin = ", ".join(x for x in (expected.nodes_from, expected.gpus_from) if x)
    return passed("ranks.layout", f"expected layout {expected.describe()} ranks (from {origin})",
                  **details)


def check_rank(layout: Layout, expected: Expected) -> CheckResult:
    rank, world = layout.rank, layout.world_size
    details = {"rank": rank, "world_size": world, "expected_world_size": expected.world}
    if rank is None or world is None:
        missing = [q for q, v in (("rank", rank), ("world_size", world)) if v is None]
        return skipped("ranks.rank", "rank range not checked: "
                       + ", ".join(layout.source(q) for q in missing) + " unknown", **details)
    if rank < world:
        return passed("ranks.rank", f"rank {rank} is within 0..{world - 1}", **details)
    nccl = f"NCCL fails with 'Invalid rank requested : {rank}/{world}'"
    if expected.world is not None and expected.world != world:
        summary = (f"rank {rank} cannot exist in a world of {world} ({layout.source('world_size')}"
                   f"={world}), while {expected.describe()} ranks are launched: {nccl}")
        return failed("ranks.rank", summary, fix_world(expected), RANK, **details,
                      signature=INVALID_RANK)
    summary = (f"rank {rank} cannot exist in a world of {world} (valid ranks 0..{world - 1}): {nccl}")
    fix = (f"{layout.source('rank')} must be below {world}; the world size reaching the process "
           "group must be nodes x GPUs, not the per-node count. Pass --nodes/--gpus-per-node to "
           "see the values to set.")
    if expected.world is not None:
        fix = (f"{layout.source('rank')}={rank} is too large for {expected.describe()} ranks: "
               "each process needs RANK = NODE_RANK x GPUs per node + LOCAL_RANK.")
    return failed("ranks.rank", summary, fix, RANK, **details)


def check_world_size(layout: Layout, expected: Expected) -> CheckResult:
    world = layout.world_size
    details = {"world_size": world, "expected_world_size": expected.world,
               "source": layout.source("world_size")}
    if layout.single_process:
        return passed("ranks.world_size", "standalone: world size 1", **details)
    if world is None:
        return skipped("ranks.world_size", f"{layout.source('world_size')} not set: world size "
                       "unknown", **details)
    if expected.world is None:
        return skipped("ranks.world_size", f"world size {world}; pass --nodes and "
                       "--gpus-per-node to check it against nodes x GPUs", **details)
    if world == expected.world:
        return passed("ranks.world_size", f"world size {world} == {expected.describe()}", **details)
    hint = ""
    if world == expected.gpus_per_node:
        hint = " — it is the per-node count, a classic cause of 'Invalid rank requested'"
    elif world == expected.nodes:
        hint = " — it is the node count (one process per node?)"
    summary = (f"world size {world} ({layout.source('world_size')}) != {expected.describe()}{hint}")
    return failed("ranks.world_size", summary, fix_world(expected), RANK, **details,
                  signature=INVALID_RANK)


def check_local_rank(layout: Layout, expected: Expected, gpus: VisibleGpus) -> CheckResult:
    local, per_node = layout.local_rank, expected.gpus_per_node
    details = {"local_rank": local, "gpus_per_node": per_node, "visible_gpus": gpus.count,
               "visible_gpus_from": gpus.how, "local_world_size": layout.local_world_size}
    if local is None:
        return skipped("ranks.local_rank", "local rank unknown (launcher sets none)", **details)
    if per_node is not None and local >= per_node:
        return failed("ranks.local_rank",
                      f"local rank {local} is outside 0..{per_node - 1} for {per_node} GPUs per node",
                      f"{layout.source('local_rank')} must be below {per_node}: start "
                      f"{per_node} processes per node (torchrun --nproc-per-node {per_node}, srun "
                      f"--ntasks-per-node={per_node}, Trainer(devices={per_node})).", RANK, **details)
    if gpus.count is not None and local >= gpus.count:
        return failed("ranks.local_rank",
                      f"local rank {local} has no GPU: this process sees {gpus.count} "
                      f"GPU(s) ({gpus.how})",
                      "Start at most as many processes per node as visible GPUs, and do not narrow "
                      "CUDA_VISIBLE_DEVICES per process unless each process then uses device 0.",
                      RANK, **details)
    if (gpus.count is not None and layout.local_world_size is not None
            and layout.local_world_size > gpus.count):
        return failed("ranks.local_rank",
                      f"{layout.local_world_size} processes per node but only {gpus.count} visible "
                      "GPU(s): ranks would share GPUs",
                      f"Set the processes per node to {gpus.count} (or make more GPUs visible).",
                      Category.DUPLICATE_GPU, **details)
    bound = f"0..{per_node - 1}" if per_node is not None else "range"
    gpu_note = f", {gpus.count} GPU(s) visible" if gpus.count is not None else f" ({gpus.how})"
    return passed("ranks.local_rank", f"local rank {local} within {bound}{gpu_note}", **details)


def check_node_rank(layout: Layout, expected: Expected) -> CheckResult:
    node, nodes = layout.node_rank, expected.nodes
    details = {"node_rank": node, "nodes": nodes, "source": layout.source("node_rank")}
    if node is None or nodes is None:
        return skipped("ranks.node_rank", "node rank or node count unknown", **details)
    if node < nodes:
        return passed("ranks.node_rank", f"node rank {node} within 0..{nodes - 1}", **details)
    return failed("ranks.node_rank",
                  f"node rank {node} ({layout.source('node_rank')}) but only {nodes} node(s) "
                  f"(valid 0..{nodes - 1}){' — 1-based node numbering?' if node == nodes else ''}",
                  f"Number nodes from 0 to {nodes - 1} ({layout.source('node_rank')}), or set "
                  f"num_nodes={node + 1} if there really are that many nodes.", RANK, **details)


def check_rank_formula(layout: Layout, expected: Expected) -> CheckResult:
    rank, node, local, per_node = (layout.rank, layout.node_rank, layout.local_rank,
                                   expected.gpus_per_node)
    details = {"rank": rank, "node_rank": node, "local_rank": local, "gpus_per_node": per_node,
               "guaranteed_by_launcher": layout.rank_formula_guaranteed}
    if None in (rank, node, local, per_node):
        return skipped("ranks.rank_formula", "RANK = NODE_RANK x GPUs + LOCAL_RANK not checked "
                       "(a value is unknown)", **details)
    want = node * per_node + local
    details["expected_rank"] = want
    if rank == want:
        return passed("ranks.rank_formula", f"rank {rank} == {node} x {per_node} + {local}", **details)
    summary = f"rank {rank} != node {node} x {per_node} + local {local} = {want}"
    if not layout.rank_formula_guaranteed:
        return passed("ranks.rank_formula", f"{summary}: allowed, {layout.title} does not number "
                      "ranks node by node (e.g. cyclic distribution)", **details)
    return failed("ranks.rank_formula", summary,
                  f"Set {layout.source('rank')}={want} on this process (node {node}, local rank "
                  f"{local}), or derive it as NODE_RANK x {per_node} + LOCAL_RANK.", RANK, **details)


def check_agreement(layout: Layout) -> CheckResult:
    agreements = layout.agreements
    details = {"compared": [a.describe() for a in agreements]}
    if not agreements:
        return skipped("ranks.agreement", "no overlapping launcher variables to compare", **details)
    broken = [a for a in agreements if not a.ok]
    if not broken:
        return passed("ranks.agreement", "launcher variables agree: "
                      + "; ".join(a.describe() for a in agreements), **details)
    return failed("ranks.agreement", "launcher variables disagree: "
                  + "; ".join(a.describe() for a in broken),
                  " ".join(a.fix for a in broken), RANK, **details)


def check_master(layout: Layout, expected: Expected) -> CheckResult:
    addr, port = layout.master_addr, layout.master_port
    details = {"master_addr": addr, "master_port": port, "required": layout.master_required,
               "sources": {k: v for k, v in layout.sources.items() if k.startswith("master_")}}
    if any(p.name.startswith("MASTER_") for p in layout.problems):
        bad = [p.describe() for p in layout.problems if p.name.startswith("MASTER_")]
        return failed("ranks.master", "unusable rendezvous address: " + "; ".join(bad),
                      "Set MASTER_ADDR to the rank-0 host and MASTER_PORT to a free port in "
                      "1024..65535, identical on every node.", Category.CONFIGURATION, **details)
    missing = [n for n, v in (("MASTER_ADDR", addr), ("MASTER_PORT", port)) if v is None]
    derived = [n for n, v in (("MASTER_ADDR", addr), ("MASTER_PORT", port))
               if v is not None and layout.sources.get(n.lower(), n) != n]
    if not missing and not derived:
        return passed("ranks.master", f"rendezvous at {addr}:{port}", **details)
    if not missing:
        return warned("ranks.master", f"{' and '.join(derived)} not set: {addr}:{port} derived "
                      f"from {', '.join(layout.sources[n.lower()] for n in derived)}, as "
                      "ncclcheck's gather and Lightning do; torch's env:// rendezvous needs "
                      "them exported", f"Export MASTER_ADDR={addr} and MASTER_PORT={port} on "
                      "every task when the training uses torch's env:// rendezvous.",
                      Category.CONFIGURATION, **details)
    if layout.single_process or (layout.world_size == 1 and not layout.master_required):
        return passed("ranks.master", "single process: no rendezvous address needed", **details)
    summary = f"{' and '.join(missing)} not set"
    fix = ("Export MASTER_ADDR=<rank-0 host> and MASTER_PORT=<free port>, identical on every "
           "node, before starting the processes.")
    if layout.master_required:
        return failed("ranks.master", f"{summary}: torch's env:// rendezvous cannot start",
                      fix, Category.CONFIGURATION, **details)
    return warned("ranks.master", f"{summary}: {layout.title} does not set them; torch's env:// "
                  "rendezvous needs them (Lightning derives them for Slurm and LSF)", fix,
                  Category.CONFIGURATION, **details)


# -- declarations: every check this family reports (``ncclcheck checks``, docs/ranks.md) ------
def _declarations():
    config = Category.CONFIGURATION
    own = (
        CheckSpec("ranks.launcher", "the launcher that started this process", (RANK,),
                  fails_when="a Kubeflow pod with nprocPerNode > 1 runs the script without "
                             "torchrun (RANK is the pod index)",
                  warns_when="a Slurm batch script runs the training without srun",
                  doc="Says which launcher was detected and why, and lists other launchers "
                      "whose variables are also present; the first match in the detection "
                      "order wins (see the launcher table)."),
        CheckSpec("ranks.env", "launcher variables parse", (RANK, config),
                  fails_when="a rank variable is empty, not an integer, or out of range "
                             "(WORLD_SIZE >= 1, ranks >= 0); configuration when only MASTER_* "
                             "are malformed",
                  doc="One malformed variable becomes one finding naming it, instead of a "
                      "ValueError half-way through torch.distributed's setup."),
        CheckSpec("ranks.layout", "the launch matches the intended nodes x GPUs", (RANK,),
                  fails_when="--nodes / --gpus-per-node disagree with what the launcher started",
                  doc="Flags say what the user means to run (Lightning's num_nodes and devices); "
                      "without them the launcher's own node and per-node counts are used. "
                      "Skipped when the layout is unknown."),
        CheckSpec("ranks.rank", "RANK is below WORLD_SIZE", (RANK,),
                  fails_when="RANK >= WORLD_SIZE: NCCL's `Invalid rank requested : R/N`",
                  doc="The failure behind `NCCL WARN Invalid rank requested`; when the world "
                      "size is not nodes x GPUs the fix is the catalogue's for that signature."),
        CheckSpec("ranks.world_size", "WORLD_SIZE is nodes x GPUs", (RANK,),
                  fails_when="WORLD_SIZE != nodes x GPUs (says when it equals the per-node count "
                             "or the node count)",
                  doc="Skipped when the layout is unknown: pass --nodes and --gpus-per-node."),
        CheckSpec("ranks.local_rank", "LOCAL_RANK has a GPU of its own",
                  (RANK, Category.DUPLICATE_GPU),
                  fails_when="LOCAL_RANK >= GPUs per node, or >= the visible GPUs; more "
                             "processes per node than visible GPUs (duplicate_gpu)",
                  doc="The visible GPU count comes from torch when it imports and sees CUDA; it "
                      "is never required."),
        CheckSpec("ranks.node_rank", "NODE_RANK is below the node count", (RANK,),
                  fails_when="NODE_RANK >= nodes (notes 1-based numbering)"),
        CheckSpec("ranks.rank_formula", "RANK = NODE_RANK x GPUs + LOCAL_RANK", (RANK,),
                  fails_when="RANK != NODE_RANK x M + LOCAL_RANK where the launcher guarantees "
                             "that numbering (torchrun, Lightning)",
                  doc="Slurm and MPI may number ranks cyclically, so there a different rank is "
                      "informational and passes."),
        CheckSpec("ranks.agreement", "the launcher's variables agree with each other", (RANK,),
                  fails_when="the launcher's variables disagree with each other or with exported "
                             "torch variables (SLURM_NTASKS vs SLURM_NNODES x "
                             "SLURM_NTASKS_PER_NODE vs WORLD_SIZE, OMPI_COMM_WORLD_SIZE vs "
                             "WORLD_SIZE, ...)"),
        CheckSpec("ranks.master", "MASTER_ADDR / MASTER_PORT for torch's env:// rendezvous",
                  (config,),
                  fails_when="MASTER_ADDR / MASTER_PORT missing where the launcher must set them "
                             "(torchrun, Kubeflow, the plain environment), or MASTER_PORT outside "
                             "1..65535",
                  warns_when="they are missing under Slurm / MPI / LSF, which do not set them "
                             "(under srun ncclcheck derives them from SLURM_NODELIST and "
                             "SLURM_JOB_ID as Lightning does; details.sources says so)"),
    )
    return own


CHECKS = _declarations() + LIGHTNING_CHECKS
