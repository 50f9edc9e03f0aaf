"""Rank 0's side: wait for the job's reports, read them all at once, one job report's checks.

Rank 0 stops waiting early only when every rank 0..N-1 has been filled by a report (N the
larger of WORLD_SIZE and the process count the launch states) and every process that
connected has reported; otherwise it waits until its deadline. So the report does not depend
on which process arrived first: a duplicated, negative or out-of-range rank never completes
the job, and nobody who joined in time is cut off.

What rank 0 reads grows with nodes, not ranks: a node leader that relays its node (see
``node.py``) delivers one summary for it (its members' identities with their settings shared,
its results folded), and rank 0 merges the folds. Ranks that joined rank 0's store directly
are folded here the same way.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

from ncclcheck.gcpause import paused_gc
from ncclcheck.model import CheckResult, FamilyOutput, passed
from ncclcheck.probes import FAMILIES
from ncclcheck.probes.cluster import job_checks
from ncclcheck.probes.cluster.store import STORE

from .aggregate import rows
from .expect import Expectation
from .fold import Fold, fold, merge
from .membership import Gathered, Variants, processes, split_identity
from .ranges import by_host, rank_ranges
from .session import ClusterSession, key
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


@dataclasses.dataclass
class Read:
    """What rank 0 read from its store: who joined, their results folded, and the slots of
    rank 0's store whose reports (and node summaries) it holds."""

    gathered: Gathered
    folded: Fold
    included: list[int]
    relayed: list[str]  # the hosts whose leader delivered a node summary


def read_gathered(session: ClusterSession, world_size: int, local_world_size: int | None,
                  deadline: float, expect: Expectation | None = None,
                  per_rank: bool = False) -> Read:
    """Wait for the reports until ``deadline``, then read every announcement and report (a
    leader's with its node's summary), a few hundred keys per request; one member per
    process."""
    wait_for_reports(session, expect.slots if expect else world_size, deadline)
    with paused_gc():
        return _read(session, world_size, local_world_size, expect, per_rank)


def _read(session: ClusterSession, world_size: int, local_world_size: int | None,
          expect: Expectation | None, per_rank: bool) -> Read:
    slots = session.store.add(key("slots"), 0)
    hellos = session.read_present([key("hello", s) for s in range(1, slots + 1)],
                                  0.5 if slots else 0)
    reports = session.read_present([key("report", s) for s in range(1, slots + 1)], 0)
    variants, members, reported, seen = Variants(), [], set(), set()
    direct: list[tuple[int, list[dict[str, Any]]]] = []
    summaries: list[dict[str, Any]] = []
    for slot in range(1, slots + 1):
        raw = hellos.get(key("hello", slot))
        if raw is None:
            continue
        own, variant = split_identity(json.loads(raw))
        if own.get("member") in seen:  # the same process twice (never expected): once
            continue
        seen.add(own.get("member"))
        members.append(dict(own, slot=slot, variant=variants.number(variant)))
        report = reports.get(key("report", slot))
        if report is not None:
            reported.add(slot)
            loaded = json.loads(report)
            direct.append((_order(loaded.get("rank"), slot), loaded["results"]))
            if loaded.get("node") is not None:
                summaries.append(loaded["node"])
    # the members a leader relayed: slots after rank 0's own, in the order their nodes came
    folds, number = [], slots
    for summary in summaries:
        shared = [variants.number(v) for v in summary.get("variants") or []]
        for member in summary.get("members") or []:
            number += 1
            if member.get("member") in seen:
                continue
            seen.add(member.get("member"))
            if member.pop("reported", False):
                reported.add(number)
            members.append(dict(member, slot=number, variant=shared[member.get("variant", 0)]))
        folds.append(Fold.from_dict(summary["fold"]))
    direct.sort(key=lambda pair: pair[0])
    folds.append(fold((CheckResult.from_dict(d) for _, results in direct for d in results),
                      per_rank))
    gathered = Gathered(world_size, members, reported, local_world_size, expect=expect,
                        variants=variants.values)
    included = sorted(slot for slot in reported if slot <= slots)
    return Read(gathered, merge(folds, per_rank), included,
                sorted(str(s.get("host")) for s in summaries))


def _order(rank: Any, slot: int) -> tuple[int, int]:
    return (rank if isinstance(rank, int) else 1 << 30, slot)


def gather_job(session: ClusterSession, job: Job, own: FamilyOutput) -> Findings:
    """Rank 0: gather every process's checks and add the job-wide ones, for the job report;
    the others learn its verdict through ``Findings.conclude`` once it is printed."""
    per_node = job.layout.local_world_size or job.ctx.gpus_per_node
    read = read_gathered(session, job.expect.declared, per_node, job.clock.gather_end,
                         job.expect, job.per_rank)
    return findings_of(session, job, read, own)


def findings_of(session: ClusterSession, job: Job, read: Read, own: FamilyOutput) -> Findings:
    """The job report's findings from what rank 0 read: the folded results, the job-wide
    checks and rows, and ``context.cluster``."""
    with paused_gc():
        return _findings(session, job, read, own)


def _findings(session: ClusterSession, job: Job, read: Read, own: FamilyOutput) -> Findings:
    folded = read.folded
    if not folded.results:  # rank 0's own report is always there unless the store misbehaved
        folded = fold(own.checks, job.per_rank)
    job_checks = _job_checks(session, job, read.gathered, folded)
    # In the table the cluster rows point at the ranks they are about, not at rank 0.
    shown = rows(folded, _scopes()) + [
        dataclasses.replace(c, host=c.details.get("where") or c.host) for c in job_checks]
    return Findings(folded.entries() + job_checks, own.bench, rows=shown,
                    cluster=dict(cluster_context(read.gathered, shown, job.per_rank),
                                 relayed_hosts=len(read.relayed)),
                    session=session, included=read.included)


def _job_checks(session: ClusterSession, job: Job, gathered: Gathered,
                folded: Fold) -> list[CheckResult]:
    """cluster.store and the cluster.* checks over what every process announced and reported."""
    gathered.nccl_by_host = dict(folded.nccl)
    store_row = passed(STORE, f"store at {session.address}:{session.port} hosted by "
                       f"rank 0 on {job.ctx.host}; {len(gathered.members)} process(es) connected",
                       address=session.address, port=session.port,
                       connected=len(gathered.members))
    checks = [store_row] + job_checks(gathered)
    for check in checks:
        check.host = job.ctx.host
    return checks


def _scopes() -> dict[str, str]:
    return {f.name: getattr(f, "scope", "rank") for f in FAMILIES}


def cluster_context(gathered: Gathered, shown: list[CheckResult],
                    per_rank: bool = False) -> dict[str, Any]:
    """The report's ``context.cluster``: who connected and reported, the processes (every
    one with ``per_rank``, else those with a problem; each once) and the job-wide rows."""
    hosts: dict[str, list[int]] = {}
    for m in gathered.members:
        rank = m.get("rank")
        hosts.setdefault(m.get("host") or "unknown host", [])
        if isinstance(rank, int) and not isinstance(rank, bool):
            hosts[m.get("host") or "unknown host"].append(rank)
    return {
        "world_size": gathered.world_size,
        "expected_processes": gathered.expect.launch if gathered.expect else None,
        "connected": len(gathered.members),
        "reported": len(gathered.reported_slots),
        "hosts": by_host(((h, r) for h, rs in hosts.items() for r in rs), limit=1 << 20),
        "ranks_by_host": {h: rank_ranges(rs) for h, rs in hosts.items()},
        "processes_listed": "all" if per_rank else "with a problem",
        "processes": processes(gathered, everyone=per_rank),
        "rows": [r.to_dict() for r in shown],
    }
