"""``preflight_environment()``: the preflight at the earliest point Lightning 2.1+ offers.

``_SubprocessScriptLauncher.launch()`` (strategy "ddp", FSDP, DeepSpeed) calls
``cluster_environment.validate_settings(num_devices, num_nodes)`` in every process before it
starts children and before ``init_process_group``. Wrapping the job's ClusterEnvironment in one
whose ``validate_settings`` runs the preflight therefore stops a misconfigured job before any
process group exists, which a Callback cannot do (``Callback.setup`` runs after it).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable

from ncclcheck.lightning.installed import InstalledLightning, load_lightning
from ncclcheck.lightning.preflight import preflight


def detect_environment(lightning: InstalledLightning) -> Any:
    """The environment the Trainer would pick here, constructed as the Trainer constructs it."""
    for cls in lightning.detection_order():
        try:
            if cls.detect():
                return cls()
        except Exception:  # detect() of an unavailable launcher (e.g. Kubeflow in 2.0.7+)
            continue
    return lightning.environments.LightningEnvironment()


@lru_cache(maxsize=None)
def _wrapper_class(package: str) -> type:
    lightning = load_lightning(prefer=package)
    base = lightning.cluster_environment

    def __init__(self, inner: Any, options: dict[str, Any]) -> None:
        base.__init__(self)
        self.inner = inner
        self.options = options
        self.report = None

    def validate_settings(self, num_devices: int, num_nodes: int) -> None:
        own = getattr(self.inner, "validate_settings", None)
        if own is not None:
            own(num_devices=num_devices, num_nodes=num_nodes)  # Lightning's message first
        self.report = preflight(num_nodes, num_devices, cluster_environment=self.inner,
                                **self.options)

    def delegate(name: str):
        return lambda self, *args: getattr(self.inner, name)(*args)

    body: dict[str, Any] = {
        "__init__": __init__,
        "__module__": "ncclcheck.lightning",
        "__doc__": "Delegates to the job's ClusterEnvironment; validate_settings also runs "
                   "ncclcheck's preflight (before init_process_group).",
        "creates_processes_externally": property(lambda self: self.inner.creates_processes_externally),
        "main_address": property(lambda self: self.inner.main_address),
        "main_port": property(lambda self: self.inner.main_port),
        "detect": staticmethod(lambda: True),
        "validate_settings": validate_settings,
    }
    for name in ("world_size", "set_world_size", "global_rank", "set_global_rank", "local_rank",
                 "node_rank", "teardown"):
        body[name] = delegate(name)
    return type("PreflightEnvironment", (base,), body)


def preflight_environment(cluster_environment: Any = None, *, families: Iterable[str] | None = None,
                          bench: bool = False, timeout: float = 60.0, strict: bool = False) -> Any:
    """A ClusterEnvironment plugin that runs the preflight before the process group exists.

    ``Trainer(plugins=[preflight_environment()])`` wraps what Lightning would detect;
    ``preflight_environment(MyEnvironment())`` wraps your own. Needs Lightning 2.1+ and a
    strategy that uses Lightning's subprocess launcher ("ddp", FSDP, DeepSpeed).
    """
    lightning = load_lightning()
    if not lightning.has_validate_settings:
        raise RuntimeError(f"{lightning.label} never calls validate_settings (2.1.0+ does): "
                           "call ncclcheck.lightning.preflight() at the top of the script instead")
    inner = cluster_environment if cluster_environment is not None else detect_environment(lightning)
    options = {"families": list(families) if families is not None else None, "bench": bench,
               "timeout": timeout, "strict": strict}
    return _wrapper_class(lightning.package)(inner, options)


def preflight_environment_class() -> type:
    """The wrapper class for the installed (or already imported) Lightning package."""
    return _wrapper_class(load_lightning().package)
