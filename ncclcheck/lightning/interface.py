"""The ClusterEnvironment interface as each Lightning version defines it, and a class checked
against it before Lightning ever instantiates it.

Lightning reads ``main_address``, ``main_port`` and ``creates_processes_externally`` as
properties and calls ``world_size()``, ``global_rank()``, ``local_rank()``, ``node_rank()`` as
methods, and ``detect()`` on the class; a member of the wrong kind breaks those calls even when
the class can be instantiated.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

PROPERTY, METHOD, STATIC = "property", "method", "staticmethod"

# What each member must give Lightning, for the fix text.
MEANING = {
    "creates_processes_externally": "bool: True when torchrun/srun/mpirun started every process, "
                                    "False when Lightning's launcher starts them",
    "main_address": "str: the host of rank 0 (becomes MASTER_ADDR)",
    "main_port": "int: the rendezvous port of rank 0 (becomes MASTER_PORT)",
    "detect": "bool: whether this environment applies (called on the class)",
    "world_size": "int: the number of processes across all nodes (num_nodes x devices)",
    "set_world_size": "store or ignore the size Lightning passes (num_nodes x devices)",
    "global_rank": "int: this process's rank across all nodes, 0..world_size-1",
    "set_global_rank": "store or ignore the rank Lightning passes (node_rank x devices + local_rank)",
    "local_rank": "int: this process's rank on its node, 0..devices-1",
    "node_rank": "int: this node's index, 0..num_nodes-1",
    "validate_settings": "raise when num_devices x num_nodes does not fit the launch",
}

# Names from older code and blog posts that no Lightning 1.9+ code path calls.
OLD_NAMES = {"master_address": "main_address", "master_port": "main_port",
             "master_addr": "main_address"}


@dataclass(frozen=True)
class Interface:
    version: str
    abstract: dict[str, str]  # name -> kind
    optional: dict[str, str] = field(default_factory=dict)


_ABSTRACT = {"creates_processes_externally": PROPERTY, "main_address": PROPERTY,
             "main_port": PROPERTY, "detect": STATIC, "world_size": METHOD,
             "set_world_size": METHOD, "global_rank": METHOD, "set_global_rank": METHOD,
             "local_rank": METHOD, "node_rank": METHOD}

# lightning_fabric/plugins/environments/cluster_environment.py at tag 1.9.5.
INTERFACE_1_9 = Interface("1.9", dict(_ABSTRACT), {"teardown": METHOD})
# lightning/fabric/plugins/environments/cluster_environment.py, 2.1.0 to 2.6.x.
INTERFACE_2_X = Interface("2.x", dict(_ABSTRACT), {"teardown": METHOD, "validate_settings": METHOD})


def member_kind(value: object) -> str:
    if isinstance(value, (property,)) or type(value).__name__ == "cached_property":
        return PROPERTY
    if isinstance(value, staticmethod):
        return STATIC
    if isinstance(value, classmethod):
        return "classmethod"
    if callable(value):
        return METHOD
    return "attribute"


def interface_of(base: type, version: str) -> Interface:
    """The interface as the installed base class declares it."""
    abstract = {n: member_kind(inspect.getattr_static(base, n))
                for n in sorted(getattr(base, "__abstractmethods__", ()))}
    optional = {n: member_kind(inspect.getattr_static(base, n))
                for n in ("teardown", "validate_settings") if hasattr(base, n)}
    return Interface(version, abstract, optional)


@dataclass(frozen=True)
class InterfaceProblem:
    member: str
    problem: str  # "missing", "wrong_kind", "old_name", "not_called"
    text: str
    fix: str


def _defined(cls: type, name: str) -> object | None:
    """The member as the class defines it, or None when missing or still abstract."""
    try:
        value = inspect.getattr_static(cls, name)
    except AttributeError:
        return None
    target = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
    if getattr(target, "__isabstractmethod__", False) or getattr(value, "__isabstractmethod__", False):
        return None
    return value


def check_class(cls: type, interface: Interface) -> list[InterfaceProblem]:
    """Every way ``cls`` fails ``interface``; empty when Lightning can use it as is."""
    problems = []
    for name, kind in interface.abstract.items():
        value = _defined(cls, name)
        if value is None:
            old = [o for o, new in OLD_NAMES.items() if new == name and hasattr(cls, o)]
            also = f" ({', '.join(old)} is defined instead, a name Lightning never calls)" if old else ""
            problems.append(InterfaceProblem(
                name, "missing", f"{name} is not defined{also}",
                f"Define {_signature(name, kind)} -> {MEANING[name]}."))
            continue
        found = member_kind(value)
        if found != kind and not (kind == STATIC and found == "classmethod"):
            problems.append(InterfaceProblem(
                name, "wrong_kind", f"{name} is a {found}, but Lightning uses it as a {kind}",
                f"Define it as {_signature(name, kind)} -> {MEANING[name]}."))
    for old, new in OLD_NAMES.items():
        if hasattr(cls, old) and old not in interface.abstract:
            problems.append(InterfaceProblem(
                old, "old_name", f"{old} is defined, but Lightning {interface.version} never "
                f"calls it (it reads the {new} property)",
                f"Rename {old} to {_signature(new, PROPERTY)} -> {MEANING[new]}."))
    if "validate_settings" not in interface.optional and _defined(cls, "validate_settings") is not None \
            and "validate_settings" in vars(cls):
        problems.append(InterfaceProblem(
            "validate_settings", "not_called", f"validate_settings is defined, but Lightning "
            f"{interface.version} never calls it (it exists from 2.1.0 on)",
            "Do the check in __init__ instead, or upgrade Lightning to 2.1 or later."))
    return problems


def missing_members(problems: list[InterfaceProblem]) -> list[str]:
    return [p.member for p in problems if p.problem == "missing"]


def _signature(name: str, kind: str) -> str:
    if kind == PROPERTY:
        return f"@property {name}(self)"
    if kind == STATIC:
        return f"@staticmethod {name}()"
    args = {"set_world_size": "self, size", "set_global_rank": "self, rank",
            "validate_settings": "self, num_devices, num_nodes"}.get(name, "self")
    return f"{name}({args})"
