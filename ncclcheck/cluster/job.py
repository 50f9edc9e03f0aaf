"""Cluster mode end to end: connect, probe, publish, gather at rank 0, one job report.

Timeline for ``--timeout T`` (seconds since each process started):
  0 .. T - reserve   connect to the store, run the probe families, publish the report
  .. T - margin      rank 0 waits for every rank's report, then aggregates and prints
  T + grace          other ranks stop waiting for rank 0's verdict (their exit is then 1)
Every rank exits with the job-wide status rank 0 published, so the launcher fails the step
when any node is bad.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
import time
from typing import Any, Mapping

from ncclcheck.context import ProbeContext
from ncclcheck.launchers import Layout, read_layout
from ncclcheck.model import Category, CheckResult, Report, exit_code, failed, passed, warned
from ncclcheck.report import render, render_junit

from .aggregate import aggregate, by_host
from .checks import Gathered, cluster_checks
from .identity import identity
from .session import STORE_THREAD, ClusterSession, StoreUnavailable, join_store, key

CLIENT_GRACE_S = 5.0  # other ranks wait this long past their own deadline for rank 0
ACK_WAIT_S = 2.0  # rank 0 keeps the store up this long for ranks still reading the verdict


def cluster_layout(env: Mapping[str, str]) -> Layout | None:
    """The launcher's layout when this process is one of several ranks, else None."""
    layout, _ = read_layout(env)
    if layout.world_size is None or layout.world_size <= 1 or layout.rank is None:
        return None
    return layout


def store_port(layout: Layout, option: int | None) -> int | None:
    """--store-port, else MASTER_PORT; under torchrun MASTER_PORT + 1, because torchrun's own
    agent already listens on MASTER_PORT."""
    if option:
        return option
    if layout.master_port is None:
        return None
    if layout.launcher == "torchrun":
        return layout.master_port + 1 if layout.master_port < 65535 else layout.master_port - 1
    return layout.master_port


def reserve_s(timeout: float) -> float:
    """Time kept back from the probes for publishing and gathering."""
    return min(5.0, max(0.5, 0.1 * timeout))


def margin_s(timeout: float) -> float:
    """Time kept back from rank 0's gather for aggregating and printing."""
    return min(2.0, max(0.25, 0.05 * timeout))


@dataclasses.dataclass
class Outcome:
    """What one rank does at the end: print (rank 0) or note (others), and exit."""

    code: int
    stdout: str | None = None
    note: str | None = None


def run_cluster(families: list[str], ctx: ProbeContext, layout: Layout, fmt: str,
                junit: str | None, strict: bool) -> int:
    """Run the job-wide check on this rank; returns the job's exit code.

    When a store client that never connected is still retrying inside torch, an interpreter
    shutdown under it aborts the process (exit 134 instead of 1), so then the exit is
    immediate, after flushing."""
    outcome = cluster_outcome(families, ctx, layout, fmt, junit, strict)
    if outcome.stdout is not None:
        sys.stdout.write(outcome.stdout + "\n")
    if outcome.note:
        sys.stderr.write(outcome.note + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    if any(t.name == STORE_THREAD and t.is_alive() for t in threading.enumerate()):
        os._exit(outcome.code)
    return outcome.code


def cluster_outcome(families: list[str], ctx: ProbeContext, layout: Layout, fmt: str,
                    junit: str | None, strict: bool) -> Outcome:
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")  # c10d's retry chatter is not ours to print
    rank, port = int(layout.rank), store_port(layout, ctx.option("store_port"))
    address = layout.master_addr
    me = f"rank {rank} ({ctx.host})"
    try:
        if not address or port is None:
            raise StoreUnavailable(
                Category.CONFIGURATION, "job-wide checks not run: without MASTER_ADDR and "
                "MASTER_PORT (or --store-port) the ranks cannot meet rank 0; this report covers "
                "this process only", "Export MASTER_ADDR=<rank-0 host> and MASTER_PORT=<free "
                "port> on every rank (mpirun -x MASTER_ADDR -x MASTER_PORT), or pass "
                "--store-port PORT.", master_addr=address, port=port)
        import torch.distributed  # noqa: F401  (seconds on a loaded host; not the store's fault)
        connect_s = max(0.5, ctx.remaining() - (margin_s(ctx.timeout) if rank == 0 else 0.0))
        store, reporting = join_store(address, port, rank, connect_s)
    except StoreUnavailable as exc:
        return _store_failure(families, ctx, layout, exc, fmt, junit, strict, me)
    session = ClusterSession(store, rank, int(layout.world_size), _local_rank(layout),
                             layout.node_rank, ctx.host, address, port, reporting=reporting)
    try:
        if reporting:  # when rank 0 gives up waiting, as a wall-clock time the others can read
            store.set(key("deadline"), repr(time.time() + ctx.remaining() - margin_s(ctx.timeout)))
        session.announce(identity(layout, ctx.host, ctx.env))
        results, bench = probe(families, ctx, session)
        session.store.set(key("report", session.slot), json.dumps(
            {"rank": rank, "results": [r.to_dict() for r in results]}))
        session.store.add(key("reported"), 1)
    except RuntimeError as exc:  # DistNetworkError: rank 0, and the store with it, went away
        if session.reporting:
            raise
        return _lost_store(session, me, exc)
    if not session.reporting:
        return _await_verdict(session, ctx, me)
    return _report_job(session, ctx, layout, results, bench, fmt, junit, strict)


def _lost_store(session: ClusterSession, me: str, exc: BaseException) -> Outcome:
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


def probe(families: list[str], ctx: ProbeContext,
          session: ClusterSession) -> tuple[list[CheckResult], dict[str, Any] | None]:
    """Run this rank's share of the families: rank-scope everywhere, node-scope on leaders."""
    from ncclcheck.probes import FAMILIES, run_families
    names = [f.name for f in FAMILIES if f.name in families
             and (f.scope != "node" or session.is_node_leader)]
    budget = max(0.1, ctx.timeout - reserve_s(ctx.timeout))
    probing = dataclasses.replace(ctx, timeout=budget, cluster=session)
    results = run_families(names, probing)
    for result in results:
        result.host = result.host or ctx.host
        result.rank = session.rank
    return results, probing.options.get("bench_data")


def _verdict_wait_s(session: ClusterSession, ctx: ProbeContext) -> float:
    """Until this rank's own deadline plus grace; longer when rank 0 started later and so
    gathers later (its deadline, on its clock), but never past twice the timeout."""
    own = ctx.remaining() + CLIENT_GRACE_S
    if not session.store.check([key("deadline")]):
        return own
    rank0 = float(session.store.multi_get([key("deadline")])[0]) - time.time() + CLIENT_GRACE_S
    return max(own, min(rank0, own + ctx.timeout))


def _await_verdict(session: ClusterSession, ctx: ProbeContext, me: str) -> Outcome:
    """Other ranks: wait for rank 0's verdict until the deadline (plus grace), then leave."""
    try:
        arrived = session.wait([key("done")], _verdict_wait_s(session, ctx))
        verdict = json.loads(session.store.multi_get([key("done")])[0]) if arrived else None
        if verdict is not None:
            session.store.add(key("left"), 1)
    except RuntimeError as exc:  # the store went away: rank 0 died or its host dropped
        return _lost_store(session, me, exc)
    if verdict is None:
        return Outcome(1, note=f"ncclcheck: {me}: rank 0 gave no job report within the "
                       f"{ctx.timeout:g} s deadline; exit 1 (see rank 0's output)")
    return Outcome(int(verdict["exit"]), note=f"ncclcheck: {me}: reported to rank 0; job status "
                   f"{verdict['status']} (exit {verdict['exit']}); the report is on rank 0's output")


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


def _report_job(session: ClusterSession, ctx: ProbeContext, layout: Layout,
                own: list[CheckResult], bench: dict[str, Any] | None, fmt: str,
                junit: str | None, strict: bool) -> Outcome:
    deadline = ctx.deadline - margin_s(ctx.timeout)
    per_node = layout.local_world_size or ctx.gpus_per_node
    job, reports = _read_gathered(session, session.world_size, per_node, deadline)
    everything: list[CheckResult] = []
    for slot in sorted(reports, key=lambda s: _slot_rank(job, s)):
        everything += [CheckResult.from_dict(d) for d in reports[slot]]
    if not reports:  # rank 0's own report is always there unless the store misbehaved
        everything = own
    job.nccl_by_host = {r.host: str(r.details["version"]) for r in everything
                        if r.id == "nccl.version" and r.host and r.details.get("version")}
    store_row = passed("cluster.store", f"store at {session.address}:{session.port} hosted by "
                       f"rank 0 on {ctx.host}; {len(job.members)} process(es) connected",
                       address=session.address, port=session.port, connected=len(job.members))
    job_checks = [store_row] + cluster_checks(job)
    for check in job_checks:
        check.host = ctx.host
    # In the table the cluster rows point at the ranks they are about, not at rank 0.
    rows = aggregate(everything, _scopes()) + [
        dataclasses.replace(c, host=c.details.get("where") or c.host) for c in job_checks]
    context = _context(ctx, everything, job, rows)
    table_report = Report(rows, context, bench)
    code = exit_code(table_report.checks, strict)
    if junit:
        with open(junit, "w", encoding="utf-8") as handle:
            handle.write(render_junit(table_report))
    shown = Report(everything + job_checks, context, bench) if fmt == "json" else table_report
    # Print before telling the others: once a rank exits 1, torchrun may SIGTERM this one.
    sys.stdout.write(render(shown, fmt) + "\n")
    sys.stdout.flush()
    session.store.set(key("done"), json.dumps({"exit": code, "status": table_report.status}))
    _let_ranks_leave(session, len(reports) - 1)
    return Outcome(code)


def _slot_rank(job: Gathered, slot: int) -> tuple[int, int]:
    member = next((m for m in job.members if m.get("slot") == slot), {})
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


def _context(ctx: ProbeContext, results: list[CheckResult], job: Gathered,
             rows: list[CheckResult]) -> dict[str, Any]:
    from ncclcheck.runner import report_context
    context = report_context(ctx, results)
    hosts: dict[str, list[int]] = {}
    for m in job.members:
        hosts.setdefault(m.get("host") or "unknown host", []).append(m.get("rank"))
    context["cluster"] = {
        "world_size": job.world_size,
        "connected": len(job.members),
        "reported": len(job.reported_slots),
        "hosts": by_host(((m.get("host"), m.get("rank")) for m in job.members), limit=1 << 20),
        "ranks_by_host": {h: sorted(r for r in rs if isinstance(r, int)) for h, rs in hosts.items()},
        "rows": [r.to_dict() for r in rows],
    }
    return context


def _store_failure(families: list[str], ctx: ProbeContext, layout: Layout,
                   exc: StoreUnavailable, fmt: str, junit: str | None, strict: bool,
                   me: str) -> Outcome:
    """A rank that cannot join the job says so itself.

    Before any contact (no rendezvous address, or one that does not resolve) there is no job
    to report on from any rank, so each process reports on itself, with the reason as
    ``cluster.store``; so does rank 0 when its port is taken. A rank that waited for the store
    until its deadline has no time left to probe: rank 0 prints the one failing check, the
    others one line on stderr; both exit 1."""
    alone = exc.category in (Category.CONFIGURATION, Category.NAME_RESOLUTION) or (
        layout.rank == 0 and exc.category == Category.PORT_IN_USE)
    if not alone and layout.rank != 0:
        return Outcome(1, note=f"ncclcheck: {me}: {exc.message} [{exc.category.value}] — "
                       f"{exc.fix}")
    verdict = warned if exc.category == Category.CONFIGURATION else failed
    row = verdict("cluster.store", exc.message, exc.fix, exc.category, **exc.details)
    row.host, row.rank = ctx.host, layout.rank
    from ncclcheck.probes import run_families
    from ncclcheck.runner import report_context
    results = (run_families(families, ctx) if alone else []) + [row]
    report = Report(results, report_context(ctx, results), ctx.options.get("bench_data"))
    if junit:
        with open(junit, "w", encoding="utf-8") as handle:
            handle.write(render_junit(report))
    return Outcome(exit_code(report.checks, strict), stdout=render(report, fmt))


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
