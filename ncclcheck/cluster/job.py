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

from .alone import await_verdict, findings_alone, lost_store
from .clock import JobClock
from .expect import claimed_rank, expectation
from .gather import gather_job
from .identity import identity
from .node import NodeHub, filled_ranks, join_hub, open_hub, relays
from .session import ClusterSession, join_store, key
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
                extra_checks: list[CheckResult] | None = None,
                per_rank: bool = False) -> Findings:
    """Run the job-wide check on this rank: rank 0 finds the job's checks, a process left out
    of its report finds its own, and the others get rank 0's verdict (a node leader passes it
    on to the ranks it relays)."""
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")  # c10d's retry chatter is not ours to print
    job = Job(families, ctx, layout, JobClock(ctx.started, ctx.timeout),
              list(extra_checks or []), int(claimed_rank(layout, ctx.env)),
              expectation(layout, ctx.env, ctx.nodes, ctx.gpus_per_node), per_rank)
    port = store_port(layout, port_option)
    hub = _open_hub(job, port)
    try:
        session = _connect(job, port, hub is None)
    except StoreUnavailable as exc:
        return _handed_on(hub, findings_alone(job, exc), [])
    return _run(job, session, hub)


def _run(job: Job, session: ClusterSession, hub: NodeHub | None) -> Findings:
    probed, included = None, []
    try:
        if session.reporting:  # when rank 0 gives up waiting, as a wall-clock time the others can read
            session.store.set(key("deadline"), repr(job.clock.gather_end_wall()))
        session.announce(identity(job.layout, job.ctx.host, job.ctx.env, rank=job.rank))
        probed = probe(job, session)
        results = [r.to_dict() for r in probed.checks]
        if hub is None:
            session.deliver(results)
        else:  # this rank's results go with its node's, in one summary
            summary, included = hub.collect(job.clock.relay_end, job.per_rank, results)
            session.deliver([], summary, filled_ranks(summary))
    except RuntimeError as exc:  # DistNetworkError: rank 0, and the store with it, went away
        if session.reporting:
            raise
        return _handed_on(hub, findings_alone(job, lost_store(session, exc), probed), [])
    if not session.reporting:
        return _handed_on(hub, await_verdict(session, job, probed), included)
    return gather_job(session, job, probed)


def _handed_on(hub: NodeHub | None, found: Findings, included: list[int]) -> Findings:
    """A node leader tells the ranks it relays what became of the node's report."""
    if hub is not None:
        hub.pass_on(found, included)
    return found


def _mine(job: Job) -> dict:
    """This rank's place, as its sessions hold it."""
    return dict(rank=job.rank, world_size=job.expect.declared,
                local_rank=_local_rank(job.layout, job.rank), node_rank=job.layout.node_rank,
                host=job.ctx.host, nodes=_nodes(job.layout))


def _open_hub(job: Job, port: int | None) -> NodeHub | None:
    """A node leader's own store for the other ranks of its node, when the job relays. Never
    on rank 0, whose port it is (MASTER_ADDR may reach rank 0's host through an address that
    is not its own, a NAT or a service address)."""
    if port is None or job.rank == 0 or _mine(job)["local_rank"] != 0 or not relays(job):
        return None
    return open_hub(job, _mine(job), port)


def _connect(job: Job, port: int | None, may_relay: bool) -> ClusterSession:
    """This rank's session: on its node leader's store when the node relays (and a leader
    answers in time), else on rank 0's."""
    address, rank = job.layout.master_addr, job.rank
    if not address or port is None:
        raise StoreUnavailable(
            Category.CONFIGURATION, "job-wide checks not run: without MASTER_ADDR and "
            "MASTER_PORT (or --store-port) the ranks cannot meet rank 0; this report covers "
            "this process only", "Export MASTER_ADDR=<rank-0 host> and MASTER_PORT=<free "
            "port> on every rank (mpirun -x MASTER_ADDR -x MASTER_PORT), or pass "
            "--store-port PORT.", master_addr=address, port=port)
    mine = _mine(job)
    if may_relay and mine["local_rank"] != 0 and relays(job):
        store = join_hub(port, job.clock.node_join_end)
        if store is not None:
            return ClusterSession(store, address="127.0.0.1", port=port, relayed=True, **mine)
    store, reporting = join_store(address, port, rank, job.clock.connect_s(rank == 0),
                                  reach_until=job.clock.join_end)
    return ClusterSession(store, address=address, port=port, reporting=reporting, **mine)


def _nodes(layout: Layout) -> int | None:
    """How many nodes the launch has, when it says."""
    if layout.num_nodes:
        return layout.num_nodes
    if layout.world_size and layout.local_world_size:
        return -(-layout.world_size // layout.local_world_size)
    return None


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
