"""The probe families: one package per family, one signature, one list of families.

A family is a package ``ncclcheck/probes/<family>/``: its ``probe(ctx: ProbeContext) ->
FamilyOutput | list[CheckResult]`` gathers the facts and runs the judges of its checks (see
``ncclcheck.probes.registry``); ``FamilyOutput.of`` accepts both return shapes. Packages are
imported only when their family runs, so ``--help`` and light commands never pay for torch.
The job-wide checks (``cluster.*``) have a home too, judged by rank 0's gather, not run here.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass
from typing import Callable, Iterable, Union

from ncclcheck.context import ProbeContext
from ncclcheck.model import Category, CheckResult, FamilyOutput, errored

ProbeFunc = Callable[[ProbeContext], Union[FamilyOutput, list[CheckResult]]]


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
# The checks only rank 0's gather can judge (who reported, what differs between ranks).
JOB_FAMILY = "cluster"
# Every family with a home package of checks, in listing order.
CHECK_FAMILIES: tuple[str, ...] = (*FAMILY_NAMES, JOB_FAMILY)


def family(name: str) -> Family:
    for fam in FAMILIES:
        if fam.name == name:
            return fam
    raise KeyError(name)


def _timed_out(fam: Family, ctx: ProbeContext, summary: str, fix: str) -> FamilyOutput:
    return FamilyOutput([errored(f"{fam.name}.probe", summary, fix, Category.TIMEOUT,
                                 family=fam.name, timeout_s=ctx.timeout)])


def run_family_output(fam: Family, ctx: ProbeContext) -> FamilyOutput:
    """Run one family under the context's deadline; failures become one ``error`` result."""
    if ctx.remaining() <= 0:
        return _timed_out(fam, ctx, f"probe family '{fam.name}' did not run: the "
                          f"{ctx.timeout:g} s deadline was spent by the families before it",
                          f"Raise --timeout above {ctx.timeout:g}.")
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["output"] = FamilyOutput.of(fam.load()(ctx))
        except BaseException as exc:  # a probe's crash is a finding, not a traceback
            outcome["error"] = exc

    worker = threading.Thread(target=target, name=f"probe-{fam.name}", daemon=True)
    worker.start()
    worker.join(ctx.remaining())
    if worker.is_alive():
        return _timed_out(fam, ctx, f"probe family '{fam.name}' did not finish within the "
                          f"{ctx.timeout:g} s deadline", f"Raise --timeout above "
                          f"{ctx.timeout:g}, or skip it with --skip {fam.name}.")
    if "error" in outcome:
        exc = outcome["error"]
        return FamilyOutput([errored(f"{fam.name}.probe",
                                     f"probe family '{fam.name}' raised {type(exc).__name__}: {exc}",
                                     family=fam.name, exception=type(exc).__name__,
                                     message=str(exc))])
    output = outcome.get("output") or FamilyOutput()
    for result in output.checks:
        result.host = result.host or ctx.host
    return output


def run_family(fam: Family, ctx: ProbeContext) -> list[CheckResult]:
    """One family's checks (its sections, if any, are dropped: see ``probe_families``)."""
    return run_family_output(fam, ctx).checks


def probe_families(names: Iterable[str], ctx: ProbeContext) -> FamilyOutput:
    """Run the named families in registry order: every check, and the sections they measured."""
    wanted = set(names)
    output = FamilyOutput()
    for fam in FAMILIES:
        if fam.name in wanted:
            output.extend(run_family_output(fam, ctx))
    return output


def run_families(names: Iterable[str], ctx: ProbeContext) -> list[CheckResult]:
    """The checks of the named families, in registry order."""
    return probe_families(names, ctx).checks
