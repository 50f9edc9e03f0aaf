"""Which PyTorch Lightning is installed, and the facts about it that depend on its version.

Lightning ships under two names: ``lightning`` (``lightning.pytorch``, ``lightning.fabric``) and
``pytorch_lightning`` (with ``lightning_fabric``). Their classes have the same code but are
different objects, so everything here is read from the one package the user's Trainer uses.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from dataclasses import dataclass
from types import ModuleType

INSTALL_HINT = "pip install 'ncclcheck[lightning]'"

# (package whose Trainer it is, module holding its ClusterEnvironment classes, Callback module)
_FLAVOURS = (
    ("lightning", "lightning.pytorch.plugins.environments", "lightning.pytorch.callbacks"),
    ("pytorch_lightning", "pytorch_lightning.plugins.environments", "pytorch_lightning.callbacks"),
)


class LightningUnavailable(RuntimeError):
    """Neither ``lightning`` nor ``pytorch_lightning`` can be imported."""


@dataclass(frozen=True)
class InstalledLightning:
    package: str  # "lightning" or "pytorch_lightning"
    version: str
    environments: ModuleType

    @property
    def version_tuple(self) -> tuple[int, int, int]:
        return version_tuple(self.version)

    @property
    def label(self) -> str:
        return f"{self.package} {self.version}"

    @property
    def cluster_environment(self) -> type:
        return self.environments.ClusterEnvironment

    @property
    def has_validate_settings(self) -> bool:
        """``ClusterEnvironment.validate_settings`` exists (and is called) from 2.1.0 on."""
        return self.version_tuple >= (2, 1, 0) and hasattr(self.cluster_environment,
                                                           "validate_settings")

    def detection_order(self) -> list[type]:
        """Lightning's own environment classes in the order the Trainer tries them."""
        classes = []
        for name in detection_order(self.version_tuple):
            cls = getattr(self.environments, name, None)
            if cls is not None:
                classes.append(cls)
        return classes

    def callback_base(self) -> type:
        module = dict((p, c) for p, _, c in _FLAVOURS)[self.package]
        return importlib.import_module(module).Callback


def version_tuple(version: str) -> tuple[int, int, int]:
    numbers = [int(n) for n in re.findall(r"\d+", version.split("+")[0])[:3]]
    return tuple((numbers + [0, 0, 0])[:3])  # type: ignore[return-value]


def detection_order(version: tuple[int, int, int]) -> tuple[str, ...]:
    """The Trainer's cluster-environment detection order for a Lightning version.

    Read from ``_choose_and_init_cluster_environment`` at each release: 2.1.0 moved
    TorchElastic first (it can run inside Slurm); 2.0.7 dropped Kubeflow (its ``detect()``
    raises since); 1.9.x still tried Bagua; MPI arrived in 2.0.
    """
    if version < (2, 0, 0):
        return ("SLURMEnvironment", "BaguaEnvironment", "TorchElasticEnvironment",
                "KubeflowEnvironment", "LSFEnvironment", "LightningEnvironment")
    if version < (2, 0, 7):
        return ("SLURMEnvironment", "TorchElasticEnvironment", "KubeflowEnvironment",
                "LSFEnvironment", "MPIEnvironment", "LightningEnvironment")
    if version < (2, 1, 0):
        return ("SLURMEnvironment", "TorchElasticEnvironment", "LSFEnvironment",
                "MPIEnvironment", "LightningEnvironment")
    return ("TorchElasticEnvironment", "SLURMEnvironment", "LSFEnvironment", "MPIEnvironment",
            "LightningEnvironment")


def _available(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def load_lightning(prefer: str | None = None) -> InstalledLightning:
    """Import the installed Lightning (lazily: only the options that need it call this).

    ``prefer`` wins when installed (the package a user's class derives from), then a package
    the process already imported (the one the Trainer comes from), then ``lightning``, then
    ``pytorch_lightning``.
    """
    names = [p for p, _, _ in _FLAVOURS]
    imported = [p for p in names if p in sys.modules]
    order = ([prefer] if prefer else []) + imported + names
    for package in dict.fromkeys(order):
        if package not in names or not _available(package):
            continue
        try:
            top = importlib.import_module(package)
            environments = importlib.import_module(dict((p, e) for p, e, _ in _FLAVOURS)[package])
        except Exception as exc:  # a broken install is reported, not raised as a traceback
            raise LightningUnavailable(f"PyTorch Lightning ({package}) failed to import: "
                                       f"{type(exc).__name__}: {exc}") from exc
        return InstalledLightning(package, str(getattr(top, "__version__", "0")), environments)
    raise LightningUnavailable("PyTorch Lightning is not installed (neither lightning nor "
                               f"pytorch_lightning): {INSTALL_HINT}")


def package_of(cls: type) -> str | None:
    """Which Lightning package's ClusterEnvironment ``cls`` derives from, if any."""
    for base in cls.__mro__:
        if base.__name__ != "ClusterEnvironment":
            continue
        if base.__module__.startswith("lightning."):
            return "lightning"
        if base.__module__.startswith(("pytorch_lightning", "lightning_fabric")):
            return "pytorch_lightning"
    return None
