"""The bench family's facts: the sweep itself (standalone, or on every rank under a launcher)
and, with --isolate, the pair tests rank 0 leads; then everything the checks judge.

Standalone it starts its own ranks (one per local GPU for NCCL, --nproc for Gloo); under a
launcher every rank takes part and rank 0 reports for the job.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ncclcheck.bench.analysis import SweepResult, bench_section, job_rows
from ncclcheck.bench.isolate_report import section as isolate_section
from ncclcheck.bench.metrics import SizeRow
from ncclcheck.bench.options import BenchOptions, choose_backend, cuda_gpu_count
from ncclcheck.bench.pairs import Isolated, follow, lead, plan_setup
from ncclcheck.bench.progress import IsolateProgress, Progress
from ncclcheck.bench.reference import (Hardware, Reference, choose_reference, infiniband_rate,
                                       interface_speed)
from ncclcheck.bench.sizes import sweep_sizes
from ncclcheck.bench.sweep import absent_result, join_cluster, run_on_cluster, run_standalone
from ncclcheck.bench.worker import SweepConfig
from ncclcheck.context import ProbeContext
from ncclcheck.model import BenchSection


@dataclass
class BenchFacts:
    """What every bench check reads: the sweep, its job rows, the hardware and its reference,
    the report section (which the plot check completes) and the pair tests, if asked for."""

    ctx: ProbeContext
    options: BenchOptions
    result: SweepResult
    rows: list[SizeRow]
    hardware: Hardware
    reference: Reference | None
    section: BenchSection
    isolated: Isolated | None = None


class NcclWithoutGpu(Exception):
    """--backend nccl (asked, or chosen by auto) on a process that sees no GPU: no sweep."""


def measure(ctx: ProbeContext, fault: str) -> BenchFacts | None:
    """Run the sweep (and the pair tests); None when this process has nothing to judge (a
    rank that leaves the report to rank 0). Raises ``NcclWithoutGpu``."""
    opts: BenchOptions = ctx.options.bench
    result, isolated = _run(ctx, opts, fault)
    if result is None:
        return None
    rows = job_rows(result)
    hardware = _hardware(result, ctx)
    reference = choose_reference(hardware)
    section = bench_section(result, rows, reference)
    if isolated is not None and isolated.isolation is not None:
        section.isolate = isolate_section(isolated.isolation, isolated.hosts, isolated.nbytes)
    return BenchFacts(ctx, opts, result, rows, hardware, reference, section, isolated)


def _deadlines(ctx: ProbeContext) -> tuple[float, float]:
    """(end, collective timeout): the sweep is over by ``end`` (monotonic), with time to spare
    for teardown; one collective may take a fair share of what is left, never all of it."""
    margin = min(3.0, 0.1 * ctx.timeout)
    end = ctx.deadline - margin
    collective = min(120.0, max(1.0, (end - time.monotonic()) * 0.4))
    return end, collective


def _config(opts: BenchOptions, backend: str, collective: float, end: float,
            fault: str) -> SweepConfig:
    resolved = opts.resolved(backend)
    sizes = sweep_sizes(resolved.min_bytes, resolved.max_bytes, resolved.factor, resolved.dtype)
    wall_end = time.time() + (end - time.monotonic()) - 0.5
    return SweepConfig(backend, sizes, resolved.dtype, resolved.iters, resolved.warmup,
                       collective, wall_end, fault)


def _hardware(result: SweepResult, ctx: ProbeContext) -> Hardware:
    outcome = result.outcomes.get(0) or next(iter(result.outcomes.values()), {})
    hosts = result.hosts
    leader_host = outcome.get("host")
    nodes = len({h for h in hosts.values() if h}) or 1
    local = sum(1 for h in hosts.values() if h == leader_host) or 1
    return Hardware(result.backend, outcome.get("gpu_name"), local, nodes,
                    infiniband_rate() if nodes > 1 else None,
                    interface_speed(ctx.env) if nodes > 1 else None)


def _run(ctx: ProbeContext, opts: BenchOptions,
         fault: str) -> tuple[SweepResult | None, Isolated | None]:
    end, collective = _deadlines(ctx)
    if ctx.cluster is not None:
        return _run_on_cluster(ctx, opts, fault, end, collective)
    gpus = cuda_gpu_count(ctx.env)
    backend = choose_backend(opts.backend, gpus)
    if backend == "nccl" and gpus == 0:
        raise NcclWithoutGpu()
    nproc = gpus if backend == "nccl" else opts.nproc
    config = _config(opts, backend, collective, end, fault)
    progress = Progress(config.sizes, nproc, backend)
    budget = end - time.monotonic()
    try:
        result = run_standalone(config, nproc, dict(ctx.env), end, progress.update)
    finally:
        progress.close()
    result.budget_s = round(max(0.0, budget), 1)
    alone = Isolated(None, reason="standalone, every rank runs on this node; run it under the "
                     "job's launcher") if opts.isolate else None
    return result, alone


def _run_on_cluster(ctx: ProbeContext, opts: BenchOptions, fault: str, end: float,
                    collective: float) -> tuple[SweepResult | None, Isolated | None]:
    """The sweep on every rank, then with --isolate the pair tests (rank 0 leads them). The
    sweep is given 60% of the time when pair tests follow, so they always get a share."""
    session = ctx.cluster
    backend, missing = join_cluster(session, opts.backend, cuda_gpu_count(ctx.env), collective)
    sweep_end = end - 0.4 * max(0.0, end - time.monotonic()) if opts.isolate else end
    config = _config(opts, backend, collective, sweep_end, fault)
    if missing:  # the sweep would only wait for them: name them and stop
        if session.rank != 0:
            return None, None
        skipped = Isolated(None, reason="ranks never joined") if opts.isolate else None
        return absent_result(config, session.world_size, missing), skipped
    progress = (Progress(config.sizes, 1, backend, world_size=session.world_size)
                if session.rank == 0 else None)
    budget = sweep_end - time.monotonic()
    try:
        result = run_on_cluster(config, session, sweep_end,
                                progress.update if progress else None, bool(opts.isolate))
    finally:
        if progress:
            progress.close()
    if result is not None:
        result.budget_s = round(max(0.0, budget), 1)
    if not opts.isolate:
        return result, None
    if result is None:
        follow(session, end)
        return None, None
    setup = plan_setup(result, job_rows(result), config.iters, config.warmup,
                       max(1.0, min(collective, 0.5 * (end - time.monotonic()))))
    shown = IsolateProgress(getattr(setup, "hosts", []), opts.isolate)
    return result, lead(session, setup, opts.isolate, opts.isolate_threshold,
                            opts.min_busbw, end, shown.round)


