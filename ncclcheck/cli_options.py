"""The options several commands share: --format, and the options of every probe command,
handed to the command as one ``ProbeArgs`` (docs/cli.md)."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, fields
from typing import Any, Callable

import click

from ncclcheck.cli_params import FiniteSeconds, writable_path
from ncclcheck.cluster.drain import ON_FAIL_ACTIONS
from ncclcheck.launchers import slurm
from ncclcheck.report.formats import DEFAULT_FORMAT, FORMAT_NAMES


@dataclass(frozen=True)
class ProbeArgs:
    """The options every probe command takes (docs/cli.md), as the command received them."""

    fmt: str
    junit: str | None
    timeout: float
    strict: bool
    nodes: int | None
    gpus_per_node: int | None
    store_port: int | None
    prom_file: str | None
    on_fail: str | None
    local: bool
    per_rank: bool


def slurm_only(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--on-fail drain: refused at once outside a Slurm job (there is no node to drain)."""
    if value is not None and not slurm.inside_job(os.environ):
        raise click.BadParameter(f"{value} works only inside a Slurm job (SLURM_JOB_ID is not "
                                 "set)", ctx=ctx, param=param)
    return value


def format_option(func: Callable) -> Callable:
    """--format, with the choices of the one format table (ncclcheck.report.formats)."""
    return click.option("--format", "fmt", type=click.Choice(FORMAT_NAMES),
                        default=DEFAULT_FORMAT, show_default=True,
                        help="Output format; json prints exactly one document.")(func)


def probe_options(func: Callable) -> Callable:
    """Options every probe command takes (see docs/cli.md), handed to the command as one
    ``ProbeArgs`` (its first argument), as plain values."""
    decorators = [
        format_option,
        click.option("--junit", "junit", type=writable_path,
                     help="Also write JUnit XML (one testcase per check) to FILE."),
        click.option("--timeout", type=FiniteSeconds(0.1), default=60.0,
                     show_default=True, help="Deadline in seconds for the whole command."),
        click.option("--strict", is_flag=True, help="Warnings count as failures for the exit code."),
        click.option("--nodes", "--num-nodes", "nodes", type=click.IntRange(min=1),
                     help="Nodes in the job (Lightning's num_nodes)."),
        click.option("--gpus-per-node", "--devices", "gpus_per_node", type=click.IntRange(min=1),
                     help="GPUs (processes) per node (Lightning's devices)."),
        click.option("--store-port", type=click.IntRange(1, 65535),
                     help="Cluster mode: TCP port of rank 0's report store (default MASTER_PORT; "
                          "MASTER_PORT+1 under torchrun; under srun 15000 + the job id's last "
                          "four digits)."),
        click.option("--prom-file", type=writable_path, metavar="PATH",
                     help="Also write the report as Prometheus text (node_exporter textfile "
                          "collector), atomically."),
        click.option("--on-fail", type=click.Choice(ON_FAIL_ACTIONS), callback=slurm_only,
                     help="Slurm only: drain the node(s) the failing checks are about, with the "
                          "check id and summary as the reason (scontrol update)."),
        click.option("--local", is_flag=True,
                     help="Check this process only, no gathering, even under a launcher "
                          "(e.g. with a job's environment copied into a shell)."),
        click.option("--per-rank", is_flag=True,
                     help="Cluster mode JSON: every rank's result for every check (default: "
                          "passing results grouped per check, the others per rank)."),
    ]
    names = [field.name for field in fields(ProbeArgs)]

    @functools.wraps(func)
    def command(**values: Any) -> Any:
        return func(ProbeArgs(**{name: values.pop(name) for name in names}), **values)

    for decorator in reversed(decorators):
        command = decorator(command)
    return command
