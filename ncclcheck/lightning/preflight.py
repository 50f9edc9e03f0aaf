"""The preflight a training script runs on every rank: the fast probe families plus Lightning's
own numbers for this process, and one clear exception when anything fails.

``preflight()`` is the plain function (Fabric, or any script, before ``fabric.launch()`` /
``Trainer(...)``); ``PreflightCallback`` calls it from the Trainer.
"""

from __future__ import annotations

import copy
import os
import socket
from typing import Any, Iterable, Mapping

from ncclcheck.context import ProbeOptions
from ncclcheck.lightning.probe import ranks_options
from ncclcheck.model import Category, CheckResult, Report, Status, failed, passed
from ncclcheck.probes import FAMILY_NAMES
from ncclcheck.probes.ranks.lightning import LIVE
from ncclcheck.runner import Output, Request, check

FAST_FAMILIES = ("ranks", "net", "nccl")
RANK = Category.RANK_MISMATCH


class PreflightError(RuntimeError):
    """Raised on a rank whose preflight found a failure; the message lists each one and its fix."""

    def __init__(self, report: Report, where: str, note: str | None = None) -> None:
        self.report = report
        bad = [c for c in report.checks if c.status in (Status.FAIL, Status.ERROR)]
        lines = [f"ncclcheck preflight failed {where}: {len(bad)} check(s) failed"]
        if note:  # a rank that left the job's report to rank 0
            lines.append(f"  {note}")
        for result in bad:
            lines.append(f"  - {result.id}: {result.summary}")
            if result.fix:
                lines.append(f"    fix: {result.fix}")
        super().__init__("\n".join(lines))


def families_to_run(families: Iterable[str] | None, bench: bool) -> list[str]:
    """The requested families that exist in this ncclcheck (others are silently absent)."""
    wanted = list(families) if families is not None else list(FAST_FAMILIES)
    if bench and "bench" not in wanted:
        wanted.append("bench")
    return [name for name in FAMILY_NAMES if name in wanted]


def _as_the_strategy_leaves_it(cluster_environment: Any, num_nodes: int, devices: int) -> Any:
    """A copy after DDPStrategy.set_world_ranks: before the strategy's setup (validate_settings)
    LightningEnvironment still says world size 1; the copy answers as it will at init."""
    try:
        env = copy.copy(cluster_environment)
        local, node = env.local_rank(), env.node_rank()
        env.set_global_rank(node * devices + local)
        env.set_world_size(num_nodes * devices)
        return env
    except Exception:  # the checks below report what raises
        return cluster_environment


def check_live_environment(cluster_environment: Any, num_nodes: int, devices: int) -> CheckResult:
    """This process's ClusterEnvironment against Trainer(num_nodes, devices): the numbers that
    go to init_process_group, and what the sampler assumes."""
    name = type(cluster_environment).__name__
    values: dict[str, Any] = {}
    errors: dict[str, str] = {}
    cluster_environment = _as_the_strategy_leaves_it(cluster_environment, num_nodes, devices)
    for member in ("global_rank", "world_size", "local_rank", "node_rank"):
        try:
            values[member] = getattr(cluster_environment, member)()
        except Exception as exc:
            errors[member] = f"{type(exc).__name__}: {exc}"
    details = {"environment": name, "num_nodes": num_nodes, "devices": devices, **values,
               "errors": errors}
    world = num_nodes * devices
    problems, fixes = [], []
    if errors:
        problems.append("; ".join(f"{k}() raised {v}" for k, v in errors.items()))
        fixes.append(f"Make {', '.join(errors)}() of {name} return an int in this process.")
    size, rank = values.get("world_size"), values.get("global_rank")
    if "world_size" in values and size != world:
        problems.append(f"world_size() = {size!r} but num_nodes x devices = {num_nodes} x "
                        f"{devices} = {world}")
        fixes.append(f"{name}.world_size() must return {world} (num_nodes x devices); if the "
                     f"launch really has {size!r} processes, set Trainer(num_nodes, devices) so "
                     "their product is that.")
    if "global_rank" in values and (not isinstance(rank, int) or not 0 <= rank < world):
        problems.append(f"global_rank() = {rank!r} is outside 0..{world - 1}")
        fixes.append(f"{name}.global_rank() must return node_rank() x {devices} + local_rank().")
    for member, bound, arg in (("local_rank", devices, "devices"), ("node_rank", num_nodes, "num_nodes")):
        value = values.get(member)
        if member in values and (not isinstance(value, int) or not 0 <= value < bound):
            problems.append(f"{member}() = {value!r} is outside 0..{bound - 1} ({arg}={bound})")
            fixes.append(f"{name}.{member}() must return 0..{bound - 1}.")
    if problems:
        return failed(LIVE, f"{name} on this rank: " + "; ".join(problems),
                      " ".join(fixes), RANK, **details)
    return passed(LIVE, f"{name}: rank {rank} of {size}, local {values['local_rank']}, "
                  f"node {values['node_rank']} fit {num_nodes} x {devices}", **details)


def preflight(num_nodes: int | None = None, devices: int | None = None, *,
              cluster_environment: Any = None, families: Iterable[str] | None = None,
              bench: bool = False, timeout: float = 60.0, env: Mapping[str, str] | None = None,
              strict: bool = False, raise_on_failure: bool = True,
              whole_job: bool = False) -> Report | None:
    """Run the fast probes for this rank and raise ``PreflightError`` if any fails.

    Call it on every rank before the process group exists (top of the script, before
    ``Trainer(...)`` or ``fabric.launch()``), with the ``num_nodes`` / ``devices`` you give
    Lightning. With ``devices`` set, the ranks family also asks Lightning which
    ClusterEnvironment it will pick and whether ``validate_settings`` will raise; with
    ``cluster_environment`` (your plugin instance, or ``trainer.strategy.cluster_environment``)
    its rank numbers in this process are checked too.

    By default each rank checks itself. With ``whole_job=True`` the ranks meet as
    ``ncclcheck run`` does under a launcher: rank 0 gets the job's report, the other ranks
    ``None`` (or a ``PreflightError`` without checks, naming rank 0's verdict).
    """
    environ = dict(os.environ if env is None else env)
    live = []
    if cluster_environment is not None and devices is not None:
        live.append(check_live_environment(cluster_environment, num_nodes or 1, devices))
    request = Request(tuple(families_to_run(families, bench)),
                      ProbeOptions(ranks=ranks_options(devices is not None, None)),
                      num_nodes, devices, timeout)
    outcome = check(request, env=environ, output=Output(strict=strict), local=not whole_job,
                    extra_checks=live)
    if outcome.code != 0 and raise_on_failure:
        rank = environ.get("RANK") or environ.get("SLURM_PROCID") or environ.get("LOCAL_RANK") or "0"
        host = outcome.report.context.get("host") if outcome.report else socket.gethostname()
        raise PreflightError(outcome.report or Report([]), f"on {host} (rank {rank})",
                             outcome.note)
    return outcome.report
