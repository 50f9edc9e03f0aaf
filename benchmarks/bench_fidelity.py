"""How faithful is ncclcheck's sweep? Its Gloo numbers against a bare torch.distributed loop.

Both run here, in one invocation, on the same sizes with the same iteration counts: first
ncclcheck's standalone sweep (worker processes, deadlines, per-element check), then the
smallest loop a person would write (init_process_group, warm-up, time `dist.all_reduce`, take
the slowest rank). The ratio is ncclcheck's busbw over the bare loop's; the goal is >= 0.9
from 1 MB up, where the per-call overhead no longer dominates. Each side runs --repeats times
and keeps its best time per size, so one noisy run does not decide; the two sides take turns
going first.

    python benchmarks/bench_fidelity.py --nproc 2 --max-bytes 64M --repeats 2
    python benchmarks/bench_fidelity.py --smoke   # 2 ranks, 64 KB..1 MB, one repeat: seconds
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from ncclcheck.bench.analysis import job_rows
from ncclcheck.bench.launcher import free_port
from ncclcheck.bench.metrics import bandwidths
from ncclcheck.bench.sizes import format_size, parse_size, sweep_sizes
from ncclcheck.bench.sweep import run_standalone
from ncclcheck.bench.worker import SweepConfig

BARE_LOOP = r"""
import json, os, sys, time, torch, torch.distributed as dist
sizes, iters, warmup, dtype = json.loads(sys.argv[1])
dist.init_process_group("gloo")
times = []
for nbytes in sizes:
    t = torch.ones(nbytes // torch.tensor([], dtype=getattr(torch, dtype)).element_size(),
                   dtype=getattr(torch, dtype))
    for _ in range(warmup):
        dist.all_reduce(t)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    elapsed = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    times.append(elapsed.item())
if dist.get_rank() == 0:
    print(json.dumps(times))
dist.destroy_process_group()
"""


# --smoke: the same two sides on a few small sizes, once (seconds; a check that both still run)
SMOKE = {"nproc": 2, "min_bytes": "64K", "max_bytes": "1M", "iters": 3, "warmup": 1,
         "repeats": 1, "budget": 60.0}


def bare_loop(sizes: list[int], nproc: int, iters: int, warmup: int, dtype: str,
              budget: float) -> list[float]:
    """Seconds per iteration (slowest rank) for each size, from the plain loop above; every
    rank is killed when the loop is not done within ``budget`` seconds."""
    port = free_port()
    procs = []
    for rank in range(nproc):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(nproc), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen(
            [sys.executable, "-c", BARE_LOOP, json.dumps([sizes, iters, warmup, dtype])],
            stdout=subprocess.PIPE, text=True, env=env))
    deadline = time.monotonic() + budget
    try:
        outputs = [p.communicate(timeout=max(1.0, deadline - time.monotonic()))[0]
                   for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    failed = {rank: p.returncode for rank, p in enumerate(procs) if p.returncode != 0}
    if failed:
        raise SystemExit(f"the bare loop failed: exit codes by rank {failed}")
    return json.loads(outputs[0])


def ncclcheck_sweep(sizes: list[int], nproc: int, iters: int, warmup: int,
                    dtype: str, budget: float) -> list[float]:
    config = SweepConfig("gloo", sizes, dtype, iters, warmup,
                         collective_timeout=min(120.0, budget), deadline=time.time() + budget)
    result = run_standalone(config, nproc, dict(os.environ), time.monotonic() + budget)
    rows = job_rows(result)
    if len(rows) != len(sizes):
        raise SystemExit(f"ncclcheck's sweep did not complete: {result.outcomes}")
    return [r.time_us / 1e6 for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--min-bytes", default="64K")
    parser.add_argument("--max-bytes", default="64M")
    parser.add_argument("--factor", type=float, default=4.0)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--budget", type=float, default=600.0,
                        help="seconds each side's run may take before it is stopped")
    parser.add_argument("--smoke", action="store_true",
                        help="2 ranks, 64 KB to 1 MB, 3 iterations, one repeat (seconds)")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    sizes = sweep_sizes(parse_size(args.min_bytes), parse_size(args.max_bytes), args.factor,
                        args.dtype)
    ours = [float("inf")] * len(sizes)
    bare = [float("inf")] * len(sizes)
    for repeat in range(args.repeats):
        # alternate which side goes first, so a change in machine load hits both alike
        for side in (("ours", "bare") if repeat % 2 == 0 else ("bare", "ours")):
            if side == "ours":
                times = ncclcheck_sweep(sizes, args.nproc, args.iters, args.warmup, args.dtype,
                                        args.budget)
                ours = [min(a, b) for a, b in zip(ours, times)]
            else:
                times = bare_loop(sizes, args.nproc, args.iters, args.warmup, args.dtype,
                                  args.budget)
                bare = [min(a, b) for a, b in zip(bare, times)]
    print(f"# gloo, {args.nproc} ranks, {args.dtype}, {args.iters} iters, best of {args.repeats}"
          + ("; smoke: too few iterations to judge the ratio" if args.smoke else ""))
    print(f"{'size':>10}  {'ncclcheck busbw':>15}  {'bare busbw':>10}  {'ratio':>6}")
    worst = None
    for nbytes, t_ours, t_bare in zip(sizes, ours, bare):
        ours_bw = bandwidths(nbytes, t_ours, args.nproc)[1]
        bare_bw = bandwidths(nbytes, t_bare, args.nproc)[1]
        ratio = ours_bw / bare_bw if bare_bw else float("nan")
        if nbytes >= 2 ** 20:
            worst = ratio if worst is None else min(worst, ratio)
        print(f"{format_size(nbytes):>10}  {ours_bw:15.3f}  {bare_bw:10.3f}  {ratio:6.2f}")
    if worst is not None:
        print(f"# lowest ratio from 1 MB: {worst:.2f} (goal >= 0.90): "
              f"{'met' if worst >= 0.9 else 'NOT met'}")


if __name__ == "__main__":
    main()
