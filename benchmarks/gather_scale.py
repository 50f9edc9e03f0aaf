"""How long rank 0 takes to gather and aggregate a job's reports, at 64 / 256 / 1024 ranks.

One real TCPStore (as rank 0 hosts it); a few publisher processes play the other ranks, each
announcing and reporting for its share with the same keys a real rank uses, and each report is
what the ranks family really returns for that rank's place in an 8-ranks-per-node job.
Prints, per size: the gather (read every announcement and report), the aggregation (one row
per check and the cluster checks), and rendering the table and the JSON document.

    python benchmarks/gather_scale.py [--sizes 64,256,1024] [--publishers 4]
    python benchmarks/gather_scale.py --smoke   # 16 ranks (two nodes), 2 publishers: seconds
"""

from __future__ import annotations

import argparse
import multiprocessing
import time

PER_NODE = 8
PATIENCE = 60.0  # seconds the publishers and the gather may take, per size
SMOKE = {"sizes": "16", "publishers": 2}  # --smoke: two nodes' worth of ranks


def rank_env(rank: int, world: int, port: int) -> dict[str, str]:
    node, local = divmod(rank, PER_NODE)
    return {"TORCHELASTIC_RUN_ID": "bench", "RANK": str(rank), "WORLD_SIZE": str(world),
            "LOCAL_RANK": str(local), "LOCAL_WORLD_SIZE": str(PER_NODE),
            "GROUP_RANK": str(node), "GROUP_WORLD_SIZE": str(world // PER_NODE),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port - 1),
            "NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "WARN"}


def publish(port: int, world: int, ranks: list[int]) -> None:
    """Play ``ranks``: announce each, then report what the ranks family says for it."""
    from ncclcheck.cluster.identity import identity
    from ncclcheck.cluster.session import ClusterSession, open_store
    from ncclcheck.context import ProbeContext, ProbeOptions, RanksOptions
    from ncclcheck.launchers import read_layout
    from ncclcheck.probes.ranks import probe

    store = open_store("127.0.0.1", port, False, PATIENCE)
    for rank in ranks:
        env = rank_env(rank, world, port)
        host = f"node{rank // PER_NODE}"
        layout, _ = read_layout(env)
        session = ClusterSession(store, rank, world, rank % PER_NODE, rank // PER_NODE, host,
                                 "127.0.0.1", port)
        session.announce(identity(layout, host, env))
        ctx = ProbeContext(env=env, host=host,
                           options=ProbeOptions(ranks=RanksOptions(visible_gpus=PER_NODE)))
        results = probe(ctx)
        for result in results:
            result.host, result.rank = host, rank
        session.deliver([r.to_dict() for r in results])


def measure(world: int, publishers: int) -> dict[str, float]:
    from ncclcheck.cluster.aggregate import aggregate
    from ncclcheck.cluster.checks import cluster_checks
    from ncclcheck.cluster.gather import read_gathered
    from ncclcheck.cluster.session import ClusterSession, open_store
    from ncclcheck.model import CheckResult, Report
    from ncclcheck.report import render

    store = open_store("127.0.0.1", 0, True, PATIENCE)
    session = ClusterSession(store, 0, world, 0, 0, "node0", "127.0.0.1", store.port)
    shares = [list(range(i, world, publishers)) for i in range(publishers)]
    began = time.perf_counter()
    procs = [multiprocessing.Process(target=publish, args=(store.port, world, share))
             for share in shares]
    for proc in procs:
        proc.start()
    deadline = time.monotonic() + PATIENCE
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
    for proc in procs:
        if proc.is_alive():
            proc.kill()
            proc.join()
    failed = [proc.exitcode for proc in procs if proc.exitcode != 0]
    if failed:
        raise SystemExit(f"{len(failed)} of {publishers} publishers failed (exit codes {failed})")
    published = time.perf_counter() - began

    t0 = time.perf_counter()
    job, reports = read_gathered(session, world, PER_NODE, time.monotonic() + PATIENCE)
    gathered = time.perf_counter() - t0
    if len(reports) != world:
        raise SystemExit(f"only {len(reports)} of {world} reports")

    t1 = time.perf_counter()
    results = [CheckResult.from_dict(d) for slot in sorted(reports) for d in reports[slot]]
    job_checks = cluster_checks(job)
    rows = aggregate(results, {"ranks": "rank"}) + job_checks
    aggregated = time.perf_counter() - t1
    t2 = time.perf_counter()
    table = render(Report(rows, {"host": "node0"}), "table")
    tabled = time.perf_counter() - t2
    t3 = time.perf_counter()
    document = render(Report(results + job_checks, {"host": "node0"}), "json")
    jsoned = time.perf_counter() - t3
    return {"ranks": world, "publish_s": published, "gather_s": gathered,
            "aggregate_s": aggregated, "table_s": tabled, "json_s": jsoned,
            "results": len(results), "json_mb": len(document) / 1e6,
            "table_lines": table.count("\n") + 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,256,1024")
    parser.add_argument("--publishers", type=int, default=4)
    parser.add_argument("--smoke", action="store_true",
                        help="one small size (16 ranks, 2 publishers): a quick run of the code")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    print(f"{'ranks':>6} {'results':>8} {'gather (s)':>11} {'aggregate (s)':>14} "
          f"{'table (s)':>10} {'json (s)':>9} {'json (MB)':>10} {'table lines':>12} "
          f"{'publish (s)':>12}")
    for size in (int(s) for s in args.sizes.split(",")):
        m = measure(size, args.publishers)
        print(f"{m['ranks']:>6} {m['results']:>8} {m['gather_s']:>11.3f} {m['aggregate_s']:>14.3f} "
              f"{m['table_s']:>10.3f} {m['json_s']:>9.3f} {m['json_mb']:>10.2f} "
              f"{m['table_lines']:>12} {m['publish_s']:>12.2f}")


if __name__ == "__main__":
    main()
