"""What the Trainer will do in this environment, asked of Lightning's own classes.

``ranks.lightning.environment``: the ClusterEnvironment Lightning selects, in its detection
order for the installed version. ``ranks.lightning.values``: what it computes (ranks, world
size, main address/port) after the strategy's ``set_world_ranks``. ``ranks.lightning.settings``:
whether ``Trainer(num_nodes, devices)`` fits the launch — by ``validate_settings`` where
Lightning has it (2.1+), by the same arithmetic where it does not (1.9, 2.0: silent there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ncclcheck.context import ProbeContext
from ncclcheck.lightning.environ import swapped_environ
from ncclcheck.lightning.installed import InstalledLightning
from ncclcheck.model import Category, CheckResult, failed, passed, skipped, warned
from ncclcheck.probes.ranks.lightning import ENVIRONMENT, SETTINGS, VALUES

RANK = Category.RANK_MISMATCH


@dataclass
class LightningView:
    """Lightning's answers in one environment; ``errors`` holds what raised, by member."""

    lightning: InstalledLightning
    environment: str | None = None
    order: list[str] = field(default_factory=list)
    detected: dict[str, Any] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    settings_error: str | None = None


def _call(view: LightningView, name: str, func) -> Any:
    try:
        return func()
    except Exception as exc:  # Lightning's KeyError/ValueError is the finding
        view.errors[name] = f"{type(exc).__name__}: {exc}"
        return None


def read_view(lightning: InstalledLightning, env: Mapping[str, str], num_nodes: int,
              devices: int | None) -> LightningView:
    """Select, construct and query the environment class exactly as the Trainer would."""
    view = LightningView(lightning)
    with swapped_environ(env) as seen:
        chosen = None
        for cls in lightning.detection_order():
            view.order.append(cls.__name__)
            try:
                hit = bool(cls.detect())
            except Exception as exc:
                view.detected[cls.__name__] = f"{type(exc).__name__}: {exc}"
                continue
            view.detected[cls.__name__] = hit
            if hit:
                chosen = cls
                break
        if chosen is not None:
            view.environment = chosen.__name__
            instance = _call(view, "__init__", chosen)
            if instance is not None:
                _query(view, instance, num_nodes, devices)
    view.warnings.extend(seen)
    return view


def _query(view: LightningView, env: Any, num_nodes: int, devices: int | None) -> None:
    values = view.values
    values["creates_processes_externally"] = _call(view, "creates_processes_externally",
                                                   lambda: env.creates_processes_externally)
    values["main_address"] = _call(view, "main_address", lambda: env.main_address)
    values["main_port"] = _call(view, "main_port", lambda: env.main_port)
    local, node = (_call(view, "local_rank", env.local_rank), _call(view, "node_rank", env.node_rank))
    if devices is not None and local is not None and node is not None:
        # DDPStrategy.set_world_ranks: only LightningEnvironment keeps these values.
        _call(view, "set_global_rank", lambda: env.set_global_rank(node * devices + local))
        _call(view, "set_world_size", lambda: env.set_world_size(num_nodes * devices))
    values.update(local_rank=local, node_rank=node,
                  global_rank=_call(view, "global_rank", env.global_rank),
                  world_size=_call(view, "world_size", env.world_size))
    if devices is not None and view.lightning.has_validate_settings:
        try:
            env.validate_settings(num_devices=devices, num_nodes=num_nodes)
        except Exception as exc:
            view.settings_error = str(exc)


def lightning_results(ctx: ProbeContext, lightning: InstalledLightning) -> list[CheckResult]:
    num_nodes = ctx.nodes or 1
    devices = ctx.gpus_per_node
    view = read_view(lightning, ctx.env, num_nodes, devices)
    return [check_environment(view), check_values(view, ctx.env, num_nodes),
            check_settings(view, ctx.env, num_nodes, devices, ctx.nodes is None)]


def check_environment(view: LightningView) -> CheckResult:
    details = {"lightning": view.lightning.label, "detection_order": view.order,
               "detected": view.detected, "environment": view.environment}
    order = " → ".join(n.replace("Environment", "") for n in view.order)
    if view.environment is None:
        return failed(ENVIRONMENT,
                      f"{view.lightning.label}: no ClusterEnvironment detected ({order})",
                      "Pass one explicitly: Trainer(plugins=[YourClusterEnvironment()]).",
                      Category.CONFIGURATION, **details)
    if "__init__" in view.errors:
        return failed(ENVIRONMENT,
                      f"{view.lightning.label} selects {view.environment}, whose constructor "
                      f"raises: {view.errors['__init__']}", _init_fix(view), RANK, **details)
    return passed(ENVIRONMENT, f"{view.lightning.label} selects "
                  f"{view.environment} (tried in order: {order})", **details)


def _init_fix(view: LightningView) -> str:
    text = view.errors.get("__init__", "")
    if "--ntasks-per-node" in text:
        return ("Submit with --ntasks-per-node=<devices> (and --nodes=<num_nodes>) instead of "
                "--ntasks, so SLURM_NTASKS_PER_NODE is set.")
    return f"Fix the launcher variables {view.environment} reads (see its docstring)."


def check_values(view: LightningView, env: Mapping[str, str] | None = None,
                 num_nodes: int = 1) -> CheckResult:
    v = view.values
    details = {"environment": view.environment, **v, "errors": view.errors,
               "warnings": view.warnings}
    if view.environment is None or "__init__" in view.errors:
        return skipped(VALUES, "Lightning's ranks not computed: no usable "
                       "ClusterEnvironment", **details)
    broken = {k: e for k, e in view.errors.items() if not k.startswith("set_")}
    if broken:
        what = "; ".join(f"{k}: {e}" for k, e in broken.items())
        return failed(VALUES, f"{view.environment} cannot compute its values: "
                      f"{what}", f"Set the variables {view.environment} reads before the "
                      "script starts (a KeyError names the missing one); the launcher normally "
                      "sets them.", RANK, **details)
    summary = (f"{view.environment}: global_rank {v['global_rank']}, local_rank {v['local_rank']}, "
               f"node_rank {v['node_rank']}, world_size {v['world_size']}, main "
               f"{v['main_address']}:{v['main_port']}")
    rank, world = v["global_rank"], v["world_size"]
    if not isinstance(world, int) or not isinstance(rank, int) or not 0 <= rank < world:
        return failed(VALUES, f"{summary}: torch.distributed would get rank "
                      f"{rank} of {world}", f"{view.environment}.world_size() must return the "
                      "total number of processes and global_rank() a value below it; fix the "
                      "launcher's RANK / WORLD_SIZE.", RANK, **details)
    unset = [n for n in ("MASTER_ADDR", "MASTER_PORT") if n not in (env or {})]
    if view.environment == "LightningEnvironment" and num_nodes > 1 and unset:
        return failed(VALUES, f"{summary}: with num_nodes={num_nodes} and "
                      f"{' and '.join(unset)} unset, each node picks its own (127.0.0.1, a free "
                      "port) and the nodes never meet", "Export MASTER_ADDR=<node 0's address> "
                      "and MASTER_PORT=<free port>, identical on every node, and NODE_RANK=0.."
                      f"{num_nodes - 1}, before starting the script on each node.",
                      Category.CONFIGURATION, **details)
    defaults = [w for w in view.warnings if "is not defined" in w]
    if defaults:
        return warned(VALUES, f"{summary}; {defaults[0]}",
                      "Export MASTER_ADDR and MASTER_PORT, identical on every node.",
                      Category.CONFIGURATION, **details)
    return passed(VALUES, summary, **details)


def _per_node(view: LightningView, env: Mapping[str, str]) -> tuple[int | None, str]:
    for name in ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"):
        if str(env.get(name, "")).isdigit() and view.environment != "LightningEnvironment":
            return int(env[name]), name
    return None, ""


def settings_fix(world: int, num_nodes: int, devices: int, per_node: int | None,
                 per_node_from: str) -> str:
    """The Trainer argument to change so num_nodes x devices == the launch's world size."""
    if per_node is not None and per_node != devices:
        nodes = world // per_node if world % per_node == 0 else None
        nodes_text = f", num_nodes={nodes}" if nodes and nodes != num_nodes else ""
        return (f"Set Trainer(devices={per_node}{nodes_text}): {per_node_from}={per_node} "
                f"processes per node, {world} in all.")
    if world % devices == 0:
        nodes = world // devices
        return (f"Set Trainer(num_nodes={nodes}): {nodes} x devices={devices} = {world}, the "
                "world size the launcher started.")
    return (f"Launch num_nodes x devices processes, or set Trainer(num_nodes, devices) so their "
            f"product is {world}.")


def check_settings(view: LightningView, env: Mapping[str, str], num_nodes: int,
                   devices: int | None, nodes_defaulted: bool) -> CheckResult:
    world = view.values.get("world_size")
    details = {"num_nodes": num_nodes, "devices": devices, "world_size": world,
               "environment": view.environment, "lightning_message": view.settings_error,
               "lightning_checks": view.lightning.has_validate_settings}
    if devices is None:
        return skipped(SETTINGS, "Trainer settings not checked: pass --devices "
                       "M (and --num-nodes N) as given to Trainer(devices=, num_nodes=)", **details)
    if not isinstance(world, int):
        return skipped(SETTINGS, "Trainer settings not checked: Lightning's "
                       "world size is unknown", **details)
    nodes_text = f"num_nodes={num_nodes}" + (" (Trainer default)" if nodes_defaulted else "")
    product = num_nodes * devices
    per_node, per_node_from = _per_node(view, env)
    if view.settings_error:
        fix = settings_fix(world, num_nodes, devices, per_node, per_node_from)
        return failed(SETTINGS, f"{view.environment}.validate_settings will "
                      f"raise at trainer.fit(): devices={devices} x {nodes_text} = {product} "
                      f"!= world size {world}", fix, RANK, **details)
    if product != world:
        fix = settings_fix(world, num_nodes, devices, per_node, per_node_from)
        silent = ("Lightning does not check this here (validate_settings exists from 2.1.0 on)"
                  if not view.lightning.has_validate_settings else
                  f"{view.environment} does not check it")
        return failed(SETTINGS, f"devices={devices} x {nodes_text} = {product} "
                      f"!= world size {world} from {view.environment}; {silent}: the process "
                      f"group gets {world} ranks while the sampler splits data {product} ways",
                      fix, RANK, **details)
    if per_node is not None and per_node != devices:
        return failed(SETTINGS, f"devices={devices} but {per_node_from}="
                      f"{per_node} processes per node", settings_fix(
                          world, num_nodes, devices, per_node, per_node_from), RANK, **details)
    return passed(SETTINGS, f"Trainer(devices={devices}, {nodes_text}): "
                  f"{devices} x {num_nodes} = {world} == {view.environment} world size", **details)
