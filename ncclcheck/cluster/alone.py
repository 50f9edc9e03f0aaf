"""Every rank tells its own story when it is not in rank 0's job report.

A process that cannot join the job (no rendezvous address, a name that does not resolve, a
port that is taken, a store it cannot reach, a store that went away) or whose report rank 0
closed the job report without, runs its own checks (or keeps those it already ran) and
prints its own full report, with the reason as a ``cluster.store`` row naming address and
port. The node that cannot reach the store is usually the broken one, and its own checks say
why.
"""

from __future__ import annotations

import dataclasses
import json

from ncclcheck.model import Category, CheckResult, FamilyOutput, failed, warned
from ncclcheck.probes import probe_families
from ncclcheck.probes.cluster.store import STORE

from .session import ClusterSession, key
from .state import Findings, Job, Verdict
from .store_errors import StoreUnavailable


def findings_alone(job: Job, reason: StoreUnavailable,
                   probed: FamilyOutput | None = None) -> Findings:
    """This process's own checks with ``reason`` as the ``cluster.store`` row, for its own
    report; runs the families here (within the deadline that is left) unless they already ran."""
    verdict = warned if reason.category == Category.CONFIGURATION else failed
    row = verdict(STORE, reason.message, reason.fix, reason.category, **reason.details)
    if probed is None:
        alone = dataclasses.replace(job.ctx, timeout=job.clock.probe_budget_s, cluster=None)
        probed = probe_families(job.families, alone)
        probed.checks += job.extra_checks
    checks: list[CheckResult] = list(probed.checks) + [row]
    for result in checks:
        result.host = result.host or job.ctx.host
        result.rank = job.rank
    why = (f"ncclcheck: {job.me}: not in a job report from rank 0 ({reason.message}) "
           f"[{reason.category.value}]; this process's own report is above")
    return Findings(checks, probed.bench, alone=why)


def lost_store(session: ClusterSession, exc: BaseException) -> StoreUnavailable:
    """The store went away under this rank: rank 0 (or the node leader it reports through)
    died or its host dropped."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if session.relayed:
        return StoreUnavailable(
            Category.RANK_CRASHED,
            f"lost its node leader's store at {session.address}:{session.port} (LOCAL_RANK 0 "
            f"on this host, through which it reports to rank 0) before the job report "
            f"({first})", "Look at the output of this node's LOCAL_RANK 0 and the launcher's "
            "log for why it stopped (exit code, OOM killer, signal).",
            address=session.address, port=session.port, error=first)
    return StoreUnavailable(
        Category.RANK_CRASHED,
        f"lost the rank-0 store at {session.address}:{session.port} before the job report "
        f"({first})", "Look at rank 0's output and the launcher's log on its host for why it "
        "stopped (exit code, OOM killer, signal).",
        address=session.address, port=session.port, error=first)


def await_verdict(session: ClusterSession, job: Job, probed: FamilyOutput) -> Findings:
    """Other ranks: wait for rank 0's verdict until the deadline plus grace. In the job report:
    one line and the job's exit status. Not in it (no verdict, late, store lost): this
    process's own checks, for its own report."""
    try:
        arrived = session.wait([key("done")], job.clock.verdict_wait_s())
        verdict = json.loads(session.store.multi_get([key("done")])[0]) if arrived else None
        if verdict is not None:
            session.store.add(key("left"), 1)
    except RuntimeError as exc:  # the store went away: rank 0 died or its host dropped
        return findings_alone(job, lost_store(session, exc), probed)
    where = f"{session.address}:{session.port}"
    store = "its node leader's store" if session.relayed else "rank 0's store"
    if verdict is not None and verdict.get("why"):  # the node leader has no job report either
        return findings_alone(job, StoreUnavailable(
            Category(verdict.get("category") or "connection"),
            f"its node leader (LOCAL_RANK 0 on this host) is not in a job report from rank 0: "
            f"{verdict['why']}", "See the node leader's own report on this host's output.",
            address=session.address, port=session.port), probed)
    if verdict is None:
        return findings_alone(job, StoreUnavailable(
            Category.CONNECTION, f"{store} at {where} gave no job report within the "
            f"{job.clock.timeout:g} s deadline", "See rank 0's output; if rank 0 starts much "
            "later than this rank, raise --timeout.", address=session.address,
            port=session.port), probed)
    if session.slot not in verdict.get("included", [session.slot]):
        return findings_alone(job, StoreUnavailable(
            Category.CONNECTION, f"this report reached {store} at {where} after the job "
            "report had been closed at its deadline", "Start every rank at about the same "
            "time, or raise --timeout so that late ranks are gathered.",
            address=session.address, port=session.port), probed)
    return Findings(verdict=Verdict(int(verdict["exit"]), f"ncclcheck: {job.me}: reported to "
                                    f"rank 0; job status {verdict['status']} (exit "
                                    f"{verdict['exit']}); the report is on rank 0's output",
                                    str(verdict["status"])))
