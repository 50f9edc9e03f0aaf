"""How fast explain reads a large job's flight-recorder dumps, and what torch's analyzer does.

    python benchmarks/fr_scale.py [--ranks 1024] [--entries 2000] [--behind 1] [--keep DIR]
                                  [--no-torch] [--smoke]

Writes one pickled dump per rank in torch's format (the schema torch 2.13 writes: entries with
op, sizes, dtypes, state and two Python frames each), with one rank that stopped ``--behind``
collectives before the others (1: it never entered the last one, the usual hang; hundreds: a
rank far behind, which makes explain read the dumps further back than their newest entries),
then times ``ncclcheck explain DIR`` in a fresh process (start-up included) and
reads its peak memory; then runs torch's own analyzer (``python -m
torch.distributed.flight_recorder.fr_trace DIR -p nccl_trace_rank_``) on the same folder, when
torch is installed, and prints how it ended. ``--smoke`` does 8 ranks x 50 entries (seconds).
"""

from __future__ import annotations

import argparse
import json
import pickle
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PREFIX = "nccl_trace_rank_"


def entry(seq: int, started: bool) -> dict:
    return {"record_id": seq, "pg_id": 0, "process_group": ("0", "default_pg"),
            "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq, "is_p2p": False,
            "profiling_name": "nccl:all_reduce", "input_sizes": [[1024, 1024]],
            "output_sizes": [[1024, 1024]], "input_dtypes": ["BFloat16"],
            "output_dtypes": ["BFloat16"], "state": "started" if started else "completed",
            "time_created_ns": 1_000_000 * seq, "duration_ms": None, "retired": not started,
            "time_discovered_started_ns": 1, "time_discovered_completed_ns": None if started else 2,
            "timeout_ms": 600000, "thread_id": "1", "thread_name": "pt_main_thread",
            "frames": [{"name": "all_reduce", "line": 3245,
                        "filename": "/site-packages/torch/distributed/distributed_c10d.py"},
                       {"name": "train_step", "line": 88, "filename": "/job/train.py"}]}


def write_dumps(folder: Path, ranks: int, entries: int, behind: int = 1) -> int:
    """One dump per rank; rank ``ranks // 2`` stops ``behind`` collectives short. Returns
    bytes."""
    total = 0
    culprit = ranks // 2
    for rank in range(ranks):
        last = entries - behind if rank == culprit else entries
        data = {"version": "2.10", "comm_lib_version": "2.21.5",
                "pg_config": {"0": {"name": "0", "desc": "default_pg",
                                    "ranks": str(list(range(ranks)))}},
                "pg_status": {"0": {"last_enqueued_collective": last,
                                    "last_started_collective": last,
                                    "last_completed_collective": entries - 1}},
                "entries": [entry(s, started=s == entries) for s in range(1, last + 1)]}
        blob = pickle.dumps(data, protocol=2)
        (folder / f"{PREFIX}{rank}").write_bytes(blob)
        total += len(blob)
    return total


def time_explain(folder: Path) -> tuple[float, float, dict]:
    code = ("import json, resource, sys; from ncclcheck.explain.engine import explain; "
            "r = explain([sys.argv[1]]).to_dict(); "
            "print(json.dumps({'root': r['findings'][0]['facts'] if r['findings'] else None, "
            "'rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))")
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True,
                         text=True, timeout=3600)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"explain failed: {out.stderr.strip().splitlines()[-1:]}")
    result = json.loads(out.stdout)
    return wall, result["rss_mb"], result["root"] or {}


def torch_analyzer(folder: Path) -> str:
    try:
        import importlib.util
        if importlib.util.find_spec("torch") is None:
            return "torch not installed"
    except ValueError:
        return "torch not installed"
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace",
                          str(folder), "-p", PREFIX], capture_output=True, text=True,
                         timeout=3600)
    wall = time.perf_counter() - start
    if out.returncode == 0:
        return f"exited 0 in {wall:.1f} s: {(out.stdout.strip().splitlines() or [''])[-1][:160]}"
    last = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
    return f"exited {out.returncode} in {wall:.1f} s: {last[:160]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--behind", type=int, default=1,
                        help="how many collectives the culprit rank stops short (default 1)")
    parser.add_argument("--keep", type=Path, help="write the dumps here and keep them")
    parser.add_argument("--no-torch", action="store_true", help="skip torch's analyzer")
    parser.add_argument("--smoke", action="store_true", help="8 ranks x 50 entries")
    args = parser.parse_args()
    if args.smoke:
        args.ranks, args.entries = 8, 50
    folder = args.keep or Path(tempfile.mkdtemp(prefix="fr_scale_"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        if not 1 <= args.behind < args.entries:
            parser.error("--behind must be at least 1 and less than --entries")
        size = write_dumps(folder, args.ranks, args.entries, args.behind)
        print(f"{args.ranks} ranks x {args.entries} entries, rank {args.ranks // 2} "
              f"{args.behind} behind: {size / 1e6:.0f} MB of dumps")
        wall, rss, root = time_explain(folder)
        culprit = args.ranks // 2
        expected = args.entries - args.behind + 1
        right = root.get("ranks") == [culprit] and root.get("seq") == expected
        print(f"ncclcheck explain: {wall:.2f} s wall (process start included), peak RSS "
              f"{rss:.0f} MiB, culprit {root.get('ranks')} at #{root.get('seq')} "
              f"({'right' if right else 'WRONG'})")
        if not args.no_torch:
            print(f"torch's analyzer (fr_trace): {torch_analyzer(folder)}")
        print(f"peak RSS of this script {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
        return 0 if right else 1
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
