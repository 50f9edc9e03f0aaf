"""The Lightning part of the ranks family: only runs for ``--lightning`` / ``--cluster-env``."""

from __future__ import annotations

import threading

from ncclcheck.context import ProbeContext, RanksOptions
from ncclcheck.lightning.custom import cluster_env_results, load_cluster_env, parse_spec
from ncclcheck.lightning.installed import load_lightning, package_of
from ncclcheck.lightning.trainer_view import lightning_results as trainer_results
from ncclcheck.model import CheckResult


def lightning_results(ctx: ProbeContext) -> list[CheckResult]:
    """``ranks.lightning.*`` for --lightning, ``ranks.cluster_env.*`` for --cluster-env."""
    results: list[CheckResult] = []
    options = ctx.options.ranks
    if options.lightning:
        results.extend(trainer_results(ctx, load_lightning()))
    if options.cluster_env:
        cls = load_cluster_env(options.cluster_env)
        # Checked against the package the class derives from, when both are installed.
        results.extend(cluster_env_results(ctx, load_lightning(prefer=package_of(cls)), cls))
    return results


def ranks_options(lightning: bool, cluster_env: str | None) -> RanksOptions:
    """The ranks family's options for --lightning / --cluster-env, with the part that reports
    their checks."""
    return RanksOptions(lightning=lightning, cluster_env=cluster_env,
                        lightning_part=lightning_results)


def validate_options(lightning: bool, cluster_env: str | None, within: float | None = None) -> None:
    """Fail fast, before any probe runs: Lightning importable, MODULE:CLASS importable.

    Raises ``LightningUnavailable`` or ``ClusterEnvSpecError`` with a one-line message. The
    imports (Lightning takes seconds) run for at most ``within`` seconds: past that the check
    is left to the probe, which runs under the same deadline and says it did not finish.
    """
    if not lightning and not cluster_env:
        return
    if cluster_env:
        parse_spec(cluster_env)
    outcome: dict[str, BaseException] = {}

    def load() -> None:
        try:
            load_lightning()
            if cluster_env:
                load_cluster_env(cluster_env)
        except (RuntimeError, ValueError) as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=load, name="ncclcheck-lightning-import", daemon=True)
    worker.start()
    worker.join(within)
    if "error" in outcome:
        raise outcome["error"]
