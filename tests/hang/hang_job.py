"""A small Gloo job that hangs on purpose, in the shape HANG_SCENARIO names (tests/test_hang_real.py):

- ``outside``: rank HANG_CULPRIT is stuck in its data loading; the others wait in all_reduce;
- ``other_collective``: rank HANG_CULPRIT calls broadcast where the others call all_reduce;
- ``gone``: rank HANG_CULPRIT exits (code 0) while the others wait in all_reduce. Gloo notices
  a closed socket at once, where NCCL keeps waiting until its watchdog fires: the exiting rank
  first hands its sockets to the holder process at HANG_HOLDER (a unix socket the test serves),
  so that, as under NCCL, its peers wait for a rank that is gone;
- ``same``: every rank waits in all_reduce on the same line, half of them on another process
  group of the same members, so none ever completes;
- ``healthy``: every rank trains (compute and all_reduce) until HANG_SECONDS have passed.

Like a real training process, every rank also runs a heartbeat thread in the script's own code
and an idle thread pool (an asynchronous checkpoint writer): neither may speak for the rank.
Every rank writes ``ready-<rank>`` into HANG_DIR once it is about to hang; ``HANG_ARM=1`` arms
the process first (ncclcheck's one-line hook); ``HANG_DEBUG_SERVER=1`` starts torch's debug
server.
"""

import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.distributed as dist

if os.environ.get("HANG_ARM") == "1":
    from ncclcheck.hang import arm; arm()  # noqa: E702  (the one-line hook, as users write it)


def heartbeat() -> None:
    while True:
        time.sleep(5)  # heartbeat-line


def load_batch(seconds: float) -> torch.Tensor:
    time.sleep(seconds)  # load-batch-line: a data loader that never returns
    return torch.ones(4)


def hand_over_sockets(path: str) -> None:
    """Send every socket this process holds to the holder, which keeps them open."""
    fds = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                fds.append(int(fd))
        except OSError:
            continue
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(path)
        socket.send_fds(conn, [b"fds"], fds)
        conn.recv(1)  # the holder has them


def ready(rank: int) -> None:
    folder = os.environ["HANG_DIR"]
    with open(os.path.join(folder, f"ready-{rank}.tmp"), "w") as handle:
        handle.write(str(os.getpid()))
    os.replace(os.path.join(folder, f"ready-{rank}.tmp"), os.path.join(folder, f"ready-{rank}"))


def main() -> None:
    dist.init_process_group("gloo")
    if os.environ.get("HANG_DEBUG_SERVER") == "1":
        from torch.distributed.debug import start_debug_server
        start_debug_server(port=0)
    threading.Thread(target=heartbeat, name="heartbeat", daemon=True).start()
    writer = ThreadPoolExecutor(1, thread_name_prefix="checkpoint")
    writer.submit(time.sleep, 0).result()
    rank = dist.get_rank()
    scenario = os.environ["HANG_SCENARIO"]
    culprit = int(os.environ.get("HANG_CULPRIT", "1"))
    limit = float(os.environ.get("HANG_SECONDS", "120"))
    other = dist.new_group(list(range(dist.get_world_size())))
    t = torch.ones(4)
    dist.all_reduce(t)  # every rank is up and connected
    ready(rank)
    if scenario == "healthy":
        end = time.time() + limit
        w = torch.randn(256, 256)
        while time.time() < end:
            for _ in range(20):
                w = torch.tanh(w @ w.T / 256)
            dist.all_reduce(w)
        return
    if rank == culprit and scenario == "outside":
        t = load_batch(limit)
    if rank == culprit and scenario == "gone":
        hand_over_sockets(os.environ["HANG_HOLDER"])
        os._exit(0)  # no destructor may shut the handed-over sockets down
    if rank == culprit and scenario == "other_collective":
        dist.broadcast(t, src=culprit)  # broadcast-line
        return
    group = other if scenario == "same" and rank % 2 else None
    dist.all_reduce(t, group=group)  # all-reduce-line


if __name__ == "__main__":
    main()
