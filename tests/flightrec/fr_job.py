"""A small Gloo job run under torchrun by tests/test_flightrec_real.py: every rank records
collectives in torch's flight recorder and writes its dump when the job fails (a collective
times out), when torchrun stops it (SIGTERM), or at the end. FR_SCENARIO picks the fault:

  completed   every rank runs every collective
  skip        rank FR_CULPRIT skips collective FR_AT of the default group
  other_op    rank FR_CULPRIT calls broadcast where the others call all_reduce (FR_AT)
  subgroup    ranks 2 and 3 form a group; rank 3 skips collective FR_AT of that group only
  killed      rank FR_CULPRIT kills itself (SIGKILL) before collective FR_AT (run it alone on a
              second torchrun "node", so the first node's ranks live on and wait, as on a
              cluster)
  stuck       rank FR_CULPRIT sleeps in Python before collective FR_AT
FR_COUNT collectives in all; FR_DIR/<prefix><rank> is the dump (FR_FORMAT pickle or json;
FR_HOSTS=1 puts a host-like name in the prefix, different per node as on a real cluster).
A rank dumps when its collective times out (as TORCH_NCCL_DUMP_ON_TIMEOUT does), at its end,
and, for the culprit that stops calling collectives (skip, stuck), when it stops.
"""

import datetime
import os
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _dump_fr_trace, _dump_fr_trace_json

RANK = int(os.environ["RANK"])
SCENARIO = os.environ["FR_SCENARIO"]
CULPRIT = int(os.environ.get("FR_CULPRIT", "1"))
AT = int(os.environ.get("FR_AT", "3"))
COUNT = int(os.environ.get("FR_COUNT", "6"))
TIMEOUT_S = float(os.environ.get("FR_TIMEOUT_S", "5"))
_written = threading.Lock()


def dump_path() -> str:
    prefix = "nccl_trace_rank_"
    if os.environ.get("FR_HOSTS") == "1":
        prefix += ("node-a1_" if RANK % 2 == 0 else "node-b7_")
    return os.path.join(os.environ["FR_DIR"], f"{prefix}{RANK}")


def write_dump(*_args) -> None:
    if not _written.acquire(blocking=False):
        return
    try:
        if os.environ.get("FR_FORMAT") == "json":
            data = _dump_fr_trace_json()
        else:
            data = _dump_fr_trace()
        with open(dump_path(), "wb") as out:
            out.write(data if isinstance(data, bytes) else data.encode())
    except BaseException as exc:  # say so: the test then names the dump it lacks
        print(f"rank {RANK}: no dump: {type(exc).__name__}: {exc}", file=sys.stderr)


def main() -> None:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=TIMEOUT_S))
    sub = (dist.new_group([2, 3], timeout=datetime.timedelta(seconds=TIMEOUT_S))
           if SCENARIO == "subgroup" else None)
    t = torch.ones(16)
    for n in range(1, COUNT + 1):
        if n == AT and RANK == CULPRIT:
            if SCENARIO == "skip":
                continue
            if SCENARIO == "killed":
                os.kill(os.getpid(), signal.SIGKILL)
            if SCENARIO == "stuck":
                write_dump()
                time.sleep(3600)
            if SCENARIO == "other_op":
                dist.broadcast(t, 0)
                continue
        if SCENARIO == "subgroup" and RANK in (2, 3):
            if not (n == AT and RANK == 3):
                dist.all_reduce(t, group=sub)
        dist.all_reduce(t)
    write_dump()
    if SCENARIO != "completed":  # a rank that got ahead goes on with other work
        time.sleep(3600)


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:  # a timed-out or broken collective: dump, then fail
        write_dump()
        print(f"rank {RANK}: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
        time.sleep(TIMEOUT_S + 1)  # as every rank's watchdog would: let the others time out
        sys.exit(1)                # and dump before torchrun tears the job down
