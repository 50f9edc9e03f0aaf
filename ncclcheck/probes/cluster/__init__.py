"""The job's checks: what only rank 0's gather can see (who reported, who is duplicated, what
differs between ranks and nodes).

Each module holds one check or a small group, spec beside judge, judging the ``Gathered`` facts
of ``ncclcheck.cluster.membership``; the gather calls ``job_checks``.
"""

from __future__ import annotations

from ncclcheck.cluster.membership import Gathered
from ncclcheck.model import CheckResult
from ncclcheck.probes import JOB_FAMILY
from ncclcheck.probes.registry import run_judges


def job_checks(job: Gathered) -> list[CheckResult]:
    """Every job-wide check on what the gather collected, in report order."""
    return run_judges(JOB_FAMILY, job)
