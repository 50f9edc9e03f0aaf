"""Rank 0's side: wait for the job's reports, read them all at once, one job report's checks.

Rank 0 stops waiting early only when every rank 0..N-1 has been filled by a report (N the
larger of WORLD_SIZE and the process count the launch states) and every process that
connected has reported; otherwise it waits until its deadline. So the report does not depend
on which process arrived first: a duplicated, negative or out-of-range rank never completes
the job, and nobody who joined in time is cut off.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

from ncclcheck.model import CheckResult, FamilyOutput, passed
from ncclcheck.probes import FAMILIES
from ncclcheck.probes.nccl import VERSION as NCCL_VERSION

from .aggregate import aggregate, by_host
from .checks import Gathered, cluster_checks, processes
from .expect import Expectation
from .session import STORE, ClusterSession, key
from .state import Findings, Job

POLL_S = 0.05


def wait_for_reports(session: ClusterSession, slots: int, deadline: float) -> None:
    """Until every rank 0..slots-1 is filled and every process that connected reported, or
    ``deadline`` (time.monotonic())."""
    if not session.wait([key("filled", r) for r in range(slots)], deadline - time.monotonic()):
        return
    store = session.store
    while (store.add(key("reported"), 0) < store.add(key("slots"), 0)
           and time.monotonic() < deadline):
        time.sleep(POLL_S)


def read_gathered(session: ClusterSession, world_size: int, local_world_size: int | None,
                  deadline: float, expect: Expectation | None = None
                  ) -> tuple[Gathered, dict[int, list]]:
    """Wait for the reports until ``deadline``, then read every announcement and report in one
    multi_get each (O(processes)); one member per store slot."""
    wait_for_reports(session, expect.slots if expect else world_size, deadline)
    slots = session.store.add(key("slots"), 0)
    hellos = session.read_present([key("hello", s) for s in range(1, slots + 1)],
                                  0.5 if slots else 0)
    reports = session.read_present([key("report", s) for s in range(1, slots + 1)], 0)
    members, results, seen = [], {}, set()
    for slot in range(1, slots + 1):
        raw = hellos.get(key("hello", slot))
        if raw is None:
            continue
        member = dict(json.loads(raw), slot=slot)
        if member.get("member") in seen:  # the same process twice (never expected): once
            continue
        seen.add(member.get("member"))
        members.append(member)
        report = reports.get(key("report", slot))
        if report is not None:
            results[slot] = json.loads(report)["results"]
    return (Gathered(world_size, members, set(results), local_world_size, expect=expect),
            results)


def gather_job(session: ClusterSession, job: Job, own: FamilyOutput) -> Findings:
    """Rank 0: gather every process's checks and add the job-wide ones, for the job report;
    the others learn its verdict through ``Findings.conclude`` once it is printed."""
    per_node = job.layout.local_world_size or job.ctx.gpus_per_node
    gathered, reports = read_gathered(session, job.expect.declared, per_node,
                                      job.clock.gather_end, job.expect)
    everything: list[CheckResult] = []
    for slot in sorted(reports, key=lambda s: _slot_rank(gathered, s)):
        everything += [CheckResult.from_dict(d) for d in reports[slot]]
    if not reports:  # rank 0's own report is always there unless the store misbehaved
        everything = own.checks
    job_checks = _job_checks(session, job, gathered, everything)
    # In the table the cluster rows point at the ranks they are about, not at rank 0.
    rows = aggregate(everything, _scopes()) + [
        dataclasses.replace(c, host=c.details.get("where") or c.host) for c in job_checks]
    return Findings(everything + job_checks, own.bench, rows=rows,
                    cluster=cluster_context(gathered, rows), session=session,
                    included=sorted(reports))


def _job_checks(session: ClusterSession, job: Job, gathered: Gathered,
                everything: list[CheckResult]) -> list[CheckResult]:
    """cluster.store and the cluster.* checks over what every process announced and reported."""
    gathered.nccl_by_host = {r.host: str(r.details["version"]) for r in everything
                             if r.id == NCCL_VERSION.id and r.host and r.details.get("version")}
    store_row = passed(STORE, f"store at {session.address}:{session.port} hosted by "
                       f"rank 0 on {job.ctx.host}; {len(gathered.members)} process(es) connected",
                       address=session.address, port=session.port,
                       connected=len(gathered.members))
    checks = [store_row] + cluster_checks(gathered)
    for check in checks:
        check.host = job.ctx.host
    return checks


def _slot_rank(gathered: Gathered, slot: int) -> tuple[int, int]:
    member = next((m for m in gathered.members if m.get("slot") == slot), {})
    rank = member.get("rank")
    return (rank if isinstance(rank, int) else 1 << 30, slot)


def _scopes() -> dict[str, str]:
    return {f.name: getattr(f, "scope", "rank") for f in FAMILIES}


def cluster_context(gathered: Gathered, rows: list[CheckResult]) -> dict[str, Any]:
    """The report's ``context.cluster``: who connected and reported, every process once, and
    the job-wide rows."""
    hosts: dict[str, list[int]] = {}
    for m in gathered.members:
        hosts.setdefault(m.get("host") or "unknown host", []).append(m.get("rank"))
    return {
        "world_size": gathered.world_size,
        "expected_processes": gathered.expect.launch if gathered.expect else None,
        "connected": len(gathered.members),
        "reported": len(gathered.reported_slots),
        "hosts": by_host(((m.get("host"), m.get("rank")) for m in gathered.members
                          if isinstance(m.get("rank"), int)), limit=1 << 20),
        "ranks_by_host": {h: sorted(r for r in rs if isinstance(r, int)) for h, rs in hosts.items()},
        "processes": processes(gathered),
        "rows": [r.to_dict() for r in rows],
    }
