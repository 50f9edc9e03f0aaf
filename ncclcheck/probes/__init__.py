"""The probe registry: one family per module, one signature, one list.

A family is ``probe(ctx: ProbeContext) -> list[CheckResult]``. Modules are imported only when
their family runs, so ``--help`` and light commands never pay for torch.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass
from typing import Callable

from ncclcheck.context import ProbeContext
from ncclcheck.model import Category, CheckResult, errored

ProbeFunc = Callable[[ProbeContext], list[CheckResult]]


@dataclass(frozen=True)
class Family:
    name: str
    target: str  # "module:function", imported lazily
    summary: str
    # Cluster mode: "rank" families run on every rank; "node" families only on each node's
    # leader (LOCAL_RANK 0), and their results are counted per node.
    scope: str = "rank"

    def load(self) -> ProbeFunc:
        module, _, func = self.target.partition(":")
        return getattr(importlib.import_module(module), func)


FAMILIES: tuple[Family, ...] = (
    Family("ranks", "ncclcheck.probes.ranks:probe",
           "rank layout against nodes x GPUs and the launcher's variables"),
    Family("net", "ncclcheck.probes.net:probe",
           "interfaces, NCCL/Gloo interface choice, master address and port, node-to-node mesh",
           scope="node"),
    Family("nccl", "ncclcheck.probes.nccl:probe",
           "the libnccl actually loaded, its plugins, NCCL_* settings, GPU/CUDA readiness",
           scope="node"),
    # bench last: the other families say why a sweep would fail before it is run
    Family("bench", "ncclcheck.probes.bench:probe",
           "all-reduce sweep over NCCL (Gloo on CPU): correctness, busbw, stragglers",
           scope="rank"),
)

FAMILY_NAMES: tuple[str, ...] = tuple(f.name for f in FAMILIES)


def family(name: str) -> Family:
    for fam in FAMILIES:
        if fam.name == name:
            return fam
    raise KeyError(name)


def run_family(fam: Family, ctx: ProbeContext) -> list[CheckResult]:
    """Run one family under the context's deadline; failures become one ``error`` result."""
    if ctx.remaining() <= 0:
        return [errored(f"{fam.name}.probe",
                        f"probe family '{fam.name}' did not run: the {ctx.timeout:g} s deadline "
                        "was spent by the families before it",
                        f"Raise --timeout above {ctx.timeout:g}.", Category.TIMEOUT,
                        family=fam.name, timeout_s=ctx.timeout)]
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["results"] = list(fam.load()(ctx))
        except BaseException as exc:  # a probe's crash is a finding, not a traceback
            outcome["error"] = exc

    worker = threading.Thread(target=target, name=f"probe-{fam.name}", daemon=True)
    worker.start()
    worker.join(ctx.remaining())
    if worker.is_alive():
        return [errored(f"{fam.name}.probe",
                        f"probe family '{fam.name}' did not finish within the {ctx.timeout:g} s deadline",
                        f"Raise --timeout above {ctx.timeout:g}, or skip it with --skip {fam.name}.",
                        Category.TIMEOUT, family=fam.name, timeout_s=ctx.timeout)]
    if "error" in outcome:
        exc = outcome["error"]
        return [errored(f"{fam.name}.probe",
                        f"probe family '{fam.name}' raised {type(exc).__name__}: {exc}",
                        family=fam.name, exception=type(exc).__name__, message=str(exc))]
    results = outcome.get("results", [])
    for result in results:
        result.host = result.host or ctx.host
    return results


def run_families(names: list[str], ctx: ProbeContext) -> list[CheckResult]:
    """Run the named families in registry order."""
    results: list[CheckResult] = []
    for fam in FAMILIES:
        if fam.name in names:
            results.extend(run_family(fam, ctx))
    return results
