"""How fast `ncclcheck explain` reads a big log, against `grep -c -E` on the same file.

    python benchmarks/explain_speed.py [--size-mib 256] [--keep PATH]

Generates a log of the given size (NCCL INFO init lines, training progress, c10d warnings and
a handful of real failure lines), then times `python -m ncclcheck explain --format json` on it
(process start included) and `grep -c -E` with the catalogue's prefilter strings. Prints MB/s,
the ratio, and the explain process's peak memory (it streams, so that stays flat).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from ncclcheck.explain.catalogue import gate

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
FAILURES = [
    "node2:2251:2251 [2] init.cc:1872 NCCL WARN Invalid rank requested : 6/4",
    "[rank5]:[E906 12:16:32.611181197 ProcessGroupNCCL.cpp:607] [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=66, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600083 milliseconds before timing out.",
    "RuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/context.cc:27] rank < size. 6 vs 4",
]


def generate(path: str, size: int) -> None:
    chunk_lines = []
    for i in range(4000):
        template = BLOCK[i % len(BLOCK)]
        chunk_lines.append(template.format(n=i % 4, pid=1000 + i, tid=2000 + i, d=i % 8,
                                           e=(i + 1) % 8))
    chunk = ("\n".join(chunk_lines) + "\n").encode()
    written = 0
    with open(path, "wb") as out:
        index = 0
        while written < size:
            out.write(chunk)
            written += len(chunk)
            if index % 200 == 0:
                failure = (FAILURES[(index // 200) % len(FAILURES)] + "\n").encode()
                out.write(failure)
                written += len(failure)
            index += 1


def timed(argv: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall seconds and CPU seconds (user + system) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--keep", help="write the generated log here and keep it")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="explain-speed-")
    path = args.keep or os.path.join(folder, "big.log")
    try:
        generate(path, args.size_mib << 20)
        size = os.path.getsize(path)
        pattern = "|".join(re.escape(token) for token in gate())
        subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)  # warm the cache
        grep_s, grep_cpu, grep = timed(["grep", "-c", "-E", pattern, path])
        explain_s, explain_cpu, done = timed([sys.executable, "-m", "ncclcheck", "explain",
                                              "--format", "json", path])
        if done.returncode != 0:
            print(done.stderr.decode(), file=sys.stderr)
            return 1
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        mb = size / 1e6
        print(f"log              : {size / (1 << 20):.0f} MiB, {grep.stdout.decode().strip()} "
              f"lines pass the prefilter")
        print(f"grep -c -E       : {grep_s:6.2f} s wall {mb / grep_s:6.0f} MB/s   "
              f"{grep_cpu:6.2f} s CPU {mb / grep_cpu:6.0f} MB/s")
        print(f"ncclcheck explain: {explain_s:6.2f} s wall {mb / explain_s:6.0f} MB/s   "
              f"{explain_cpu:6.2f} s CPU {mb / explain_cpu:6.0f} MB/s (process start included)")
        print(f"ratio            : {explain_s / grep_s:6.1f}x grep wall, "
              f"{explain_cpu / grep_cpu:.1f}x grep CPU (goal: within 5x)")
        print(f"peak memory      : {peak_mib:6.0f} MiB (largest child process)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
