"""The registry: every check, found in its family's home, and the judges that report them.

A family's home is the package ``ncclcheck/probes/<family>/``. Every module in it is read for
``CheckSpec`` objects (the checks ``ncclcheck checks`` and docs/ list) and ``@judge`` functions
(what the family's probe runs on its facts), so adding a check is adding a module, or a
function to one: there is no list to edit. tests/test_registry.py fails when a check is
declared outside its family's home, or declared and never reported.

Loading imports the family packages, none of which imports torch or Lightning at the top.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ncclcheck.model import Category, CheckResult
from ncclcheck.probes import CHECK_FAMILIES, FAMILY_NAMES
from ncclcheck.probes.spec import CheckSpec, Judge, judge_of

PROBE_ORDER = 10_000  # the generic row of a family that crashed: after all of its checks


class UnknownCheck(LookupError):
    """An id or pattern that no declared check answers to."""


def probe_error_spec(family: str) -> CheckSpec:
    """The row ``run_family`` reports when a family crashes or misses the deadline."""
    return CheckSpec(
        f"{family}.probe", f"the {family} probe family ran to completion",
        (Category.TIMEOUT, Category.OTHER),
        fails_when=f"errors when the {family} family raised an exception (the row names it) or "
                   "did not finish before --timeout (timeout)",
        doc="Not a check of the host: it stands in for the family's own checks when they could "
            "not run, so a crash or a hang is reported instead of hidden.",
        order=PROBE_ORDER)


def home(family: str) -> str:
    """The package that holds a family's checks."""
    return f"ncclcheck.probes.{family}"


def family_modules(family: str) -> list[ModuleType]:
    """The family's package and every module in it, in name order (subpackages included)."""
    package = importlib.import_module(home(family))
    modules = [package]
    for info in sorted(pkgutil.walk_packages(package.__path__, package.__name__ + "."),
                       key=lambda i: i.name):
        modules.append(importlib.import_module(info.name))
    return modules


def _module_values(module: ModuleType) -> list[Any]:
    """A module's top-level values, with the items of its tuples and dicts (a group of
    checks built in a loop, like the cluster_env checks per launch style)."""
    values: list[Any] = []
    for value in vars(module).values():
        values.append(value)
        if isinstance(value, dict):
            values.extend(value.values())
        elif isinstance(value, tuple):
            values.extend(value)
    return values


def declared_specs(family: str) -> tuple[CheckSpec, ...]:
    """Every check the family's home declares, in declared order."""
    seen: dict[int, CheckSpec] = {}
    for module in family_modules(family):
        for value in _module_values(module):
            if isinstance(value, CheckSpec) and value.family == family:
                seen.setdefault(id(value), value)
    return tuple(sorted(seen.values(), key=lambda s: (s.order, s.id)))


def judges(family: str) -> tuple[Judge, ...]:
    """Every judge in the family's home, in the order of the first check each reports."""
    found: dict[int, Judge] = {}
    for module in family_modules(family):
        for value in vars(module).values():
            judged = judge_of(value)
            where = judged.func.__module__ if judged is not None else ""
            if judged is not None and (where == home(family) or where.startswith(home(family) + ".")):
                found.setdefault(id(judged.func), judged)
    return tuple(sorted(found.values(), key=lambda j: (j.order, j.name)))


def run_judges(family: str, facts: Any) -> list[CheckResult]:
    """Every judge of the family on ``facts``: the family's checks, in report order."""
    return [result for judged in judges(family) for result in judged(facts)]


@dataclass(frozen=True)
class Registry:
    """Every declared check, in listing order."""

    specs: tuple[CheckSpec, ...]

    def duplicates(self) -> list[str]:
        seen: set[str] = set()
        return sorted({s.id for s in self.specs if s.id in seen or seen.add(s.id)})

    def find(self, check_id: str) -> CheckSpec | None:
        """The spec an emitted id belongs to: an exact id first, then a ``.*`` family."""
        exact = next((s for s in self.specs if s.id == check_id), None)
        return exact or next((s for s in self.specs if s.matches(check_id)), None)

    def lookup(self, query: str) -> CheckSpec:
        """One spec by id, by a ``.*`` pattern's own id, or by an id the pattern covers."""
        found = self.find(query)
        if found is None:
            close = ", ".join(self.close_ids(query)) or "none"
            raise UnknownCheck(f"no check {query!r} (close: {close}; list them with "
                               "`ncclcheck checks`)")
        return found

    def close_ids(self, query: str, limit: int = 3) -> list[str]:
        ids = [s.id for s in self.specs]
        close = difflib.get_close_matches(query, ids, n=limit, cutoff=0.5)
        stem = query.rstrip(".*")
        prefixed = [i for i in ids if stem and i.startswith(stem) and i not in close]
        return (close + prefixed)[:limit]

    def family(self, name: str) -> tuple[CheckSpec, ...]:
        return tuple(s for s in self.specs if s.family == name)


def load_registry() -> Registry:
    """Every family's checks (the probe families', then the job's), then the generic rows of
    the families that run as probes."""
    specs = [spec for family in CHECK_FAMILIES for spec in declared_specs(family)]
    specs.extend(probe_error_spec(name) for name in FAMILY_NAMES)
    return Registry(tuple(specs))
