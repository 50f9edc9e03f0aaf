"""How the node-to-node mesh scales: wall time and connections per node at N simulated nodes.

Every node is a thread with its own ClusterSession on one real TCPStore and its own listener on
loopback, so the numbers include the store round trips, the handshakes and the barrier.
Above --full-max nodes the plan switches from a full mesh to ring + random peers.

    python benchmarks/mesh_scale.py --nodes 8 32 64 --full-max 32
    python benchmarks/mesh_scale.py --smoke   # 4 nodes (full mesh) and 8 (ring + random): seconds

Exits non-zero when a node does not finish its mesh or a dial fails (on loopback, a fault).
"""

from __future__ import annotations

import argparse
import threading
import time
from datetime import timedelta

SMOKE = {"nodes": [4, 8], "full_max": 4}  # --smoke: one size of each plan


def run(nodes: int, full_max: int) -> tuple[float, float, int, int]:
    """Wall seconds, dials per node, failed dials, and how many nodes never finished."""
    import torch.distributed as dist

    from ncclcheck.cluster.session import ClusterSession
    from ncclcheck.network.mesh import run_mesh

    server = dist.TCPStore("127.0.0.1", 0, nodes, True, timedelta(seconds=60),
                           wait_for_workers=False)
    sessions = [ClusterSession(server if r == 0 else dist.TCPStore(
        "127.0.0.1", server.port, nodes, False, timedelta(seconds=60)), r, nodes, 0, r,
        f"node{r}", "127.0.0.1", server.port) for r in range(nodes)]
    for session in sessions:
        session.announce({"rank": session.rank})
    outcomes = {}

    def node(session: ClusterSession) -> None:
        outcomes[session.rank] = run_mesh(session, "127.0.0.1", "lo", None, budget=60.0,
                                          full_max=full_max, connect_timeout=5.0)

    started = time.perf_counter()
    threads = [threading.Thread(target=node, args=(s,)) for s in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    elapsed = time.perf_counter() - started
    attempts = [len(o.attempts) for o in outcomes.values()]
    failures = sum(len(o.failures) for o in outcomes.values())
    return elapsed, sum(attempts) / max(1, len(attempts)), failures, nodes - len(outcomes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[8, 32, 64])
    parser.add_argument("--full-max", type=int, default=32)
    parser.add_argument("--smoke", action="store_true",
                        help="4 nodes on a full mesh and 8 on ring + random peers (seconds)")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    print(f"{'nodes':>6} {'plan':>12} {'wall s':>8} {'dials/node':>11} {'failures':>9} "
          f"{'unfinished':>11}")
    faults = 0
    for n in args.nodes:
        elapsed, per_node, failures, unfinished = run(n, args.full_max)
        plan = "full mesh" if n <= args.full_max else "ring+random"
        print(f"{n:>6} {plan:>12} {elapsed:>8.2f} {per_node:>11.1f} {failures:>9} "
              f"{unfinished:>11}")
        faults += failures + unfinished
    return 1 if faults else 0


if __name__ == "__main__":
    raise SystemExit(main())
