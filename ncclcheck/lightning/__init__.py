"""PyTorch Lightning support: what the Trainer will do, custom ClusterEnvironments checked
before launch, and a preflight that stops a misconfigured job before training.

Nothing here imports Lightning (or torch) until it is used: ``PreflightCallback`` is built on
first access from the installed package's ``Callback`` class.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.lightning.callback import preflight_callback_class
from ncclcheck.lightning.environment_hook import preflight_environment, preflight_environment_class
from ncclcheck.lightning.installed import INSTALL_HINT, LightningUnavailable
from ncclcheck.lightning.preflight import PreflightError, preflight

__all__ = ["PreflightCallback", "PreflightError", "preflight", "preflight_environment",
           "LightningUnavailable", "INSTALL_HINT"]


def __getattr__(name: str) -> Any:
    if name == "PreflightCallback":  # built from the installed Lightning's Callback class
        return preflight_callback_class()
    if name == "PreflightEnvironment":  # so the wrapper pickles (ddp_spawn, checkpoints)
        return preflight_environment_class()
    raise AttributeError(f"module 'ncclcheck.lightning' has no attribute {name!r}")
