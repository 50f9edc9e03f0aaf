"""How the node-to-node mesh scales: wall time and connections per node at N simulated nodes.

Every node is a thread (in one of --workers processes) with its own ClusterSession on one real
TCPStore and its own listener on loopback, so the numbers include the store round trips, the
handshakes and the barrier; the wall time runs from the moment every node has joined the store
until the last one finished its mesh.
Above --full-max nodes the plan switches from a full mesh to ring + random peers.

    python benchmarks/mesh_scale.py --nodes 8 32 64 --full-max 32
    python benchmarks/mesh_scale.py --nodes 1024 --workers 8   # minutes, thousands of threads
    python benchmarks/mesh_scale.py --smoke   # 4 nodes (full mesh) and 8 (ring + random): seconds

Exits non-zero when a node does not finish its mesh or a dial fails (on loopback, a fault).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import queue
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's ncclcheck
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")  # c10d's per-connection chatter

SMOKE = {"nodes": [4, 8], "full_max": 4, "workers": 2}  # --smoke: one size of each plan
PATIENCE = 300.0  # seconds a size may take


def play(port: int, nodes: int, mine: list[int], full_max: int, out) -> None:
    """One worker process: the leaders of ``mine``, each a thread with its own connection to
    the store; they start the mesh together when the parent says go."""
    import torch.distributed as dist

    from ncclcheck.cluster.session import ClusterSession, key
    from ncclcheck.network.mesh import run_mesh

    def joined(r: int) -> ClusterSession:
        store = dist.TCPStore("127.0.0.1", port, nodes, False, timedelta(seconds=PATIENCE))
        session = ClusterSession(store, r, nodes, 0, r, f"node{r}", "127.0.0.1", port,
                                 nodes=nodes)
        session.announce({"rank": r})
        return session

    # the clients connect in parallel, as the nodes of a job do (one at a time: minutes at 1,000)
    with ThreadPoolExecutor(max_workers=16) as pool:
        sessions = list(pool.map(joined, mine))
    sessions[0].store.wait([key("go")], timedelta(seconds=PATIENCE))

    def node(session: ClusterSession) -> None:
        outcome = run_mesh(session, "127.0.0.1", "lo", None, budget=PATIENCE,
                           full_max=full_max, connect_timeout=10.0)
        out.put((session.rank, len(outcome.attempts), len(outcome.failures), time.time()))

    threads = [threading.Thread(target=node, args=(s,)) for s in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join(PATIENCE + 30)


def run(nodes: int, full_max: int, workers: int) -> tuple[float, float, int, int]:
    """Wall seconds from go until the last node finished, dials per node, failed dials, and
    how many nodes never finished."""
    import torch.distributed as dist

    from ncclcheck.cluster.session import key

    server = dist.TCPStore("127.0.0.1", 0, nodes, True, timedelta(seconds=PATIENCE),
                           wait_for_workers=False)
    fork = multiprocessing.get_context("fork")
    out = fork.Queue()
    procs = [fork.Process(target=play, args=(server.port, nodes, share, full_max, out))
             for share in (list(range(w, nodes, workers)) for w in range(workers)) if share]
    for proc in procs:
        proc.start()
    deadline = time.monotonic() + PATIENCE
    while server.add(key("hellos"), 0) < nodes and time.monotonic() < deadline:
        time.sleep(0.1)
    started = time.time()
    server.set(key("go"), "1")
    finished = {}
    while len(finished) < nodes and time.monotonic() < deadline + PATIENCE:
        try:
            rank, dials, failures, when = out.get(timeout=1.0)
        except queue.Empty:
            if not any(proc.is_alive() for proc in procs):
                break
            continue
        finished[rank] = (dials, failures, when)
    for proc in procs:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
    elapsed = max((w for _, _, w in finished.values()), default=time.time()) - started
    dials = sum(d for d, _, _ in finished.values()) / max(1, len(finished))
    return elapsed, dials, sum(f for _, f, _ in finished.values()), nodes - len(finished)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[8, 32, 64])
    parser.add_argument("--full-max", type=int, default=32)
    parser.add_argument("--workers", type=int, default=4,
                        help="processes the nodes are spread over (threads within each)")
    parser.add_argument("--smoke", action="store_true",
                        help="4 nodes on a full mesh and 8 on ring + random peers (seconds)")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    print(f"{'nodes':>6} {'plan':>12} {'wall s':>8} {'dials/node':>11} {'failures':>9} "
          f"{'unfinished':>11}")
    faults = 0
    for n in args.nodes:
        elapsed, per_node, failures, unfinished = run(n, args.full_max, args.workers)
        plan = "full mesh" if n <= args.full_max else "ring+random"
        print(f"{n:>6} {plan:>12} {elapsed:>8.2f} {per_node:>11.1f} {failures:>9} "
              f"{unfinished:>11}")
        faults += failures + unfinished
    return 1 if faults else 0


if __name__ == "__main__":
    raise SystemExit(main())
