"""The check registry: every check a probe can report, declared once next to its code.

Each probe family module (and ``ncclcheck.cluster.checks`` for the job-wide rows) exposes
``CHECKS: tuple[CheckSpec, ...]``. ``ncclcheck checks``, the per-family tables in docs/ and
the tests that every emitted id is known all read these declarations, so a check is described
in one place only (as a ruff rule is).

This module imports nothing of the package but the model, so every declaring module can use
it; ``ncclcheck.registry_load`` collects the declarations.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from ncclcheck.model import Category


@dataclass(frozen=True)
class CheckSpec:
    """One check as users see it.

    ``id`` is the stable dotted id; an id ending in ``.*`` declares a family of ids made at run
    time (``nccl.setting.*`` covers ``nccl.setting.NCCL_SOCKET_IFNAME``). ``categories`` are the
    categories the check can carry when it warns, fails or errors; ``fails_when`` and
    ``warns_when`` say in a sentence what makes it do so ("" when it never does).
    """

    id: str
    title: str
    categories: tuple[Category, ...] = ()
    fails_when: str = ""
    warns_when: str = ""
    doc: str = ""

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
            "not run, so a crash or a hang is reported instead of hidden.")


@dataclass(frozen=True)
class Registry:
    """Every declared check, in declaration order."""

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

