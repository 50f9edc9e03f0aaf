"""Cluster mode end to end: connect, probe, publish, gather at rank 0, one job report.

The phases and their deadlines are in ``clock.py``; the report is built, printed and turned
into an exit code by the same functions as on one process (``ncclcheck.runner``). Every rank
exits with the job-wide status rank 0 published, so the launcher fails the step when any node
is bad.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import TYPE_CHECKING, Any, Mapping

from ncclcheck.context import ProbeContext
from ncclcheck.launchers import Layout, read_layout
from ncclcheck.model import Category, CheckResult, FamilyOutput, failed, passed, warned

from .aggregate import aggregate, by_host
from .checks import Gathered, cluster_checks
from .clock import JobClock
from .identity import identity
from .session import ClusterSession, StoreUnavailable, join_store, key

if TYPE_CHECKING:
    from ncclcheck.runner import Outcome, Output

ACK_WAIT_S = 2.0  # rank 0 keeps the store up this long for ranks still reading the verdict


def cluster_layout(env: Mapping[str, str]) -> Layout | None:
    """The launcher's layout when this process is one of several ranks, else None."""
    layout, _ = read_layout(env)
    if layout.world_size is None or layout.world_size <= 1 or layout.rank is None:
        return None
    return layout


def store_port(layout: Layout, option: int | None) -> int | None:
    """--store-port, else the launcher's default (see ``Layout.default_store_port``)."""
    return option or layout.default_store_port()


@dataclasses.dataclass
class Job:
    """What every phase of this rank's run needs: the families, the context, the launcher's
    layout, the deadlines, where the report goes, and this process's own extra checks."""

    families: list[str]
    ctx: ProbeContext
    layout: Layout
    clock: JobClock
    output: "Output"
    extra_checks: list[CheckResult]

    @property
    def me(self) -> str:
        return f"rank {self.layout.rank} ({self.ctx.host})"


def run_cluster(families: list[str], ctx: ProbeContext, layout: Layout, output: "Output",
                port_option: int | None = None,
                extra_checks: list[CheckResult] | None = None) -> "Outcome":
    """Run the job-wide check on this rank; rank 0's outcome holds the job's report."""
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")  # c10d's retry chatter is not ours to print
    job = Job(families, ctx, layout, JobClock(ctx.started, ctx.timeout), output,
              list(extra_checks or []))
    try:
        session = _connect(job, store_port(layout, port_option))
    except StoreUnavailable as exc:
        return _store_failure(job, exc)
    try:
        if session.reporting:  # when rank 0 gives up waiting, as a wall-clock time the others can read
            session.store.set(key("deadline"), repr(job.clock.gather_end_wall()))
        session.announce(identity(layout, ctx.host, ctx.env))
        probed = probe(job, session)
        session.store.set(key("report", session.slot), json.dumps(
            {"rank": session.rank, "results": [r.to_dict() for r in probed.checks]}))
        session.store.add(key("reported"), 1)
    except RuntimeError as exc:  # DistNetworkError: rank 0, and the store with it, went away
        if session.reporting:
            raise
        return _lost_store(session, job.me, exc)
    if not session.reporting:
        return _await_verdict(session, job)
    return _report_job(session, job, probed)


def _connect(job: Job, port: int | None) -> ClusterSession:
    layout, address, rank = job.layout, job.layout.master_addr, int(job.layout.rank)
    if not address or port is None:
        raise StoreUnavailable(
            Category.CONFIGURATION, "job-wide checks not run: without MASTER_ADDR and "
            "MASTER_PORT (or --store-port) the ranks cannot meet rank 0; this report covers "
            "this process only", "Export MASTER_ADDR=<rank-0 host> and MASTER_PORT=<free "
            "port> on every rank (mpirun -x MASTER_ADDR -x MASTER_PORT), or pass "
            "--store-port PORT.", master_addr=address, port=port)
    import torch.distributed  # noqa: F401  (seconds on a loaded host; not the store's fault)
    store, reporting = join_store(address, port, rank, job.clock.connect_s(rank == 0))
    return ClusterSession(store, rank, int(layout.world_size), _local_rank(layout),
                          layout.node_rank, job.ctx.host, address, port, reporting=reporting)


def _lost_store(session: ClusterSession, me: str, exc: BaseException) -> "Outcome":
    from ncclcheck.runner import Outcome
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return Outcome(1, note=f"ncclcheck: {me}: lost the rank-0 store at {session.address}:"
                   f"{session.port} before the job report ({first}) [rank_crashed]; exit 1")


def _local_rank(layout: Layout) -> int:
    """LOCAL_RANK, else derived from the per-node count; unknown -> 0, so that every process
    runs the node checks rather than a node going unchecked."""
    if layout.local_rank is not None:
        return layout.local_rank
    if layout.local_world_size:
        return int(layout.rank) % layout.local_world_size
    return 0


def probe(job: Job, session: ClusterSession) -> FamilyOutput:
    """Run this rank's share of the families: rank-scope everywhere, node-scope on leaders."""
    from ncclcheck.probes import FAMILIES, probe_families
    names = [f.name for f in FAMILIES if f.name in job.families
             and (f.scope != "node" or session.is_node_leader)]
    probing = dataclasses.replace(job.ctx, timeout=job.clock.probe_budget_s, cluster=session)
    probed = probe_families(names, probing)
    probed.checks += job.extra_checks
    for result in probed.checks:
        result.host = result.host or job.ctx.host
        result.rank = session.rank
    return probed


def _await_verdict(session: ClusterSession, job: Job) -> "Outcome":
    """Other ranks: wait for rank 0's verdict until the deadline (plus grace), then leave."""
    from ncclcheck.runner import Outcome
    try:
        rank0_end = (float(session.store.multi_get([key("deadline")])[0])
                     if session.store.check([key("deadline")]) else None)
        arrived = session.wait([key("done")], job.clock.verdict_wait_s(rank0_end))
        verdict = json.loads(session.store.multi_get([key("done")])[0]) if arrived else None
        if verdict is not None:
            session.store.add(key("left"), 1)
    except RuntimeError as exc:  # the store went away: rank 0 died or its host dropped
        return _lost_store(session, job.me, exc)
    if verdict is None:
        return Outcome(1, note=f"ncclcheck: {job.me}: rank 0 gave no job report within the "
                       f"{job.clock.timeout:g} s deadline; exit 1 (see rank 0's output)")
    return Outcome(int(verdict["exit"]), note=f"ncclcheck: {job.me}: reported to rank 0; job "
                   f"status {verdict['status']} (exit {verdict['exit']}); the report is on rank "
                   "0's output")


def _read_gathered(session: ClusterSession, world_size: int,
                   local_world_size: int | None, deadline: float) -> tuple[Gathered, dict[int, list]]:
    """Rank 0: wait for the reports until ``deadline``, then read every announcement and
    report in one multi_get each (O(ranks))."""
    store = session.store
    while store.add(key("reported"), 0) < world_size and time.monotonic() < deadline:
        time.sleep(0.05)
    slots = store.add(key("slots"), 0)
    hello_keys = [key("hello", s) for s in range(1, slots + 1)]
    report_keys = [key("report", s) for s in range(1, slots + 1)]
    hellos = session.read_present(hello_keys, 0.5 if slots else 0)
    reports = session.read_present(report_keys, 0)
    members = []
    for slot in range(1, slots + 1):
        raw = hellos.get(key("hello", slot))
        if raw is not None:
            members.append(dict(json.loads(raw), slot=slot))
    results: dict[int, list] = {}
    for slot in range(1, slots + 1):
        raw = reports.get(key("report", slot))
        if raw is not None:
            results[slot] = json.loads(raw)["results"]
    return Gathered(world_size, members, set(results), local_world_size), results


def _job_checks(session: ClusterSession, job: Job, gathered: Gathered,
                everything: list[CheckResult]) -> list[CheckResult]:
    """cluster.store and the cluster.* checks over what every rank announced and reported."""
    gathered.nccl_by_host = {r.host: str(r.details["version"]) for r in everything
                             if r.id == "nccl.version" and r.host and r.details.get("version")}
    store_row = passed("cluster.store", f"store at {session.address}:{session.port} hosted by "
                       f"rank 0 on {job.ctx.host}; {len(gathered.members)} process(es) connected",
                       address=session.address, port=session.port,
                       connected=len(gathered.members))
    checks = [store_row] + cluster_checks(gathered)
    for check in checks:
        check.host = job.ctx.host
    return checks


def _report_job(session: ClusterSession, job: Job, own: FamilyOutput) -> "Outcome":
    from ncclcheck.runner import Outcome, build_report, publish
    per_node = job.layout.local_world_size or job.ctx.gpus_per_node
    gathered, reports = _read_gathered(session, session.world_size, per_node,
                                       job.clock.gather_end)
    everything: list[CheckResult] = []
    for slot in sorted(reports, key=lambda s: _slot_rank(gathered, s)):
        everything += [CheckResult.from_dict(d) for d in reports[slot]]
    if not reports:  # rank 0's own report is always there unless the store misbehaved
        everything = own.checks
    job_checks = _job_checks(session, job, gathered, everything)
    # In the table the cluster rows point at the ranks they are about, not at rank 0.
    rows = aggregate(everything, _scopes()) + [
        dataclasses.replace(c, host=c.details.get("where") or c.host) for c in job_checks]
    report = build_report(job.ctx, everything + job_checks, own.bench, rows=rows,
                          cluster=_cluster_context(gathered, rows))
    # Print before telling the others: once a rank exits 1, torchrun may SIGTERM this one.
    code = publish(report, job.output)
    session.store.set(key("done"), json.dumps({"exit": code, "status": report.status}))
    _let_ranks_leave(session, len(reports) - 1)
    return Outcome(code, report)


def _slot_rank(gathered: Gathered, slot: int) -> tuple[int, int]:
    member = next((m for m in gathered.members if m.get("slot") == slot), {})
    rank = member.get("rank")
    return (rank if isinstance(rank, int) else 1 << 30, slot)


def _let_ranks_leave(session: ClusterSession, waiting: int) -> None:
    """Keep the store (it lives in this process) up until the waiting ranks read the verdict."""
    stop = time.monotonic() + ACK_WAIT_S
    while waiting > 0 and time.monotonic() < stop:
        if session.store.add(key("left"), 0) >= waiting:
            return
        time.sleep(0.02)


def _scopes() -> dict[str, str]:
    from ncclcheck.probes import FAMILIES
    return {f.name: getattr(f, "scope", "rank") for f in FAMILIES}


def _cluster_context(gathered: Gathered, rows: list[CheckResult]) -> dict[str, Any]:
    """The report's ``context.cluster``: who connected and reported, and the job-wide rows."""
    hosts: dict[str, list[int]] = {}
    for m in gathered.members:
        hosts.setdefault(m.get("host") or "unknown host", []).append(m.get("rank"))
    return {
        "world_size": gathered.world_size,
        "connected": len(gathered.members),
        "reported": len(gathered.reported_slots),
        "hosts": by_host(((m.get("host"), m.get("rank")) for m in gathered.members),
                         limit=1 << 20),
        "ranks_by_host": {h: sorted(r for r in rs if isinstance(r, int)) for h, rs in hosts.items()},
        "rows": [r.to_dict() for r in rows],
    }


def _store_failure(job: Job, exc: StoreUnavailable) -> "Outcome":
    """A rank that cannot join the job says so itself.

    Before any contact (no rendezvous address, or one that does not resolve) there is no job
    to report on from any rank, so each process reports on itself, with the reason as
    ``cluster.store``; so does rank 0 when its port is taken. A rank that waited for the store
    until its deadline has no time left to probe: rank 0 prints the one failing check, the
    others one line on stderr; both exit 1."""
    from ncclcheck.runner import Outcome, build_report, publish
    rank = job.layout.rank
    alone = exc.category in (Category.CONFIGURATION, Category.NAME_RESOLUTION) or (
        rank == 0 and exc.category == Category.PORT_IN_USE)
    if not alone and rank != 0:
        return Outcome(1, note=f"ncclcheck: {job.me}: {exc.message} [{exc.category.value}] — "
                       f"{exc.fix}")
    verdict = warned if exc.category == Category.CONFIGURATION else failed
    row = verdict("cluster.store", exc.message, exc.fix, exc.category, **exc.details)
    row.host, row.rank = job.ctx.host, rank
    probed = FamilyOutput()
    if alone:
        from ncclcheck.probes import probe_families
        probed = probe_families(job.families, job.ctx)
        probed.checks += job.extra_checks
    report = build_report(job.ctx, probed.checks + [row], probed.bench)
    return Outcome(publish(report, job.output), report)


# -- declarations: the row this module reports, for the registry (``ncclcheck checks``) --------
def _declarations():
    from ncclcheck.registry import CheckSpec

    return (
        CheckSpec("cluster.store", "the ranks met at rank 0's report store",
                  (Category.CONFIGURATION, Category.NAME_RESOLUTION, Category.PORT_IN_USE,
                   Category.CONNECTION),
                  fails_when="MASTER_ADDR does not resolve (name_resolution), rank 0 cannot "
                             "open the store because its port is taken (port_in_use) or "
                             "MASTER_ADDR is not its host, or a rank cannot reach the store "
                             "(connection)",
                  warns_when="MASTER_ADDR / MASTER_PORT are missing, so each process reports on "
                             "itself only",
                  doc="A process that cannot join the job prints its own report with this row "
                      "in it; rank 0's job report carries it as a passing row with the store's "
                      "address."),
    )


CHECKS = _declarations()
