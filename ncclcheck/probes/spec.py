"""What a check module declares: the check as users see it (``CheckSpec``) and the function
that judges it (``@judge``).

A check lives in one module of its family's package (``ncclcheck/probes/<family>/``), its spec
beside its judge, as a ruff rule keeps its metadata beside its checker. Nothing lists checks by
hand: ``ncclcheck.probes.registry`` finds every spec and every judge in the family's modules,
``ncclcheck checks`` and docs/ list the specs, and the family's probe runs the judges on the
facts it gathered, in the order the specs declare.

This module imports nothing of the package but the model, so every check module can use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, TypeVar, Union

from ncclcheck.model import Category, CheckResult

# What a judge may return: one result, several (a ``.*`` family, or a check it skips), or
# nothing (a check that does not apply to these facts, e.g. net.tp_interface without
# TP_SOCKET_IFNAME).
Judged = Union[CheckResult, Iterable[CheckResult], None]
JudgeFunc = TypeVar("JudgeFunc", bound=Callable[..., Judged])
JUDGES_ATTRIBUTE = "__judges__"


@dataclass(frozen=True)
class CheckSpec:
    """One check as users see it.

    ``id`` is the stable dotted id; an id ending in ``.*`` declares a family of ids made at run
    time (``nccl.setting.*`` covers ``nccl.setting.NCCL_SOCKET_IFNAME``). ``categories`` are the
    categories the check can carry when it warns, fails or errors; ``fails_when`` and
    ``warns_when`` say in a sentence what makes it do so ("" when it never does). ``order``
    places the check in its family's listing and report (declared, never positional: the file a
    check sits in and its place there decide nothing); it is unique within the family.
    """

    id: str
    title: str
    categories: tuple[Category, ...] = ()
    fails_when: str = ""
    warns_when: str = ""
    doc: str = ""
    order: int = 0

    @property
    def family(self) -> str:
        return self.id.split(".", 1)[0]

    def member(self, name: str) -> str:
        """The id of one check of a ``.*`` family (``nccl.setting.*`` -> ``nccl.setting.NAME``),
        so code that reports it builds the id from the declaration instead of re-typing it."""
        if not self.id.endswith(".*"):
            raise ValueError(f"{self.id} is one check, not a family of them")
        return self.id[:-1] + name

    def matches(self, check_id: str) -> bool:
        """Whether a result id emitted by a probe is this check."""
        if self.id.endswith(".*"):
            stem = self.id[:-1]
            return check_id.startswith(stem) and len(check_id) > len(stem)
        return check_id == self.id


def judge(*specs: CheckSpec) -> Callable[[JudgeFunc], JudgeFunc]:
    """Mark a function ``(facts) -> results`` as the judge of ``specs``: its family's probe
    calls it with the facts the family gathered. The mark is an attribute of the function, so
    there is no list to edit anywhere else."""
    if not specs or not all(isinstance(s, CheckSpec) for s in specs):
        raise TypeError("@judge takes the CheckSpec(s) the function reports")

    def mark(func: JudgeFunc) -> JudgeFunc:
        setattr(func, JUDGES_ATTRIBUTE, tuple(specs))
        return func

    return mark


@dataclass(frozen=True)
class Judge:
    """A judge found in a family's module: the function and the checks it reports."""

    func: Callable[[Any], Judged]
    specs: tuple[CheckSpec, ...]

    @property
    def name(self) -> str:
        return f"{self.func.__module__}.{self.func.__qualname__}"

    @property
    def order(self) -> int:
        return min(spec.order for spec in self.specs)

    def __call__(self, facts: Any) -> list[CheckResult]:
        """The results, each checked to be one of the judge's own checks: a judge that reports
        another module's check would break "one home per check" without a test noticing."""
        found = self.func(facts)
        results = [] if found is None else [found] if isinstance(found, CheckResult) else list(found)
        for result in results:
            if not any(spec.matches(result.id) for spec in self.specs):
                raise ValueError(f"{self.name} reported {result.id}, which it does not judge "
                                 f"({', '.join(s.id for s in self.specs)})")
        return results


def judge_of(value: object) -> Judge | None:
    """The ``Judge`` a module attribute is, or None when it is not a marked function."""
    specs = getattr(value, JUDGES_ATTRIBUTE, None)
    if callable(value) and isinstance(specs, tuple) and specs:
        return Judge(value, specs)  # type: ignore[arg-type]
    return None
