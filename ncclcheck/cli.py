"""The command line: thin click commands over the library."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import click

from ncclcheck import __version__
from ncclcheck.bench.cli_options import bench_options, make_options
from ncclcheck.cli_options import ProbeArgs, format_option, probe_options, slurm_only
from ncclcheck.cli_params import FiniteSeconds
from ncclcheck.cluster.drain import ON_FAIL_ACTIONS
from ncclcheck.context import NcclOptions, NetOptions, ProbeOptions, RanksOptions
from ncclcheck.probes import FAMILY_NAMES
from ncclcheck.probes.registry import UnknownCheck, load_registry
from ncclcheck.report import render
from ncclcheck.report.formats import CHECK_LIST, ONE_CHECK

MAX_STARTUP_S = 60.0  # older than this, the process did not just start for this command


class UsageFailure(click.UsageError):
    """Bad usage or unusable input: one line on stderr, exit code 2."""


@dataclass(frozen=True)
class Invocation:
    """What ``main`` knows of this process that no option says: when it started, so that
    --timeout counts from the command's start."""

    started: float | None = None


def _run(args: ProbeArgs, families: list[str], options: ProbeOptions | None = None) -> None:
    """Every probe command ends here: its Request and Output built from the plain options, one
    library call, then its exit code."""
    # deferred: the runner loads every family's machinery, which --help and explain do not need
    from ncclcheck.runner import Output, Request, check, finish
    invocation = click.get_current_context().find_object(Invocation) or Invocation()
    request = Request(tuple(families), options or ProbeOptions(), args.nodes, args.gpus_per_node,
                      args.timeout, started=invocation.started)
    output = Output(args.fmt, args.junit, args.strict, prom_file=args.prom_file,
                    on_fail=args.on_fail, per_rank=args.per_rank)
    outcome = check(request, output=output, store_port=args.store_port, local=args.local)
    sys.exit(finish(outcome))


def _family_list(value: str | None, option: str) -> list[str]:
    """The families a --checks/--skip value names; None (not given) is []; a value that names
    none (``,,``) is a usage error, never "all"."""
    if value is None:
        return []
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise UsageFailure(f"{option} {value!r} names no probe family "
                           f"(known: {', '.join(FAMILY_NAMES)})")
    unknown = [n for n in names if n not in FAMILY_NAMES]
    if unknown:
        raise UsageFailure(f"{option}: unknown probe family {', '.join(unknown)} "
                           f"(known: {', '.join(FAMILY_NAMES)})")
    return names


def chosen_families(checks: str | None, skip: str | None, no_bench: bool) -> list[str]:
    """The families `run` runs; leaving none to run is a usage error (a CI gate that checks
    nothing must not pass)."""
    chosen = _family_list(checks, "--checks") or list(FAMILY_NAMES)
    skipped = set(_family_list(skip, "--skip")) | ({"bench"} if no_bench else set())
    families = [f for f in chosen if f not in skipped]
    if not families:
        raise UsageFailure(f"no probe family left to run ({', '.join(chosen)} all skipped)")
    return families


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ncclcheck")
def cli() -> None:
    """Preflight and post-mortem diagnostics for multi-node PyTorch / Lightning over NCCL.

    Run `ncclcheck run` before a job (on every rank under its launcher) and
    `ncclcheck explain LOG` after one failed.
    """


@cli.command()
@probe_options
@click.option("--checks", help="Comma-separated probe families to run (default: all).")
@click.option("--skip", help="Comma-separated probe families to leave out.")
@click.option("--no-bench", is_flag=True, help="Leave out the all-reduce benchmark.")
def run(args: ProbeArgs, checks, skip, no_bench) -> None:
    """Run every probe family and print one report.

    \b
    Example:
      ncclcheck run --nodes 2 --gpus-per-node 4 --format json
    """
    _run(args, chosen_families(checks, skip, no_bench))


@cli.command()
@probe_options
@click.option("--lightning", "lightning", is_flag=True,
              help="Also show Lightning's view: its ClusterEnvironment, ranks and whether "
                   "Trainer(num_nodes=, devices=) fits the launch.")
@click.option("--cluster-env", "cluster_env", metavar="MODULE:CLASS",
              help="Validate a custom Lightning ClusterEnvironment over the nodes x GPUs grid.")
def ranks(args: ProbeArgs, lightning, cluster_env) -> None:
    """Check the rank layout against nodes x GPUs and the launcher's variables.

    \b
    Example (the motivating case, 2 nodes x 4 GPUs):
      RANK=6 WORLD_SIZE=4 LOCAL_RANK=2 NODE_RANK=1 \\
        ncclcheck ranks --nodes 2 --gpus-per-node 4
    \b
    Lightning (needs pip install 'ncclcheck[lightning]'):
      ncclcheck ranks --lightning --num-nodes 2 --devices 4
      ncclcheck ranks --cluster-env my_envs:MyEnvironment --nodes 2 --gpus-per-node 4
    """
    options = RanksOptions(lightning=lightning, cluster_env=cluster_env)
    if lightning or cluster_env:
        # deferred: only these options load ncclcheck.lightning (and, through it, the runner)
        from ncclcheck.lightning.probe import ranks_options, validate_options
        try:
            validate_options(lightning, cluster_env, within=args.timeout)
        except (RuntimeError, ValueError) as exc:
            raise UsageFailure(str(exc).splitlines()[0]) from None
        options = ranks_options(lightning, cluster_env)
    _run(args, ["ranks"], ProbeOptions(ranks=options))


@cli.command()
@probe_options
@click.option("--mesh-full-max", "mesh_full_max", type=click.IntRange(min=2), default=32,
              show_default=True, help="Largest node count tested as a full mesh; above it each "
                                      "node dials its ring successor plus 2 random nodes.")
@click.option("--mesh-connect-timeout", "mesh_connect_timeout", type=FiniteSeconds(0.1),
              help="Seconds one mesh connection may take (default: min(5, a share of --timeout)).")
def net(args: ProbeArgs, mesh_full_max, mesh_connect_timeout) -> None:
    """Check interfaces, NCCL/Gloo interface choice, MASTER_ADDR/MASTER_PORT and the mesh.

    \b
    Examples:
      NCCL_SOCKET_IFNAME=eth0 MASTER_ADDR=node0 MASTER_PORT=29500 ncclcheck net
      torchrun --nnodes 4 --nproc-per-node 8 ... -m ncclcheck net   # + node-to-node mesh
    """
    _run(args, ["net"], ProbeOptions(net=NetOptions(mesh_full_max=mesh_full_max,
                                     mesh_connect_timeout=mesh_connect_timeout)))


@cli.command()
@probe_options
@bench_options
def bench(args: ProbeArgs, **sweep) -> None:
    """All-reduce sweep over NCCL (Gloo on CPU), printed as nccl-tests prints it.

    \b
    Examples:
      ncclcheck bench                                  # NCCL on every local GPU, or 2 Gloo processes
      ncclcheck bench --backend gloo --nproc 4 --max-bytes 16M
      torchrun --nnodes 2 --nproc-per-node 8 ... -m ncclcheck bench --min-busbw 150
    """
    _run(args, ["bench"], ProbeOptions(bench=make_options(**sweep)))


@cli.command()
@probe_options
@click.option("--nccl-lib", "nccl_lib", metavar="PATH",
              type=click.Path(exists=True, dir_okay=False),
              help="Inspect this libnccl.so instead of the one the job would load.")
def nccl(args: ProbeArgs, nccl_lib) -> None:
    """Check the libnccl actually loaded, its plugins, NCCL_* settings and GPU/CUDA readiness.

    \b
    Example (the motivating case's settings):
      NCCL_VERSION=2.11.4-1 NCCL_SOCKET_IFNAME=eth0 NCCL_DEBUG=INFO \\
        NCCL_NSOCKS_PERTHREAD=4 NCCL_SOCKET_NTHREADS=4 ncclcheck nccl
    """
    _run(args, ["nccl"], ProbeOptions(nccl=NcclOptions(nccl_lib=nccl_lib)))


@cli.command()
@click.argument("check_id", required=False, metavar="[ID]")
@format_option
def checks(check_id, fmt) -> None:
    """List every check the probes can report, or print one in full.

    ID is a check id (net.nccl_interface), an id a pattern covers (nccl.setting.NCCL_DEBUG)
    or the pattern itself (nccl.setting.*).

    \b
    Examples:
      ncclcheck checks
      ncclcheck checks net.nccl_interface
      ncclcheck checks --format json
    """
    registry = load_registry()
    if check_id is None:
        click.echo(render(CHECK_LIST, registry.specs, fmt))
        return
    try:
        click.echo(render(ONE_CHECK, registry.lookup(check_id), fmt))
    except UnknownCheck as exc:
        raise UsageFailure(str(exc)) from None


@cli.command()
@click.argument("paths", nargs=-1, metavar="[PATH ...]")
@format_option
@click.option("--exit-code", "exit_code", is_flag=True,
              help="Exit 1 when a failure was found (for CI); otherwise exit 0 whatever was found.")
@click.option("--list", "list_catalogue", is_flag=True, help="Print the failure catalogue and exit.")
@click.option("--on-fail", type=click.Choice(ON_FAIL_ACTIONS), callback=slurm_only,
              help="Slurm only: drain the host(s) the root cause's verdict names, with the "
                   "root cause as the reason (scontrol update).")
def explain(paths, fmt, exit_code, list_catalogue, on_fail) -> None:
    """Explain failed runs' logs: the root cause first, with its rank, host and fix.

    PATH is a file, a directory (every file in it) or - for stdin (the default); gzip is
    read transparently.

    \b
    Example:
      ncclcheck explain slurm-1234.out
      kubectl logs job/train | ncclcheck explain --format json
    """
    # deferred: explain's catalogue and engine, which the other commands and --help do not need
    from ncclcheck.explain.cli import run_explain
    own = (click.get_current_context().find_object(Invocation) or Invocation()).started
    sys.exit(run_explain(list(paths), fmt, exit_code, list_catalogue, UsageFailure, on_fail, own))


@cli.command()
@click.option("--pid", "pids", type=click.IntRange(min=1), multiple=True, metavar="PID",
              help="A process of the job to look at (repeat it); default: find them.")
@click.option("--job", "job", metavar="ID",
              help="Where several jobs run on this node: the one to look at (its launcher's "
                   "pid, Slurm job id or torchrun run id).")
@click.option("--out", "out", metavar="DIR",
              help="Also write the snapshot there, one file per process (a shared folder: "
                   "run on every node, then `ncclcheck explain DIR`).")
@format_option
@click.option("--timeout", type=FiniteSeconds(1.0), default=30.0, show_default=True,
              help="Deadline in seconds for the whole command.")
@click.option("--samples", type=click.IntRange(1, 20), default=3, show_default=True,
              help="How many times each process is looked at.")
@click.option("--interval", type=FiniteSeconds(0.0, 60.0), default=1.0, show_default=True,
              help="Seconds between samples.")
@click.option("--exit-code", "exit_code", is_flag=True,
              help="Exit 1 when a rank holds the others up (or every rank is stuck).")
def hang(pids, job, out, fmt, timeout, samples, interval, exit_code) -> None:
    """During a live hang: where every rank of the job on this node is, and which rank(s)
    hold the others up.

    \b
    Examples:
      ncclcheck hang                                  # find the job's processes on this node
      ncclcheck hang --pid 4121 --pid 4122 --format json
      srun --overlap --jobid 1234 ncclcheck hang --out /shared/hang-1234
      ncclcheck explain /shared/hang-1234             # every node's snapshot, one verdict
    """
    # deferred: the snapshot and explain's engine, which the other commands and --help do not need
    from ncclcheck.hang.cli import HangArgs, run_hang
    sys.exit(run_hang(HangArgs(tuple(pids), job, out, fmt, timeout, samples, interval,
                               exit_code), UsageFailure))


def process_started() -> float | None:
    """When this process started, as a time.monotonic() value, so that --timeout counts from
    the command's start (interpreter and imports take seconds on a loaded host); None when
    /proc does not say or the process is older than a command's start-up (main() called by a
    long-running program)."""
    try:
        after_name = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        start_ticks = int(after_name[19])  # field 22, starttime, in clock ticks since boot
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return time.monotonic() - age if 0.0 <= age <= MAX_STARTUP_S else None


def main(argv: list[str] | None = None) -> None:
    """Entry point: usage errors become one line on stderr and exit code 2, never a traceback."""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        click.echo(cli.get_help(click.Context(cli, info_name="ncclcheck")))
        sys.exit(0)
    try:
        result = cli.main(args=args, prog_name="ncclcheck", standalone_mode=False,
                          obj=Invocation(process_started() if argv is None else None))
    except SystemExit:
        raise
    except click.UsageError as exc:
        message = exc.format_message().splitlines()[0] if exc.format_message() else str(exc)
        command = exc.ctx.command_path if exc.ctx else "ncclcheck"
        click.echo(f"{command}: error: {message}", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        click.echo(f"ncclcheck: error: {exc.format_message()}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("ncclcheck: aborted", err=True)
        sys.exit(130)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("ncclcheck: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(1)
    except OSError as exc:
        click.echo(f"ncclcheck: error: {exc}", err=True)
        sys.exit(2)
    except Exception as exc:  # an unexpected bug still gets one line, not a traceback
        if os.environ.get("NCCLCHECK_DEBUG"):
            raise
        click.echo(f"ncclcheck: internal error: {type(exc).__name__}: {exc} "
                   "(set NCCLCHECK_DEBUG=1 for the traceback)", err=True)
        sys.exit(2)
    sys.exit(result if isinstance(result, int) else 0)
