"""The check registry: every check a probe can report, declared once next to its code.

Each probe family module (and ``ncclcheck.cluster.checks`` for the job-wide rows) exposes
``CHECKS: tuple[CheckSpec, ...]``. ``ncclcheck checks``, the per-family tables in docs/ and
the tests that every emitted id is known all read these declarations, so a check is described
in one place only (as a ruff rule is).
"""

from __future__ import annotations

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

    def matches(self, check_id: str) -> bool:
        """Whether a result id emitted by a probe is this check."""
        if self.id.endswith(".*"):
            stem = self.id[:-1]
            return check_id.startswith(stem) and len(check_id) > len(stem)
        return check_id == self.id
