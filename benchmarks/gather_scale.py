"""How long rank 0 takes to gather a job's reports and print the job report, up to 102,400 ranks.

One real TCPStore (as rank 0 hosts it) and rank 0's real code from the store onwards. A few
publisher processes play the rest of the job with the keys and code real ranks use: rank 0's
own node (8 ranks per node) reports directly, as it does on MASTER_ADDR's host, and every
other node's leader delivers one node summary of its 8 ranks (``ncclcheck.cluster.node``).
Each rank's results are what the ranks family really returns for its place; about 1% of the
ranks see too few GPUs, so ``ranks.local_rank`` fails on them. Every size runs in a fresh
process, so its peak RSS is rank 0's own. Per size it prints: the gather (read and merge every
announcement, report and node summary), the aggregation (job-wide checks, rows, context), the
table and the JSON document (time and bytes), and rank 0's peak RSS.

    python benchmarks/gather_scale.py [--sizes 1024,10240,102400] [--publishers 2] [--json]
    python benchmarks/gather_scale.py --per-rank   # the --per-rank JSON form instead
    python benchmarks/gather_scale.py --smoke   # 16 ranks (two nodes), 2 publishers: seconds

Exits non-zero when a report is missing, or a failing rank is not named in the JSON document.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import queue
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's ncclcheck

PER_NODE = 8
PATIENCE = 600.0  # seconds the publishers and the gather may take, per size
SMOKE = {"sizes": "16", "publishers": 2}  # --smoke: two nodes' worth of ranks
FAIL_EVERY, FAIL_AT = 100, 37  # rank % 100 == 37 sees too few GPUs: 1% of ranks fail a check


def rank_env(rank: int, world: int, port: int) -> dict[str, str]:
    node, local = divmod(rank, PER_NODE)
    return {"TORCHELASTIC_RUN_ID": "bench", "RANK": str(rank), "WORLD_SIZE": str(world),
            "LOCAL_RANK": str(local), "LOCAL_WORLD_SIZE": str(PER_NODE),
            "GROUP_RANK": str(node), "GROUP_WORLD_SIZE": str(world // PER_NODE),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port - 1),
            "NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "WARN"}


def failing(rank: int) -> bool:
    return rank % FAIL_EVERY == FAIL_AT


class Rank:
    """One played rank: its identity and what the ranks family reports for it."""

    def __init__(self, rank: int, world: int, port: int, versions: dict) -> None:
        from ncclcheck.cluster.identity import identity
        from ncclcheck.context import ProbeContext, ProbeOptions, RanksOptions
        from ncclcheck.launchers import read_layout
        from ncclcheck.probes.ranks import probe

        env = rank_env(rank, world, port)
        self.rank, self.host = rank, f"node{rank // PER_NODE}"
        layout, _ = read_layout(env)
        self.identity = identity(layout, self.host, env, known_versions=versions)
        visible = rank % PER_NODE if failing(rank) else PER_NODE
        ctx = ProbeContext(env=env, host=self.host,
                           options=ProbeOptions(ranks=RanksOptions(visible_gpus=visible)))
        self.results = []
        for result in probe(ctx):
            result.host, result.rank = self.host, rank
            self.results.append(result.to_dict())


def publish(port: int, world: int, nodes: list[int], per_rank: bool) -> None:
    """Play ``nodes``: node 0's ranks 1-7 report to rank 0 directly, every other node's
    leader announces itself and delivers its own report with its node's summary."""
    from ncclcheck.cluster.identity import versions
    from ncclcheck.cluster.node import filled_ranks, summarize
    from ncclcheck.cluster.session import ClusterSession, open_store

    store = open_store("127.0.0.1", port, False, PATIENCE)
    known = versions()
    for node in nodes:
        ranks = [Rank(r, world, port, known) for r in range(node * PER_NODE, (node + 1) * PER_NODE)]
        players = ranks[1:] if node == 0 else ranks[:1]
        for player in players:
            session = ClusterSession(store, player.rank, world, player.rank % PER_NODE, node,
                                     player.host, "127.0.0.1", port)
            session.announce(player.identity)
            if node == 0:
                session.deliver(player.results)
                continue
            summary = summarize(((r.identity, r.results) for r in ranks[1:]), player.host,
                                per_rank, (player.rank, player.results))
            session.deliver([], summary, filled_ranks(summary))


def measure(world: int, publishers: int, per_rank: bool, out) -> None:
    """Rank 0 of a ``world``-rank job; puts its figures on ``out``."""
    from ncclcheck.cluster.clock import JobClock
    from ncclcheck.cluster.expect import expectation
    from ncclcheck.cluster.gather import findings_of, read_gathered
    from ncclcheck.cluster.identity import versions
    from ncclcheck.cluster.session import ClusterSession, open_store
    from ncclcheck.cluster.state import Job
    from ncclcheck.context import ProbeContext
    from ncclcheck.launchers import read_layout
    from ncclcheck.model import CheckResult, FamilyOutput
    from ncclcheck.report import render
    from ncclcheck.report.formats import REPORT
    from ncclcheck.runner import build_report

    store = open_store("127.0.0.1", 0, True, PATIENCE)
    nodes = max(1, world // PER_NODE)
    shares = [list(range(i, nodes, publishers)) for i in range(publishers)]
    began = time.perf_counter()
    fork = multiprocessing.get_context("fork")
    procs = [fork.Process(target=publish, args=(store.port, world, share, per_rank))
             for share in shares if share]
    for proc in procs:
        proc.start()
    env = rank_env(0, world, store.port)
    layout, _ = read_layout(env)
    ctx = ProbeContext(env=env, host="node0", timeout=PATIENCE)
    job = Job(["ranks"], ctx, layout, JobClock(time.monotonic(), PATIENCE), [], 0,
              expectation(layout, env), per_rank)
    session = ClusterSession(store, 0, world, 0, 0, "node0", "127.0.0.1", store.port,
                             reporting=True, nodes=nodes)
    me = Rank(0, world, store.port, versions())
    session.announce(me.identity)
    session.deliver(me.results)
    deadline = time.monotonic() + PATIENCE
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
    bad = [proc.exitcode for proc in procs if proc.exitcode != 0]
    for proc in procs:
        if proc.is_alive():
            proc.kill()
            proc.join()
    if bad:
        raise SystemExit(f"{len(bad)} of {len(procs)} publishers failed (exit codes {bad})")
    published = time.perf_counter() - began

    t0 = time.perf_counter()
    read = read_gathered(session, world, PER_NODE, time.monotonic() + 10, job.expect, per_rank)
    gathered = time.perf_counter() - t0
    t1 = time.perf_counter()
    found = findings_of(session, job, read, FamilyOutput([CheckResult.from_dict(d)
                                                          for d in me.results]))
    report = build_report(ctx, found.checks, found.bench, rows=found.rows, cluster=found.cluster)
    aggregated = time.perf_counter() - t1
    t2 = time.perf_counter()
    table = render(REPORT, report, "table")
    tabled = time.perf_counter() - t2
    t3 = time.perf_counter()
    document = render(REPORT, report, "json")
    jsoned = time.perf_counter() - t3
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out.put({"ranks": world, "nodes": nodes, "reported": len(read.gathered.reported_slots),
             "gather_s": round(gathered, 3), "aggregate_s": round(aggregated, 3),
             "table_s": round(tabled, 3), "json_s": round(jsoned, 3),
             "json_bytes": len(document.encode()), "peak_rss_mb": round(peak, 1),
             "table_lines": table.count("\n") + 1, "publish_s": round(published, 2),
             "unnamed_failing": unnamed(json.loads(document), world)})


def unnamed(doc: dict, world: int) -> list[int]:
    """The failing ranks the document does not list per rank (there must be none)."""
    named = {c["rank"] for c in doc["checks"] if c["id"] == "ranks.local_rank"
             and c["status"] == "fail"}
    return [r for r in range(world) if failing(r) and r % PER_NODE and r not in named]


def run_size(world: int, publishers: int, per_rank: bool) -> dict:
    """One size in a fresh process (so the peak RSS is this size's)."""
    spawn = multiprocessing.get_context("spawn")
    out = spawn.Queue()
    proc = spawn.Process(target=measure, args=(world, publishers, per_rank, out))
    proc.start()
    deadline = time.monotonic() + PATIENCE * 2
    try:
        while time.monotonic() < deadline:
            try:
                return out.get(timeout=1.0)
            except queue.Empty:
                if not proc.is_alive():
                    break
        raise SystemExit(f"rank 0 of {world} ranks gave no figures (exit code {proc.exitcode})")
    finally:
        proc.join(30)
        if proc.is_alive():
            proc.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1024,10240,102400")
    parser.add_argument("--publishers", type=int, default=2)
    parser.add_argument("--per-rank", action="store_true",
                        help="measure the --per-rank JSON form (every rank's every result)")
    parser.add_argument("--json", action="store_true", help="one JSON object per size")
    parser.add_argument("--smoke", action="store_true",
                        help="one small size (16 ranks, 2 publishers): a quick run of the code")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    if not args.json:
        print(f"{'ranks':>7} {'gather s':>9} {'aggregate s':>12} {'table s':>8} {'json s':>7} "
              f"{'json MB':>8} {'peak RSS MB':>12} {'publish s':>10}")
    faults = 0
    for size in (int(s) for s in args.sizes.split(",")):
        m = run_size(size, args.publishers, args.per_rank)
        if m["reported"] != size or m["unnamed_failing"]:
            faults += 1
            print(f"fault at {size} ranks: {m['reported']} reported, failing ranks not named: "
                  f"{m['unnamed_failing'][:10]}", file=sys.stderr)
        if args.json:
            print(json.dumps({k: m[k] for k in ("ranks", "gather_s", "aggregate_s", "table_s",
                                                 "json_s", "json_bytes", "peak_rss_mb")}))
        else:
            print(f"{m['ranks']:>7} {m['gather_s']:>9.3f} {m['aggregate_s']:>12.3f} "
                  f"{m['table_s']:>8.3f} {m['json_s']:>7.3f} {m['json_bytes'] / 1e6:>8.2f} "
                  f"{m['peak_rss_mb']:>12.1f} {m['publish_s']:>10.2f}")
        sys.stdout.flush()
    return 1 if faults else 0


if __name__ == "__main__":
    raise SystemExit(main())
