"""The `bench` command's options, as one decorator, and their conversion to BenchOptions.

Kept next to the benchmark so that cli.py only wires the command up.
"""

from __future__ import annotations

from typing import Any, Callable

import click

from ncclcheck.cli_params import FiniteFloat, writable_path

from .isolate import DEFAULT_THRESHOLD, MODES
from .options import BACKENDS, BenchOptions
from .plot import PLOT_SUFFIXES, plot_missing_reason
from .sizes import DTYPES, parse_size


class SizeParam(click.ParamType):
    """A byte count with an optional K/M/G suffix (powers of 1024, as nccl-tests)."""

    name = "SIZE"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        if isinstance(value, int):
            return value
        try:
            size = parse_size(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        if size <= 0:
            self.fail(f"{value!r} must be at least 1 byte", param, ctx)
        return size


def bench_options(func: Callable) -> Callable:
    decorators = [
        click.option("--backend", type=click.Choice(BACKENDS), default="auto", show_default=True,
                     help="nccl on CUDA GPUs, gloo on CPU; auto picks nccl when GPUs are visible."),
        click.option("--nproc", type=click.IntRange(1, 1024), default=2, show_default=True,
                     help="Standalone Gloo: processes to start (NCCL starts one per local GPU)."),
        click.option("--min-bytes", type=SizeParam(), help="Smallest size (K/M/G suffixes; "
                     "default 1K)."),
        click.option("--max-bytes", type=SizeParam(), help="Largest size (default 1G on NCCL, "
                     "64M on Gloo)."),
        click.option("--factor", type=FiniteFloat(min=1, min_open=True),
                     help="Each size is FACTOR times the previous (default 2 on NCCL, 4 on Gloo)."),
        click.option("--iters", type=click.IntRange(min=1), help="Timed iterations per size "
                     "(default 20)."),
        click.option("--warmup", type=click.IntRange(min=0), help="Untimed iterations per size "
                     "first (default 5)."),
        click.option("--dtype", type=click.Choice(tuple(DTYPES)), default="float32",
                     show_default=True, help="Element type of the all-reduce."),
        click.option("--min-busbw", type=FiniteFloat(min=0), metavar="GBPS",
                     help="Fail when the peak bus bandwidth is below GBPS (GB/s)."),
        click.option("--min-share", type=FiniteFloat(min=0, max=1, min_open=True),
                     metavar="FRACTION",
                     help="Fail when the busbw is below FRACTION of the figure expected of "
                          "this hardware (default: the figure's source's own pass mark; "
                          "docs/bench.md)."),
        click.option("--plot", type=writable_path, metavar="FILE",
                     help="Draw busbw against size into FILE (.png, .svg or .pdf; needs "
                          "pip install 'ncclcheck[plot]'); with --isolate, the pair matrix too."),
        click.option("--isolate", type=click.Choice(MODES), default=None,
                     help="After the sweep, pair tests between nodes that name slow nodes "
                          "(nodes: a few rounds) or slow links too (links: every pair)."),
        click.option("--isolate-threshold", type=FiniteFloat(min=0, max=1, min_open=True,
                                                             max_open=True),
                     default=DEFAULT_THRESHOLD, show_default=True, metavar="FRACTION",
                     help="--isolate: a pair is slow below FRACTION of the median pair's busbw."),
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def make_options(backend: str, nproc: int, min_bytes: int | None, max_bytes: int | None,
                 factor: float | None, iters: int | None, warmup: int | None, dtype: str,
                 min_busbw: float | None, plot: str | None, isolate: str | None = None,
                 isolate_threshold: float = DEFAULT_THRESHOLD,
                 min_share: float | None = None) -> BenchOptions:
    """Validate what click cannot see alone; raises click.UsageError with one line."""
    if min_bytes is not None and max_bytes is not None and min_bytes > max_bytes:
        raise click.UsageError(f"--min-bytes ({min_bytes}) is above --max-bytes ({max_bytes})")
    if plot:
        if not plot.lower().endswith(PLOT_SUFFIXES):
            raise click.UsageError(f"--plot {plot}: the file must end in "
                                   f"{', '.join(PLOT_SUFFIXES)}")
        reason = plot_missing_reason()
        if reason:
            raise click.UsageError(reason)
    return BenchOptions(backend, nproc, min_bytes, max_bytes, factor, iters, warmup, dtype,
                        min_busbw, plot, isolate=isolate, isolate_threshold=isolate_threshold,
                        min_share=min_share)
