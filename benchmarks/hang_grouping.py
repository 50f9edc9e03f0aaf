"""How fast `ncclcheck hang`'s verdict groups a large job's stacks, and the memory it takes.

    python benchmarks/hang_grouping.py [--ranks 10240] [--culprits 3] [--threads 4]
                                       [--samples 3] [--files] [--smoke]

Builds ``--ranks`` processes' stacks in py-spy's own JSON (``py-spy dump --json``, the shapes of
tests/data/hang/: a rank waiting in all_reduce under a Lightning-style training loop, a culprit
stuck in its data loading), each with idle framework threads beside the main one (pin memory, a
checkpoint pool, a heartbeat in the script's own code) and ``--samples`` samples, then times:

- parse: py-spy's JSON to stacks (what a snapshot does per process and sample);
- group: the verdict over every rank (deciding thread, groups, culprits) and the finding's facts;
- with ``--files``: the snapshot files written (one per process, as ``--out`` does) and read
  back by ``ncclcheck explain DIR``'s reader, in a fresh process (start-up included).

Times come from a first pass; peak memory from a second one (tracemalloc's Python heap for
parse + group: tracing slows allocation down), with the process's maximum resident size (the
JSON texts themselves included). Checks that the verdict names exactly the culprits. ``--smoke`` does 64 ranks.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ncclcheck.hang.facts import state  # noqa: E402
from ncclcheck.hang.files import write  # noqa: E402
from ncclcheck.hang.model import NodeSnapshot, ProcessSnapshot, ProcState, Sample  # noqa: E402
from ncclcheck.hang.pyspy import parse_dump  # noqa: E402
from ncclcheck.hang.verdict import OUTSIDE, judge  # noqa: E402

SITE = "/opt/venv/lib/python3.11/site-packages"
STDLIB = "/usr/lib/python3.11"
TRAIN = "/home/alice/job/train.py"
# A Lightning fit loop around the training step, as py-spy shows it (outermost last).
LOOP = [("training_step", TRAIN, 118), ("_call_lightning_module_hook",
        f"{SITE}/lightning/pytorch/trainer/call.py", 171),
        ("advance", f"{SITE}/lightning/pytorch/loops/training_epoch_loop.py", 250),
        ("run", f"{SITE}/lightning/pytorch/loops/training_epoch_loop.py", 150),
        ("advance", f"{SITE}/lightning/pytorch/loops/fit_loop.py", 322),
        ("run", f"{SITE}/lightning/pytorch/loops/fit_loop.py", 198),
        ("_run_stage", f"{SITE}/lightning/pytorch/trainer/trainer.py", 1056),
        ("_run", f"{SITE}/lightning/pytorch/trainer/trainer.py", 1012),
        ("_fit_impl", f"{SITE}/lightning/pytorch/trainer/trainer.py", 599),
        ("_call_and_handle_interrupt", f"{SITE}/lightning/pytorch/trainer/call.py", 48),
        ("fit", f"{SITE}/lightning/pytorch/trainer/trainer.py", 561),
        ("main", TRAIN, 201), ("<module>", TRAIN, 210)]
WAITING = [("all_reduce", f"{SITE}/torch/distributed/distributed_c10d.py", 3252),
           ("wrapper", f"{SITE}/torch/distributed/c10d_logger.py", 83),
           ("reduce", f"{SITE}/lightning/fabric/utilities/distributed.py", 231),
           ("reduce", f"{SITE}/lightning/pytorch/strategies/ddp.py", 331)] + LOOP
STUCK = [("read", f"{STDLIB}/ssl.py", 1166), ("recv_into", f"{STDLIB}/ssl.py", 1314),
         ("readinto", f"{STDLIB}/socket.py", 706), ("load_batch", TRAIN, 41),
         ("__getitem__", TRAIN, 57),
         ("fetch", f"{SITE}/torch/utils/data/_utils/fetch.py", 52),
         ("_next_data", f"{SITE}/torch/utils/data/dataloader.py", 789),
         ("__next__", f"{SITE}/torch/utils/data/dataloader.py", 733)] + LOOP[2:]
IDLE = [("Thread-2 (_pin_memory_loop)", [
            ("get", f"{STDLIB}/queue.py", 180),
            ("_pin_memory_loop", f"{SITE}/torch/utils/data/_utils/pin_memory.py", 52)]),
        ("checkpoint_0", [("_worker", f"{STDLIB}/concurrent/futures/thread.py", 81)]),
        ("heartbeat", [("heartbeat", TRAIN, 23)])]
BOOT = [("run", f"{STDLIB}/threading.py", 982), ("_bootstrap_inner", f"{STDLIB}/threading.py",
        1045), ("_bootstrap", f"{STDLIB}/threading.py", 1002)]


def frame(name: str, file: str, line: int) -> dict:
    """One frame exactly as py-spy 0.4 writes it."""
    return {"name": name, "filename": file, "module": None, "short_filename": file.rsplit("/")[-1],
            "line": line, "locals": None, "is_entry": False, "is_shim_entry": False}


def pyspy_json(pid: int, stuck: bool, threads: int) -> str:
    main = {"pid": pid, "thread_id": 140000000000000 + pid, "thread_name": "MainThread",
            "os_thread_id": pid, "active": False, "owns_gil": False,
            "frames": [frame(*f) for f in (STUCK if stuck else WAITING)], "process_info": None}
    out = [main]
    for n in range(threads - 1):
        name, frames = IDLE[n % len(IDLE)]
        out.append({"pid": pid, "thread_id": 139000000000000 + pid * 8 + n, "thread_name": name,
                    "os_thread_id": pid + 100000 + n, "active": False, "owns_gil": False,
                    "frames": [frame(*f) for f in frames + BOOT], "process_info": None})
    return json.dumps(out)


def build(ranks: int, culprits: set[int], threads: int, samples: int) -> list[tuple[int, str]]:
    return [(rank, pyspy_json(100000 + rank, rank in culprits, threads)) for rank in range(ranks)]


def snapshots(dumps: list[tuple[int, str]], samples: int, ranks: int) -> list[ProcessSnapshot]:
    procs = []
    for rank, text in dumps:
        pid = 100000 + rank
        record = ProcessSnapshot(pid, f"node{rank // 8}", rank, rank % 8, ranks, 8, "torchrun",
                                 "python train.py")
        record.samples = [Sample(float(n), ProcState("S", 1.0, 12, "futex_do_wait", 1.0, 40),
                                 parse_dump(text, pid)) for n in range(samples)]
        procs.append(record)
    return procs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=10240)
    parser.add_argument("--culprits", type=int, default=3)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--files", action="store_true",
                        help="also write the snapshot files and time explain reading them")
    parser.add_argument("--smoke", action="store_true", help="64 ranks, with --files")
    args = parser.parse_args()
    if args.smoke:
        args.ranks, args.files = 64, True
    culprits = set(random.Random(7).sample(range(args.ranks), args.culprits))
    dumps = build(args.ranks, culprits, args.threads, args.samples)
    stacks = args.ranks * args.samples
    started = time.perf_counter()
    procs = snapshots(dumps, args.samples, args.ranks)
    parsed = time.perf_counter()
    verdict = judge(procs)
    stated = state(verdict)
    grouped = time.perf_counter()
    del verdict, stated, procs
    tracemalloc.start()  # a second pass for memory: tracing slows every allocation down
    procs = snapshots(dumps, args.samples, args.ranks)
    verdict = judge(procs)
    stated = state(verdict)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert verdict.kind == OUTSIDE and set(stated.facts["ranks"]) == culprits, stated.facts["ranks"]
    assert len(verdict.groups) == 2
    print(f"ranks: {args.ranks}, threads each: {args.threads}, samples: {args.samples} "
          f"({stacks} process stacks, {stacks * args.threads} thread stacks)")
    print(f"parse py-spy JSON: {parsed - started:.2f} s")
    print(f"group and judge:   {grouped - parsed:.2f} s  (culprits {sorted(culprits)} found)")
    print(f"peak Python heap (parse + group): {peak / 2**20:.1f} MiB; max RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MiB")
    if args.files:
        folder = Path(tempfile.mkdtemp(prefix="hang-grouping-"))
        try:
            per_node: dict[str, list[ProcessSnapshot]] = {}
            for proc in procs:
                per_node.setdefault(proc.host, []).append(proc)
            for host, members in per_node.items():
                write(NodeSnapshot(host, "2026-12-07T00:00:00+00:00", args.samples, 1.0, 2.0,
                                   members), str(folder))
            begin = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "ncclcheck", "explain", "--format",
                                   "json", str(folder)], capture_output=True, text=True,
                                  cwd=ROOT, timeout=3600)
            took = time.perf_counter() - begin
            root = json.loads(done.stdout)["findings"][0]
            assert set(root["facts"]["ranks"]) == culprits, root["facts"]["ranks"]
            size = sum(p.stat().st_size for p in folder.iterdir())
            print(f"explain DIR over {args.ranks} snapshot files ({size / 2**20:.1f} MiB): "
                  f"{took:.2f} s (process start-up included)")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
