"""A two-rank job whose rank 1 dies, so that a real launcher reports the death (run by
make_launcher_tails.py under torchrun, srun and mpirun).

    python dying_rank.py abort|exit1

Rank 1 calls os.abort() (SIGABRT) or exits 1 after an exception; rank 0 waits until the
launcher stops it. Each rank prints one marker line, so the launcher's own lines can be told
apart from the worker's (and the launcher's per-line prefix seen on a worker line). No torch:
what is recorded is the launcher, not a collective.
"""

import os
import sys
import time

RANK = int(os.environ.get("RANK") or os.environ.get("SLURM_PROCID")
           or os.environ.get("OMPI_COMM_WORLD_RANK") or 0)
MARKER = "dying_rank: ready"

print(f"{MARKER} rank {RANK}", flush=True)
if RANK == 1:
    time.sleep(1.0)  # the other rank is up and waiting when this one dies
    if sys.argv[1] == "abort":
        os.abort()
    try:
        raise RuntimeError("rank 1 gives up")
    except RuntimeError:
        sys.exit(1)
time.sleep(20.0)  # the launcher stops this rank long before
