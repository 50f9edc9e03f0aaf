"""The ClusterEnvironment interface per Lightning version, and the class validator against it.

1.9.5 is not installed: its interface is encoded in ncclcheck (from the 1.9.5 sources) and this
file checks the validator against it, and checks the encoding against Python's own ABC rules by
building a 1.9.5-shaped abstract base from it. 2.x is the installed pytorch-lightning.
"""

from __future__ import annotations

import abc

import pytest

from ncclcheck.lightning.installed import detection_order, load_lightning, version_tuple
from ncclcheck.lightning.interface import (INTERFACE_1_9, INTERFACE_2_X, METHOD, PROPERTY, STATIC,
                                           check_class, interface_of, missing_members)

lightning = load_lightning()


def base_from(interface) -> type:
    """An ABC with exactly the interface's abstract members, of the declared kinds."""
    body = {}
    for name, kind in interface.abstract.items():
        func = abc.abstractmethod(lambda *a: None)
        body[name] = {PROPERTY: property(func), STATIC: staticmethod(func)}.get(kind, func)
    for name in interface.optional:
        body[name] = lambda self, *a, **k: None
    return abc.ABCMeta(f"ClusterEnvironment{interface.version}", (abc.ABC,), body)


def motivating_body() -> dict:
    """The motivating case's members, as plain functions (see tests/data/cluster_envs)."""
    def __init__(self, num_nodes=2):
        self._world_size = None

    return {"__init__": __init__, "global_rank": lambda self: 0,
            "world_size": lambda self: self._world_size, "node_rank": lambda self: 0,
            "local_rank": lambda self: 0, "master_address": lambda self: "127.0.0.1",
            "master_port": lambda self: 12910}


def test_installed_interface_matches_the_encoded_2x_one():
    installed = interface_of(lightning.cluster_environment, lightning.version)
    assert installed.abstract == INTERFACE_2_X.abstract
    assert "validate_settings" in installed.optional


def test_1_9_has_the_same_abstract_members_but_no_validate_settings():
    assert INTERFACE_1_9.abstract == INTERFACE_2_X.abstract
    assert "validate_settings" not in INTERFACE_1_9.optional
    assert INTERFACE_1_9.abstract["main_port"] == PROPERTY
    assert INTERFACE_1_9.abstract["detect"] == STATIC
    assert INTERFACE_1_9.abstract["world_size"] == METHOD


@pytest.mark.parametrize("interface", [INTERFACE_1_9, INTERFACE_2_X], ids=["1.9", "2.x"])
def test_motivating_class_is_not_instantiable_and_the_validator_names_why(interface):
    base = base_from(interface)
    cls = type("Motivating", (base,), motivating_body())
    with pytest.raises(TypeError) as raised:  # Python agrees the class is abstract ...
        cls()
    problems = check_class(cls, interface)
    missing = missing_members(problems)
    # ... and the validator names exactly the members Python reports.
    for name in missing:
        assert name in str(raised.value)
    assert sorted(missing) == sorted(["creates_processes_externally", "detect", "main_address",
                                      "main_port", "set_global_rank", "set_world_size"])
    old = {p.member for p in problems if p.problem == "old_name"}
    assert old == {"master_address", "master_port"}
    main_address = next(p for p in problems if p.member == "main_address")
    assert "master_address is defined instead" in main_address.text
    assert "@property main_address(self)" in main_address.fix


def test_wrong_kinds_are_named():
    body = {"creates_processes_externally": property(lambda self: True),
            "main_address": lambda self: "h",  # a method where Lightning reads a property
            "main_port": property(lambda self: 1), "detect": lambda self: True,  # not static
            "world_size": property(lambda self: 4),  # a property where Lightning calls it
            "set_world_size": lambda self, s: None, "global_rank": lambda self: 0,
            "set_global_rank": lambda self, r: None, "local_rank": lambda self: 0,
            "node_rank": lambda self: 0}
    cls = type("Kinds", (base_from(INTERFACE_2_X),), body)
    cls()  # instantiable: Python sees nothing wrong
    wrong = {p.member: p for p in check_class(cls, INTERFACE_2_X) if p.problem == "wrong_kind"}
    assert set(wrong) == {"main_address", "detect", "world_size"}
    assert "@staticmethod detect()" in wrong["detect"].fix


def test_validate_settings_is_never_called_by_1_9():
    body = {n: (property(lambda self: 1) if k == PROPERTY else
                staticmethod(lambda: True) if k == STATIC else (lambda self, *a: 1))
            for n, k in INTERFACE_2_X.abstract.items()}
    body["validate_settings"] = lambda self, num_devices, num_nodes: None
    on_19 = type("V", (base_from(INTERFACE_1_9),), dict(body))
    on_2x = type("V", (base_from(INTERFACE_2_X),), dict(body))
    assert [p.problem for p in check_class(on_19, INTERFACE_1_9)] == ["not_called"]
    assert check_class(on_2x, INTERFACE_2_X) == []


def test_builtin_environments_pass_the_installed_interface():
    interface = interface_of(lightning.cluster_environment, lightning.version)
    for name in ("LightningEnvironment", "TorchElasticEnvironment", "SLURMEnvironment"):
        assert check_class(getattr(lightning.environments, name), interface) == [], name


@pytest.mark.parametrize("version, first, has_kubeflow, has_bagua", [
    ("1.9.5", "SLURMEnvironment", True, True),
    ("2.0.6", "SLURMEnvironment", True, False),
    ("2.0.7", "SLURMEnvironment", False, False),
    ("2.1.0", "TorchElasticEnvironment", False, False),
    ("2.6.6", "TorchElasticEnvironment", False, False),
])
def test_detection_order_per_version(version, first, has_kubeflow, has_bagua):
    order = detection_order(version_tuple(version))
    assert order[0] == first and order[-1] == "LightningEnvironment"
    assert ("KubeflowEnvironment" in order) == has_kubeflow
    assert ("BaguaEnvironment" in order) == has_bagua
    assert ("MPIEnvironment" in order) == (version_tuple(version) >= (2, 0, 0))


def test_installed_detection_order_uses_the_installed_classes():
    classes = lightning.detection_order()
    assert [c.__name__ for c in classes] == list(detection_order(lightning.version_tuple))
    assert all(issubclass(c, lightning.cluster_environment) for c in classes)
