"""The checks ``--lightning`` and ``--cluster-env`` add to the ranks family, and the one the
Lightning preflight adds, declared here, in the family's home, rather than in
``ncclcheck.lightning``: the registry (``ncclcheck checks``, docs/ranks.md) lists them without
importing Lightning-facing code. They have no judge here: running Lightning's own classes is
the Lightning part's work, which the caller hands in (``RanksOptions.lightning_part``).

The code that reports them: ``ncclcheck.lightning.trainer_view`` (ranks.lightning.environment,
.values, .settings), ``ncclcheck.lightning.custom`` (ranks.cluster_env.*) and
``ncclcheck.lightning.preflight`` (ranks.lightning.live).
"""

from __future__ import annotations

from ncclcheck.model import Category
from ncclcheck.probes.spec import CheckSpec

RANK = Category.RANK_MISMATCH

# The launchers a custom ClusterEnvironment is run under, as ncclcheck.lightning.launch_styles
# names them: (name, title).
GRID_LAUNCHERS: tuple[tuple[str, str], ...] = (
    ("torchrun", "torchrun"), ("lightning_launcher", "Lightning's own launcher"), ("slurm", "srun"))

# -- --lightning: what the installed Lightning selects and computes (lightning.trainer_view) --
ENVIRONMENT = CheckSpec(
    "ranks.lightning.environment", "the ClusterEnvironment Lightning selects",
    (Category.CONFIGURATION, RANK),
    fails_when="no ClusterEnvironment is detected (configuration), or the one "
               "selected raises in its constructor (e.g. SLURMEnvironment without "
               "--ntasks-per-node)",
    doc="Only with --lightning: the installed Lightning's own detection order, "
        "run against this process's environment.",
    order=110)
VALUES = CheckSpec(
    "ranks.lightning.values", "the ranks Lightning computes",
    (RANK, Category.CONFIGURATION),
    fails_when="the ClusterEnvironment cannot compute its values, its global rank "
               "is outside its world size, or LightningEnvironment on several "
               "nodes has no MASTER_ADDR / MASTER_PORT (configuration)",
    warns_when="Lightning falls back to a default MASTER_ADDR or MASTER_PORT",
    doc="What torch.distributed would get after the strategy's set_world_ranks.",
    order=120)
SETTINGS = CheckSpec(
    "ranks.lightning.settings", "Trainer(num_nodes=, devices=) fits the launch",
    (RANK,),
    fails_when="devices x num_nodes differs from the ClusterEnvironment's world "
               "size (whether or not Lightning's validate_settings notices), or "
               "devices differs from the launcher's processes per node",
    doc="Skipped without --devices: pass the Trainer's devices and num_nodes.",
    order=130)


# -- --cluster-env: a custom ClusterEnvironment run over the grid (lightning.custom) ----------
def _style_check(name: str, title: str, order: int) -> CheckSpec:
    return CheckSpec(
        f"ranks.cluster_env.{name}", f"the custom ClusterEnvironment under {title}", (RANK,),
        fails_when=f"run on every slot of the nodes x GPUs grid as {title} would "
                   "start it, the class gives duplicate or out-of-range global ranks, "
                   "a wrong world_size(), inconsistent local / node ranks, or "
                   "creates_processes_externally that contradicts the launcher",
        doc="Only with --cluster-env and --nodes / --gpus-per-node. Skipped when the "
            "class would not let Lightning start the processes itself."
            + (" Run only inside a Slurm job." if name == "slurm" else ""),
        order=order)


INTERFACE = CheckSpec(
    "ranks.cluster_env.interface", "the custom class is a ClusterEnvironment",
    (Category.CONFIGURATION, RANK),
    fails_when="the class does not derive from the installed Lightning's "
               "ClusterEnvironment (configuration), or lacks or mis-declares a "
               "member Lightning calls",
    doc="Only with --cluster-env MODULE:CLASS.",
    order=140)
GRID = CheckSpec(
    "ranks.cluster_env.grid", "the custom class was run over the grid",
    doc="Skipped, and says so, when --nodes / --gpus-per-node are missing, so the "
        "per-launcher checks could not run.",
    order=150)
# one check per launch style the class is run under, by the style's name
STYLE_CHECKS: dict[str, CheckSpec] = {name: _style_check(name, title, 160 + 10 * n)
                                      for n, (name, title) in enumerate(GRID_LAUNCHERS)}
CONSTRUCTOR = CheckSpec(
    "ranks.cluster_env.constructor", "layout arguments of the constructor are used",
    (Category.CONFIGURATION,),
    warns_when="the constructor takes num_nodes / devices / world_size but the rank "
               "methods answer the same whatever it is given",
    order=190)

# -- the Lightning preflight inside a running Trainer (lightning.preflight) -------------------
LIVE = CheckSpec(
    "ranks.lightning.live", "this rank's ClusterEnvironment fits the Trainer",
    (RANK,),
    fails_when="inside a running Trainer, a rank method raises, world_size() is "
               "not num_nodes x devices, or a rank is outside its range",
    doc="Reported by the Lightning preflight (callback or preflight()) only.",
    order=200)
