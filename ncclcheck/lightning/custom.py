"""A user's ClusterEnvironment, validated before any GPU is touched.

First against the installed Lightning's abstract interface (can Lightning instantiate it, does
it define the names Lightning calls), then for every (node, local) slot of the N x M grid under
each launcher that applies: set the environment that launcher would set, call the class the way
the DDP strategy does, and check that the grid adds up to one job of N x M ranks.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from pathlib import Path
from typing import Any, Mapping

from ncclcheck.context import ProbeContext
from ncclcheck.lightning.environ import swapped_environ, without_launcher
from ncclcheck.lightning.installed import InstalledLightning
from ncclcheck.lightning.custom_findings import SlotAnswer, judge
from ncclcheck.lightning.interface import InterfaceProblem, check_class, interface_of
from ncclcheck.lightning.launch_styles import (TORCHRUN, LaunchStyle, Slot, grid,
                                               lightning_parent_env, styles_for)
from ncclcheck.model import Category, CheckResult, failed, passed, skipped, warned
from ncclcheck.probes.ranks.lightning import CONSTRUCTOR, GRID, INTERFACE, STYLE_CHECKS

RANK = Category.RANK_MISMATCH
MAX_SLOTS_SHOWN = 64  # every slot is checked; the report shows the first ones


class ClusterEnvSpecError(ValueError):
    """``--cluster-env`` does not name an importable class."""


def parse_spec(spec: str) -> tuple[str, str]:
    module_name, sep, class_name = spec.rpartition(":")
    if not sep or not module_name or not class_name.isidentifier():
        raise ClusterEnvSpecError(f"--cluster-env {spec!r}: expected MODULE:CLASS, e.g. "
                                  "my_project.envs:MyClusterEnvironment")
    return module_name, class_name


def load_cluster_env(spec: str) -> type:
    """Import ``MODULE:CLASS`` (MODULE may be a dotted name or a path to a .py file).

    The current directory is importable, as with ``python -m``, since that is where a user's
    training code lives.
    """
    module_name, class_name = parse_spec(spec)
    try:
        if module_name.endswith(".py") or os.sep in module_name:
            module = _load_file(Path(module_name))
        else:
            if "" not in sys.path and os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except ClusterEnvSpecError:
        raise
    except BaseException as exc:  # the user's module may raise anything, SystemExit included
        raise ClusterEnvSpecError(f"--cluster-env {spec!r}: cannot import {module_name}: "
                                  f"{type(exc).__name__}: {exc}") from None
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        raise ClusterEnvSpecError(f"--cluster-env {spec!r}: {module_name} has no class "
                                  f"{class_name}")
    return cls


def _load_file(path: Path):
    if not path.is_file():
        raise ClusterEnvSpecError(f"--cluster-env: no such file {path}")
    name = f"ncclcheck_user_env_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ClusterEnvSpecError(f"--cluster-env: {path} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def lightning_base_of(cls: type, lightning: InstalledLightning) -> type | None:
    """The ClusterEnvironment base the class derives from, if it is the installed one."""
    return lightning.cluster_environment if issubclass(cls, lightning.cluster_environment) else None


def check_interface(cls: type, lightning: InstalledLightning) -> tuple[CheckResult, list[InterfaceProblem]]:
    name = cls.__name__
    interface = interface_of(lightning.cluster_environment, lightning.version)
    problems = check_class(cls, interface)
    details: dict[str, Any] = {"class": f"{cls.__module__}.{cls.__qualname__}",
                               "lightning": lightning.label,
                               "problems": [p.__dict__ for p in problems]}
    if lightning_base_of(cls, lightning) is None:
        others = [b.__module__ for b in cls.__mro__ if b.__name__ == "ClusterEnvironment"]
        where = f" (it derives from {others[0]}.ClusterEnvironment)" if others else ""
        return failed(INTERFACE, f"{name} is not a ClusterEnvironment of "
                      f"the installed {lightning.label}{where}: Trainer(plugins=[{name}()]) "
                      "raises 'Found invalid type for plugin'",
                      f"Subclass {lightning.cluster_environment.__module__}.ClusterEnvironment.",
                      Category.CONFIGURATION, **details), problems
    if not problems:
        return passed(INTERFACE, f"{name} implements the "
                      f"{lightning.label} ClusterEnvironment interface", **details), problems
    missing = [p.member for p in problems if p.problem == "missing"]
    texts = "; ".join(p.text for p in problems)
    head = (f"{lightning.label} cannot instantiate {name} (abstract: {', '.join(missing)})"
            if missing else f"{name} does not fit the {lightning.label} interface")
    return failed(INTERFACE, f"{head}: {texts}",
                  " ".join(p.fix for p in problems), RANK, **details), problems


def _runnable(cls: type, problems: list[InterfaceProblem]) -> type:
    """The class, with members Lightning would miss filled by ones returning None, so the
    grid still shows what the members it does define compute."""
    missing = {p.member for p in problems if p.problem == "missing"}
    if not missing:
        return cls
    fill: dict[str, Any] = {}
    for member in missing:
        if member in ("creates_processes_externally", "main_address", "main_port"):
            fill[member] = property(lambda self: None)
        elif member == "detect":
            fill[member] = staticmethod(lambda: False)
        elif member.startswith("set_"):
            fill[member] = lambda self, value: None
        else:
            fill[member] = lambda self: None
    return type(cls.__name__, (cls,), fill)


def _ask(answer: SlotAnswer, name: str, func) -> Any:
    try:
        value = func()
    except Exception as exc:
        answer.errors[name] = f"{type(exc).__name__}: {exc}"
        return None
    answer.values[name] = value
    return value


def run_slot(cls: type, slot: Slot, env: Mapping[str, str]) -> SlotAnswer:
    """One process: construct the class and call it in the order DDPStrategy does."""
    answer = SlotAnswer(slot)
    with swapped_environ(env):
        instance = _ask(answer, "__init__", cls)
        if instance is None:
            return answer
        _ask(answer, "creates_processes_externally", lambda: instance.creates_processes_externally)
        node = _ask(answer, "node_rank", instance.node_rank)
        local = _ask(answer, "local_rank", instance.local_rank)
        if isinstance(node, int) and isinstance(local, int):
            _ask(answer, "set_global_rank", lambda: instance.set_global_rank(
                node * slot.per_node + local))
        _ask(answer, "set_world_size", lambda: instance.set_world_size(slot.world))
        _ask(answer, "global_rank", instance.global_rank)
        _ask(answer, "world_size", instance.world_size)
        _ask(answer, "main_address", lambda: instance.main_address)
        _ask(answer, "main_port", lambda: instance.main_port)
    return answer


def _parent_spawns(cls: type, node: int, base: Mapping[str, str]) -> Any:
    """creates_processes_externally as the script sees it before Lightning launches."""
    with swapped_environ(lightning_parent_env(node, base)):
        try:
            return cls().creates_processes_externally
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"


def check_style(cls: type, style: LaunchStyle, nodes: int, per_node: int,
                base: Mapping[str, str], filled: frozenset[str] = frozenset()) -> CheckResult:
    check = STYLE_CHECKS[style.name]
    name = cls.__name__
    simulated = bool(filled)
    if not style.external and "creates_processes_externally" not in filled:
        spawns = _parent_spawns(cls, 0, base)
        if spawns is not False:
            return skipped(check, f"{style.title} not simulated: {name}."
                           f"creates_processes_externally is {spawns!r} before launch, so "
                           "Lightning would not start the processes itself (started without "
                           "torchrun/srun, only one process per node would run)",
                           creates_processes_externally=spawns)
    answers = [run_slot(cls, slot, style.env_for(slot, base)) for slot in grid(nodes, per_node)]
    details = {"launcher": style.name, "nodes": nodes, "gpus_per_node": per_node,
               "slots": [{"node": a.slot.node, "local": a.slot.local, **_jsonable(a.values),
                          "errors": a.errors} for a in answers[:MAX_SLOTS_SHOWN]],
               "slots_total": len(answers),
               "simulated_missing_members": simulated}
    findings = judge(answers, style, nodes, per_node, filled)
    where = f"under {style.title} ({nodes} x {per_node})"
    if not findings:
        return passed(check, f"{name} {where}: global ranks 0..{nodes * per_node - 1} unique, "
                      f"world_size() == {nodes * per_node}, local/node ranks consistent", **details)
    note = " (members Lightning needs but the class lacks were treated as returning None)" \
        if simulated else ""
    return failed(check, f"{name} {where}: " + "; ".join(f.summary for f in findings) + note,
                  " ".join(f.fix for f in findings), RANK, **details)


def _jsonable(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v if isinstance(v, (int, str, bool, float, type(None))) else repr(v)
            for k, v in values.items() if not k.startswith("set_") and k != "__init__"}


LAYOUT_ARGS = ("num_nodes", "nodes", "devices", "num_devices", "gpus_per_node", "world_size")


def check_constructor(cls: type, nodes: int, per_node: int,
                      base: Mapping[str, str]) -> CheckResult | None:
    """A layout argument the constructor takes but nothing reads (the motivating class's
    num_nodes=2) looks like configuration and is not: say so."""
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return None
    taken = [p for p in params if p in LAYOUT_ARGS]
    if not taken:
        return None
    slot = grid(nodes, per_node)[-1]
    env = TORCHRUN.env_for(slot, base)
    answers = []
    for value in (1, 97):
        with swapped_environ(env):
            try:
                instance = cls(**{p: value for p in taken})
                answers.append(repr((instance.world_size(), instance.global_rank(),
                                     instance.node_rank(), instance.local_rank())))
            except Exception:  # the grid checks report what raises
                return None
    details = {"arguments": taken, "answers": answers}
    args = ", ".join(f"{p}=" for p in taken)
    if answers[0] != answers[1]:
        return passed(CONSTRUCTOR, f"{cls.__name__}({args}...) is used by its "
                      "rank methods", **details)
    return warned(CONSTRUCTOR, f"{cls.__name__}({args}...) is accepted but "
                  "changes nothing: world_size(), global_rank(), node_rank() and local_rank() "
                  "answer the same whatever it is", f"Use {taken[0]} in world_size() (return "
                  f"num_nodes x devices = {nodes * per_node}) or drop the argument, so it does "
                  "not look like it configures the job.", Category.CONFIGURATION, **details)


def cluster_env_results(ctx: ProbeContext, lightning: InstalledLightning,
                        cls: type) -> list[CheckResult]:
    interface_result, problems = check_interface(cls, lightning)
    results = [interface_result]
    nodes, per_node = ctx.nodes, ctx.gpus_per_node
    if nodes is None or per_node is None:
        results.append(skipped(GRID, f"{cls.__name__} not run over the "
                               "grid: pass --nodes N --gpus-per-node M", class_name=cls.__name__))
        return results
    base = without_launcher(ctx.env)
    runnable = _runnable(cls, problems)
    filled = frozenset(p.member for p in problems if p.problem == "missing")
    for style in styles_for(ctx.env):
        results.append(check_style(runnable, style, nodes, per_node, base, filled))
    constructor = check_constructor(runnable, nodes, per_node, base)
    if constructor is not None:
        results.append(constructor)
    return results


__all__ = ["ClusterEnvSpecError", "load_cluster_env", "cluster_env_results", "check_interface",
           "judge", "run_slot"]
