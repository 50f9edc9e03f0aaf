"""The bench family: an nccl-tests style all-reduce sweep, judged and put into the report.

Standalone it starts its own ranks (one per local GPU for NCCL, --nproc for Gloo); under a
launcher every rank takes part and rank 0 reports for the job. The sweep's table goes into the
report's `bench` section (returned beside the checks, as a ``FamilyOutput``); the verdicts are
the checks bench.allreduce, bench.busbw and bench.straggler.
"""

from __future__ import annotations

import time

from ncclcheck.bench.analysis import CHECKS as SWEEP_CHECKS
from ncclcheck.bench.analysis import (ALLREDUCE, SweepResult, allreduce_check, bench_section,
                                      busbw_check, job_rows, straggler_check)
from ncclcheck.bench.faults import FAULT_VARIABLE, parse_faults
from ncclcheck.bench.isolate_report import CHECKS as ISOLATE_CHECKS
from ncclcheck.bench.isolate_report import isolate_check, not_isolated
from ncclcheck.bench.isolate_report import section as isolate_section
from ncclcheck.bench.options import BenchOptions, choose_backend, cuda_gpu_count
from ncclcheck.bench.pairs import Isolated, follow, lead, plan_setup
from ncclcheck.bench.plot import draw
from ncclcheck.bench.progress import IsolateProgress, Progress
from ncclcheck.bench.reference import Hardware, choose_reference, infiniband_rate, interface_speed
from ncclcheck.bench.sizes import sweep_sizes
from ncclcheck.bench.sweep import absent_result, join_cluster, run_on_cluster, run_standalone
from ncclcheck.bench.worker import SweepConfig
from ncclcheck.context import ProbeContext
from ncclcheck.model import (BenchSection, Category, CheckResult, FamilyOutput, failed, passed,
                             warned)
from ncclcheck.registry import CheckSpec


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
         fault: str) -> tuple[SweepResult | None, list[CheckResult], Isolated | None]:
    end, collective = _deadlines(ctx)
    if ctx.cluster is not None:
        return _run_on_cluster(ctx, opts, fault, end, collective)
    gpus = cuda_gpu_count(ctx.env)
    backend = choose_backend(opts.backend, gpus)
    if backend == "nccl" and gpus == 0:
        return None, [failed(ALLREDUCE, "--backend nccl needs CUDA GPUs, but this "
                             "process sees none",
                             "Run on a GPU node (check CUDA_VISIBLE_DEVICES and nvidia-smi), or "
                             "use --backend gloo for a CPU check.", Category.CUDA,
                             backend="nccl")], None
    nproc = gpus if backend == "nccl" else opts.nproc
    config = _config(opts, backend, collective, end, fault)
    progress = Progress(config.sizes, nproc, backend)
    try:
        result = run_standalone(config, nproc, dict(ctx.env), end, progress.update)
    finally:
        progress.close()
    alone = Isolated(None, reason="standalone, every rank runs on this node; run it under the "
                     "job's launcher") if opts.isolate else None
    return result, [], alone


def _run_on_cluster(ctx: ProbeContext, opts: BenchOptions, fault: str, end: float,
                    collective: float) -> tuple[SweepResult | None, list[CheckResult],
                                                Isolated | None]:
    """The sweep on every rank, then with --isolate the pair tests (rank 0 leads them). The
    sweep is given 60% of the time when pair tests follow, so they always get a share."""
    session = ctx.cluster
    backend, missing = join_cluster(session, opts.backend, cuda_gpu_count(ctx.env), collective)
    sweep_end = end - 0.4 * max(0.0, end - time.monotonic()) if opts.isolate else end
    config = _config(opts, backend, collective, sweep_end, fault)
    if missing:  # the sweep would only wait for them: name them and stop
        if session.rank != 0:
            return None, [], None
        skipped = Isolated(None, reason="ranks never joined") if opts.isolate else None
        return absent_result(config, session.world_size, missing), [], skipped
    progress = (Progress(config.sizes, 1, backend, world_size=session.world_size)
                if session.rank == 0 else None)
    try:
        result = run_on_cluster(config, session, sweep_end,
                                progress.update if progress else None, bool(opts.isolate))
    finally:
        if progress:
            progress.close()
    if not opts.isolate:
        return result, [], None
    if result is None:
        follow(session, end)
        return None, [], None
    setup = plan_setup(result, job_rows(result), config.iters, config.warmup,
                       max(1.0, min(collective, 0.5 * (end - time.monotonic()))))
    shown = IsolateProgress(getattr(setup, "hosts", []), opts.isolate)
    return result, [], lead(session, setup, opts.isolate, opts.isolate_threshold,
                            opts.min_busbw, end, shown.round)


def probe(ctx: ProbeContext) -> FamilyOutput:
    opts: BenchOptions = ctx.options.bench
    fault = ctx.env.get(FAULT_VARIABLE, "")
    try:
        parse_faults(fault)
    except ValueError as exc:
        return FamilyOutput([failed(ALLREDUCE, str(exc), f"Unset {FAULT_VARIABLE}: it "
                                    "is for ncclcheck's own tests only.", Category.CONFIGURATION)])
    result, early, isolated = _run(ctx, opts, fault)
    if result is None:
        return FamilyOutput(early)
    rows = job_rows(result)
    hardware = _hardware(result, ctx)
    reference = choose_reference(hardware)
    section = bench_section(result, rows, reference)
    checks = [allreduce_check(result, rows)]
    checks += [c for c in (busbw_check(result, rows, opts.min_busbw, reference, hardware.nodes),
                           straggler_check(result, rows)) if c is not None]
    pairs = None
    if isolated is not None:
        iso = isolated.isolation
        if iso is None:
            checks.append(not_isolated(isolated.reason, mode=opts.isolate))
        else:
            check = isolate_check(iso, isolated.hosts, isolated.nbytes)
            checks.append(check)
            section.isolate = isolate_section(iso, isolated.hosts, isolated.nbytes)
            pairs = {**check.details, "per_node": section.isolate["per_node"]}
    if opts.plot and rows:
        checks += _plot(section, opts.plot, pairs)
    return FamilyOutput(checks, section)


def _plot(section: BenchSection, path: str, pairs: dict | None = None) -> list[CheckResult]:
    """Draw the curve (and the pair matrix after --isolate); the report says where it went
    (or why it did not)."""
    try:
        draw(section.to_dict(), path, pairs)
    except ImportError as exc:
        return [warned(PLOT, f"could not draw {path}: {exc}",
                       "Install the plot extra: pip install 'ncclcheck[plot]'.",
                       Category.CONFIGURATION, path=path)]
    except Exception as exc:  # a plot that cannot be drawn must not hide the measurements
        return [warned(PLOT, f"could not draw {path}: {type(exc).__name__}: {exc}",
                       "Give --plot a writable .png, .svg or .pdf path.", Category.CONFIGURATION,
                       path=path)]
    section.plot = path
    return [passed(PLOT, f"busbw curve drawn into {path}", path=path)]


# -- declarations: every check this family reports (``ncclcheck checks``, docs/bench.md) ------
PLOT = CheckSpec(
    "bench.plot", "the --plot file was drawn", (Category.CONFIGURATION,),
    warns_when="--plot FILE cannot be drawn (the plot extra is missing, or the "
               "path or its suffix is unusable); the measurements stay in the "
               "report")


CHECKS: tuple[CheckSpec, ...] = SWEEP_CHECKS + ISOLATE_CHECKS + (PLOT,)
