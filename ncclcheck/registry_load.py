"""The registry of every check, collected from the modules that declare them.

``ncclcheck checks``, docs/ (``ncclcheck.gendocs``) and the tests read it. Collecting imports
each declaring module, so it sits above the probes; the declarations themselves only need
``ncclcheck.registry``, which imports none of them.
"""

from __future__ import annotations

import importlib

from ncclcheck.probes import FAMILIES, FAMILY_NAMES
from ncclcheck.registry import CheckSpec, Registry, probe_error_spec

# Besides each probe family's module (named by its entry in ncclcheck.probes.FAMILIES), the
# job-wide rows live with the gather. A family's main module re-exports the checks of the
# modules its functions live in; tests/test_registry.py fails when a module defines CHECKS that
# no declaring module reaches.
JOB_WIDE_MODULES: tuple[str, ...] = ("ncclcheck.cluster.checks", "ncclcheck.cluster.job")


def declaring_modules() -> tuple[str, ...]:
    """Every module whose ``CHECKS`` the registry collects: the families', then the job's."""
    return tuple(f.target.partition(":")[0] for f in FAMILIES) + JOB_WIDE_MODULES


def load_registry() -> Registry:
    """Import the declaring modules (none imports torch) and the generic probe rows."""
    specs: list[CheckSpec] = []
    for module in declaring_modules():
        specs.extend(importlib.import_module(module).CHECKS)
    specs.extend(probe_error_spec(name) for name in FAMILY_NAMES)
    return Registry(tuple(specs))
