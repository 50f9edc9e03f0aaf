"""What one rank's run of the job passes between its phases, and back to the runner.

``Job`` is what every phase is given; ``Findings`` is what they found. ``ncclcheck.runner``
alone turns findings into a report, prints and publishes it, so cluster mode and a single
process end the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ncclcheck.context import ProbeContext
from ncclcheck.launchers import Layout
from ncclcheck.model import BenchSection, CheckResult

from .clock import JobClock
from .expect import Expectation
from .session import ClusterSession


@dataclass
class Job:
    """What every phase of this rank's run needs: the families, the context, the launcher's
    layout, the deadlines, and this process's own extra checks."""

    families: list[str]
    ctx: ProbeContext
    layout: Layout
    clock: JobClock
    extra_checks: list[CheckResult]
    rank: int  # the rank this process claims (may be negative or out of range)
    expect: Expectation
    per_rank: bool = False  # the job report lists every rank's result (--per-rank)

    @property
    def me(self) -> str:
        return f"rank {self.rank} ({self.ctx.host})"


@dataclass(frozen=True)
class Verdict:
    """Rank 0's word to a rank its job report covers: the job's exit code, and the line this
    rank says on stderr instead of a report."""

    code: int
    note: str
    status: str = ""  # the job's status, as rank 0 published it


@dataclass
class Findings:
    """What this rank's run found, in one of three shapes.

    Rank 0: every process's checks, the job-wide ``rows`` and ``cluster`` context for the job
    report, and the ``session`` to tell the others the verdict on once the report is out
    (``conclude``). A process not in rank 0's report: its own checks with a ``cluster.store``
    row, and ``alone`` saying why. A rank rank 0 reported for: only the ``verdict``, nothing
    to print.
    """

    checks: list[CheckResult] = field(default_factory=list)
    bench: BenchSection | None = None
    rows: list[CheckResult] | None = None  # rank 0: one row per check across the job
    cluster: dict[str, Any] | None = None  # rank 0: the report's context.cluster
    verdict: Verdict | None = None  # rank 0's report covers this rank
    alone: str | None = None  # why this process reports on itself (its stderr line)
    session: ClusterSession | None = None  # rank 0: where the other ranks wait for the verdict
    included: list[int] = field(default_factory=list)  # rank 0: the slots its report holds

    def conclude(self, code: int, status: str) -> None:
        """Rank 0, after printing: tell the ranks in the report the job's verdict."""
        if self.session is not None:
            self.session.close_job(code, status, self.included)

    def note(self, code: int) -> str | None:
        """The stderr line of a process that printed its own report."""
        return None if self.alone is None else f"{self.alone}; exit {code}"
