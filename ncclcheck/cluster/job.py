"""Cluster mode end to end: connect, probe, publish, gather at rank 0, one job's findings.

The phases and their deadlines are in ``clock.py``. What a rank found goes back to
``ncclcheck.runner``, which builds, prints and publishes the report as it does for one process.
Every rank exits with the job-wide status rank 0 published, so the launcher fails the step when
any node is bad.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Mapping

from ncclcheck.context import ProbeContext
from ncclcheck.launchers import Layout, read_layout
from ncclcheck.model import Category, CheckResult, FamilyOutput
from ncclcheck.probes import FAMILIES, probe_families
from ncclcheck.registry import CheckSpec

from .alone import await_verdict, findings_alone, lost_store
from .clock import JobClock
from .expect import claimed_rank, expectation
from .gather import gather_job
from .identity import identity
from .session import STORE, ClusterSession, join_store, key
from .state import Findings, Job
from .store_errors import StoreUnavailable


def cluster_layout(env: Mapping[str, str]) -> Layout | None:
    """The launcher's layout when this process is one of several ranks, else None."""
    layout, _ = read_layout(env)
    if layout.world_size is None or layout.world_size <= 1 or claimed_rank(layout, env) is None:
        return None
    return layout


def store_port(layout: Layout, option: int | None) -> int | None:
    """--store-port, else the launcher's default (see ``Layout.default_store_port``)."""
    return option or layout.default_store_port()


def run_cluster(families: list[str], ctx: ProbeContext, layout: Layout,
                port_option: int | None = None,
                extra_checks: list[CheckResult] | None = None) -> Findings:
    """Run the job-wide check on this rank: rank 0 finds the job's checks, a process left out
    of its report finds its own, and the others get rank 0's verdict."""
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")  # c10d's retry chatter is not ours to print
    job = Job(families, ctx, layout, JobClock(ctx.started, ctx.timeout),
              list(extra_checks or []), int(claimed_rank(layout, ctx.env)),
              expectation(layout, ctx.env, ctx.nodes, ctx.gpus_per_node))
    try:
        session = _connect(job, store_port(layout, port_option))
    except StoreUnavailable as exc:
        return findings_alone(job, exc)
    probed = None
    try:
        if session.reporting:  # when rank 0 gives up waiting, as a wall-clock time the others can read
            session.store.set(key("deadline"), repr(job.clock.gather_end_wall()))
        session.announce(identity(layout, ctx.host, ctx.env, rank=job.rank))
        probed = probe(job, session)
        session.deliver([r.to_dict() for r in probed.checks])
    except RuntimeError as exc:  # DistNetworkError: rank 0, and the store with it, went away
        if session.reporting:
            raise
        return findings_alone(job, lost_store(session, exc), probed)
    if not session.reporting:
        return await_verdict(session, job, probed)
    return gather_job(session, job, probed)


def _connect(job: Job, port: int | None) -> ClusterSession:
    layout, address, rank = job.layout, job.layout.master_addr, job.rank
    if not address or port is None:
        raise StoreUnavailable(
            Category.CONFIGURATION, "job-wide checks not run: without MASTER_ADDR and "
            "MASTER_PORT (or --store-port) the ranks cannot meet rank 0; this report covers "
            "this process only", "Export MASTER_ADDR=<rank-0 host> and MASTER_PORT=<free "
            "port> on every rank (mpirun -x MASTER_ADDR -x MASTER_PORT), or pass "
            "--store-port PORT.", master_addr=address, port=port)
    store, reporting = join_store(address, port, rank, job.clock.connect_s(rank == 0),
                                  reach_until=job.clock.join_end)
    return ClusterSession(store, rank, job.expect.declared, _local_rank(layout, rank),
                          layout.node_rank, job.ctx.host, address, port, reporting=reporting)


def _local_rank(layout: Layout, rank: int) -> int:
    """LOCAL_RANK, else derived from the per-node count; unknown -> 0, so that every process
    runs the node checks rather than a node going unchecked."""
    if layout.local_rank is not None:
        return layout.local_rank
    if layout.local_world_size:
        return rank % layout.local_world_size
    return 0


def probe(job: Job, session: ClusterSession) -> FamilyOutput:
    """Run this rank's share of the families: rank-scope everywhere, node-scope on leaders."""
    names = [f.name for f in FAMILIES if f.name in job.families
             and (f.scope != "node" or session.is_node_leader)]
    probing = dataclasses.replace(job.ctx, timeout=job.clock.probe_budget_s, cluster=session)
    probed = probe_families(names, probing)
    probed.checks += job.extra_checks
    for result in probed.checks:
        result.host = result.host or job.ctx.host
        result.rank = session.rank
    return probed


# -- declarations: the row this module's phases report (declared with the store it is about),
# for the registry (``ncclcheck checks``)
CHECKS: tuple[CheckSpec, ...] = (STORE,)
