"""Training-step stand-ins that fail in the ways the corpus records (run by make_real_logs.py).

Each scenario is a real torch.distributed (Gloo, CPU) program; the failure is the real
library's own, only provoked.
"""

import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

SCENARIO = sys.argv[1]
TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT", "20")))


def allreduce_steps(steps: int, kill_rank: int | None = None) -> None:
    tensor = torch.ones(1024)
    for step in range(steps):
        if kill_rank is not None and dist.get_rank() == kill_rank and step == 3:
            print(f"rank {kill_rank}: step {step}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        dist.all_reduce(tensor)
        time.sleep(0.05)
    print(f"rank {dist.get_rank()}: done, sum {tensor[0].item():.0f}", flush=True)


if SCENARIO == "ok":
    dist.init_process_group("gloo", timeout=TIMEOUT)
    allreduce_steps(5)
    dist.destroy_process_group()
elif SCENARIO == "half_world":
    # The per-node count passed as the world size: ranks beyond it cannot join.
    dist.init_process_group("gloo", rank=int(os.environ["RANK"]),
                            world_size=int(os.environ["LOCAL_WORLD_SIZE"]) // 2, timeout=TIMEOUT)
    allreduce_steps(3)
    dist.destroy_process_group()
elif SCENARIO == "kill_rank1":
    dist.init_process_group("gloo", timeout=TIMEOUT)
    allreduce_steps(50, kill_rank=1)
elif SCENARIO == "value_error":
    dist.init_process_group("gloo", timeout=TIMEOUT)
    if dist.get_rank() == 1:
        raise ValueError("batch has 0 samples on rank 1")
    allreduce_steps(2)
elif SCENARIO == "init":
    dist.init_process_group("gloo", timeout=TIMEOUT)
    allreduce_steps(2)
    dist.destroy_process_group()
elif SCENARIO == "init_none_world":
    dist.init_process_group("gloo", rank=0, world_size=None, timeout=TIMEOUT)
else:
    raise SystemExit(f"unknown scenario {SCENARIO}")
