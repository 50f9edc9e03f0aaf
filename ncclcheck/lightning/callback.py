"""``PreflightCallback``: the preflight inside a Trainer, on every rank.

When it runs, truthfully: Lightning calls ``Callback.setup`` from ``Trainer._run`` *after*
``strategy.setup_environment()``, which is where DDP calls ``init_process_group`` (1.9.x and
2.x alike). So the callback stops a job whose process group came up but is wrong (ranks that
formed a smaller world than the Trainer expects, NCCL/network settings that will fail the first
collective) before the first training step. What breaks ``init_process_group`` itself needs
``preflight()`` at the top of the script; see docs/lightning.md.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable

from ncclcheck.lightning.installed import load_lightning
from ncclcheck.lightning.preflight import preflight


def _process_group_ready() -> bool:
    try:
        import torch.distributed as dist  # deferred: seconds to import; the Trainer has it loaded
        return bool(dist.is_available() and dist.is_initialized())
    except ImportError:
        return False


class _PreflightMixin:
    """The callback's behaviour, independent of which Lightning package supplies ``Callback``."""

    def __init__(self, families: Iterable[str] | None = None, bench: bool = False,
                 timeout: float = 60.0, strict: bool = False) -> None:
        super().__init__()
        self.families = list(families) if families is not None else None
        self.bench = bench
        self.timeout = timeout
        self.strict = strict
        self.report = None
        self.process_group_was_ready: bool | None = None

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if self.report is not None:  # fit then test: the job was checked once
            return
        self.process_group_was_ready = _process_group_ready()
        strategy = trainer.strategy
        self.report = preflight(trainer.num_nodes, trainer.num_devices,
                                cluster_environment=getattr(strategy, "cluster_environment", None),
                                families=self.families, bench=self.bench, timeout=self.timeout,
                                strict=self.strict)


@lru_cache(maxsize=None)
def _build(package: str) -> type:
    base = load_lightning(prefer=package).callback_base()
    return type("PreflightCallback", (_PreflightMixin, base), {
        "__module__": "ncclcheck.lightning",
        "__doc__": "Run ncclcheck's fast probes on every rank in setup(); raise PreflightError "
                   "on failure, before the first training step.",
    })


def preflight_callback_class() -> type:
    """The callback class for the installed (or already imported) Lightning package."""
    return _build(load_lightning().package)
