"""How fast `ncclcheck explain` reads a big log, against `grep -c -E` on the same file.

    python benchmarks/explain_speed.py [--size-mib 64] [--engine all|hyperscan|aho|re] [--keep DIR]
                                       [--candidates] [--cold] [--runs N]
    python benchmarks/explain_speed.py --smoke   # 1 MiB logs, --candidates: seconds

Generates two logs of the given size: a *sparse* one (NCCL INFO init lines, training progress,
c10d warnings and a handful of real failure lines) and a *dense* one where half the lines carry
harmless words (``val_error=``, ``TORCH_NCCL_ASYNC_ERROR_HANDLING is deprecated``,
``UserWarning``, ``error_rate``, ...). Times `python -m ncclcheck explain --format json` on each
(process start included) with each prefilter engine, and `grep -c -E` with the signatures'
literals, ``--runs`` times each (the median is shown, with the range). Prints MB/s, the ratio
to grep and each explain process's peak memory; with ``--candidates``, also how many lines
each engine hands to the matcher (counted in-process).
Hyperscan's databases are kept on disk between runs (explain/hscache.py): by default one untimed
run fills that cache first, as any second run on a machine finds it; ``--cold`` turns the cache
off, so every timed run compiles them. ``all`` is every engine this machine has (Hyperscan only
where its module is installed).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from ncclcheck.catalogue import load
from ncclcheck.explain.hscache import CACHE_VARIABLE
from ncclcheck.explain.prefilter import ENGINE_VARIABLE, ENGINES
from ncclcheck.explain.prepared import prepared

BLOCK = [
    "node{n}:{pid}:{pid} [{d}] NCCL INFO Bootstrap: Using eth0:10.0.0.{n}<0>",
    "node{n}:{pid}:{tid} [{d}] NCCL INFO Channel 00/0 : {d}[{d}] -> {e}[{e}] via P2P/IPC",
    "node{n}:{pid}:{tid} [{d}] NCCL INFO Channel 01/0 : {d}[{d}] -> {e}[{e}] [send] via NET/Socket/0",
    "node{n}:{pid}:{tid} [{d}] NCCL INFO comm 0x55d5c8a0 rank {d} nranks 8 cudaDev {d} nvmlDev {d} busId 1b000 commId 0x9b2d - Init COMPLETE",
    "Epoch {n}:  45%|####5     | 450/1000 [01:23<01:40,  5.48it/s, loss=0.231, v_num=0]",
    "[W1202 12:59:21.142842639 socket.cpp:469] [c10d] waitForInput: socket {pid} timed out polling",
    "2026-12-02 12:59:53,123 - lightning.pytorch.utilities.rank_zero - INFO - step {pid} done",
    "{{'loss': 0.2311, 'grad_norm': 1.02, 'learning_rate': 3e-05, 'epoch': {n}.12}}",
]
# Harmless lines a healthy run prints by the thousand (metrics, deprecation notices).
NOISE = [
    "Epoch {n}: val_error=0.{pid} train_error=0.{tid} error_rate=0.0{d}",
    "[rank{d}]:[W1202 12:59:21.14 ProcessGroupNCCL.cpp:1042] Warning: TORCH_NCCL_ASYNC_ERROR_HANDLING is deprecated, use TORCH_NCCL_ASYNC_ERROR_HANDLING instead (function operator())",
    "/opt/conda/lib/python3.11/site-packages/torch/utils/data/dataloader.py:557: UserWarning: This DataLoader will create {d} worker processes in total.",
    "step {pid}: mean_abs_error {n}.{d} relative error {tid} (errors: 0, failures: 0)",
    "INFO:root:Evaluation: accuracy=0.9{d} error=0.0{n} Error bars: +-0.0{d}",
    "wandb: logging metric val/error {pid} and val/loss {tid}",
    "WARNING:urllib3.connectionpool:Retrying after ConnectionError: read timed out (attempt {d})",
]
FAILURES = [
    "node2:2251:2251 [2] init.cc:1872 NCCL WARN Invalid rank requested : 6/4",
    "[rank5]:[E906 12:16:32.611181197 ProcessGroupNCCL.cpp:607] [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=66, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600083 milliseconds before timing out.",
    "RuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/context.cc:27] rank < size. 6 vs 4",
]


def available_engines() -> list[str]:
    """The prefilter engines this machine can run: Hyperscan needs its module, the others
    are pure Python (without it explain would fall back and the label would lie)."""
    return [e for e in ENGINES if e != "hyperscan" or importlib.util.find_spec("hyperscan")]


def generate(path: str, size: int, dense: bool) -> None:
    lines = []
    for i in range(4000):
        if dense and i % 2:
            template = NOISE[(i // 2) % len(NOISE)]
        else:
            template = BLOCK[i % len(BLOCK)]
        lines.append(template.format(n=i % 4, pid=1000 + i, tid=2000 + i, d=i % 8,
                                     e=(i + 1) % 8))
    chunk = ("\n".join(lines) + "\n").encode()
    written = index = 0
    with open(path, "wb") as out:
        while written < size:
            out.write(chunk)
            written += len(chunk)
            if index % 200 == 0:
                failure = (FAILURES[(index // 200) % len(FAILURES)] + "\n").encode()
                out.write(failure)
                written += len(failure)
            index += 1


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int, bytes]:
    """Wall seconds, CPU seconds, peak RSS (KiB) and stdout of one child process."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    out = child.stdout.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if child.returncode != 0:
        raise SystemExit(f"{argv[0]} exited {child.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, out


def literals_pattern() -> str:
    literals = prepared().literals
    texts = {lit.text for sig in load().line_signatures for lit in literals[sig.id]}
    return "|".join(re.escape(text) for text in sorted(texts))


def candidates(path: str, engine: str) -> tuple[int, int]:
    """(lines handed on, lines tried against the catalogue) for one engine."""
    from ncclcheck.explain.scan import Scanner

    handed = gated = 0
    with open(path, "rb") as stream:
        ready = prepared()
        for cand in Scanner(ready.index(engine), gate=ready.gate(engine)).lines(stream):
            handed += 1
            gated += cand.gated
    return handed, gated


def repeated(argv: list[str], runs: int,
             env: dict[str, str] | None = None) -> tuple[list[float], float, int, bytes]:
    """Every run's wall seconds, the median run's CPU seconds, the largest peak RSS (KiB) and
    the last stdout of ``runs`` runs of one command (one after another: on a shared machine a
    median says more than any single run)."""
    results = [timed(argv, env) for _ in range(runs)]
    middle = sorted(results, key=lambda r: r[0])[len(results) // 2]
    return [r[0] for r in results], middle[1], max(r[2] for r in results), results[-1][3]


def spread(walls: list[float]) -> str:
    """The median wall time, with the range when there were several runs."""
    text = f"{statistics.median(walls):6.2f} s wall"
    return text + (f" ({min(walls):.2f}-{max(walls):.2f}, {len(walls)} runs)" if len(walls) > 1
                   else "")


def measure(path: str, engines: list[str], label: str, count: bool, cold: bool,
            runs: int = 1) -> None:
    mb = os.path.getsize(path) / 1e6
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)  # warm the cache
    grep_walls, grep_cpu, _, grep_out = repeated(["grep", "-c", "-E", literals_pattern(), path],
                                                 runs)
    grep_s = statistics.median(grep_walls)
    print(f"\n{label} log: {mb:.0f} MB, {grep_out.decode().strip()} lines hold a literal")
    print(f"  {'grep -c -E':<20} {spread(grep_walls)} {mb / grep_s:6.0f} MB/s")
    argv = [sys.executable, "-m", "ncclcheck", "explain", "--format", "json", path]
    for engine in engines:
        env = dict(os.environ, **{ENGINE_VARIABLE: engine})
        if cold:
            env[CACHE_VARIABLE] = "off"
        elif engine == "hyperscan":  # fill the database cache, untimed (the others keep none)
            timed(argv, env)
        walls, cpu, rss, _ = repeated(argv, runs, env)
        wall = statistics.median(walls)
        print(f"  {'explain (' + engine + ')':<20} {spread(walls)} {mb / wall:6.0f} MB/s  "
              f"{wall / grep_s:5.1f}x grep wall, {cpu / grep_cpu:5.1f}x grep CPU, "
              f"peak RSS {rss / 1024:4.0f} MiB")
        if count:
            handed, gated = candidates(path, engine)
            print(f"  {'':<20} {handed} lines handed on, {gated} tried against the catalogue")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=64)
    parser.add_argument("--engine", default="all", choices=("all",) + ENGINES)
    parser.add_argument("--keep", help="write the generated logs into this folder and keep them")
    parser.add_argument("--candidates", action="store_true",
                        help="also count the lines each engine hands to the matcher")
    parser.add_argument("--cold", action="store_true",
                        help="no database cache: every timed run compiles Hyperscan's databases")
    parser.add_argument("--runs", type=int, default=1,
                        help="time each command this many times and report the median")
    parser.add_argument("--smoke", action="store_true",
                        help="1 MiB logs with --candidates: a quick run of the code path")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.smoke:
        args.size_mib, args.candidates = 1, True
    folder = args.keep or tempfile.mkdtemp(prefix="explain-speed-")
    os.makedirs(folder, exist_ok=True)
    engines = available_engines() if args.engine == "all" else [args.engine]
    print("goal: explain within 5x grep's wall time on both logs, memory flat")
    print("Hyperscan databases: " + ("compiled by every run (--cold)" if args.cold
                                     else "from the cache, filled by an untimed run"))
    try:
        for label, dense in (("sparse", False), ("dense", True)):
            path = os.path.join(folder, f"{label}.log")
            generate(path, args.size_mib << 20, dense)
            measure(path, engines, label, args.candidates, args.cold, args.runs)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
