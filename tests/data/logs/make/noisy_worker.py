"""Healthy training-loop stand-ins that print the noise real runs print (run by
make_clean_logs.py under torchrun, Gloo on CPU).

Each scenario finishes its work: what it prints on the way (a handled traceback, a retried
store wait, a restart torchrun recovers from, warnings, metrics named after failures, NCCL's
INFO lines) is what a diagnosis must not mistake for the failure of the run. Every message
about a failure is the library's or the kernel's own, only provoked.
"""

from __future__ import annotations

import ctypes
import datetime
import glob
import logging
import os
import sys
import time
import urllib.request
import warnings

import torch
import torch.distributed as dist

SCENARIO = sys.argv[1]
TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT", "30")))
RESTART = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
log = logging.getLogger("train")


def setup() -> int:
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    dist.init_process_group("gloo", timeout=TIMEOUT)
    return dist.get_rank()


def step(tensor: torch.Tensor) -> float:
    dist.all_reduce(tensor)
    time.sleep(0.02)
    return tensor.mean().item()


def finish(rank: int, steps: int) -> None:
    dist.barrier()
    log.info("rank %d: training finished after %d steps", rank, steps)
    dist.destroy_process_group()


def restart(rank: int, how: str) -> None:
    """The first attempt's rank 1 fails: torch.load of a checkpoint caught half-written, or
    an exit status 1; torchrun restarts the group and the second attempt trains."""
    ckpt = os.path.join(os.environ["SCENARIO_DIR"], f"resume-{RESTART}.pt")
    if rank == 0:
        torch.save({"step": 0, "weights": torch.zeros(256)}, ckpt)
        if RESTART == 0:  # the writer is still copying the file when rank 1 reads it
            with open(ckpt, "rb+") as handle:
                handle.truncate(os.path.getsize(ckpt) // 2)
    dist.barrier()
    log.info("rank %d: attempt %d resuming from %s", rank, RESTART, os.path.basename(ckpt))
    if RESTART == 0 and rank == 1 and how == "exit":
        log.error("rank %d: data shard not staged yet, exiting", rank)
        sys.exit(1)
    if RESTART or rank == 1:
        state = torch.load(ckpt)
        log.info("rank %d: resumed at step %d", rank, state["step"])
    tensor = torch.ones(256)
    for n in range(5):
        step(tensor.fill_(1.0))
    finish(rank, 5)


def handled(rank: int) -> None:
    """A bad batch raises inside the step; the loop logs the traceback and skips it."""
    for n in range(6):
        try:
            parts = [torch.ones(4), torch.ones(4 if rank == 0 or n != 3 else 5)]
            batch = torch.stack(parts)
        except RuntimeError:
            log.exception("rank %d: skipping malformed batch at step %d", rank, n)
            batch = torch.zeros(2, 4)
        value = step(batch.sum(0))
        log.info("rank %d: step %d loss %.4f", rank, n, 1.0 / (1.0 + value))
    finish(rank, 6)


def store_retry(rank: int) -> None:
    """Rank 1 waits on a key rank 0 publishes late: the first wait times out, the retry
    (a longer wait) sees it."""
    store = dist.distributed_c10d._get_default_store()
    if rank == 0:
        time.sleep(3)
        store.set("dataset_manifest", "ready")
    else:
        for attempt in (1, 2):
            try:
                store.wait(["dataset_manifest"],
                           datetime.timedelta(seconds=1 if attempt == 1 else 30))
                break
            except dist.DistStoreError as exc:
                log.warning("rank %d: store wait failed (attempt %d/2), retrying: %s",
                            rank, attempt, exc)
        log.info("rank %d: manifest %s", rank, store.get("dataset_manifest").decode())
    tensor = torch.ones(64)
    for n in range(4):
        step(tensor.fill_(1.0))
    finish(rank, 4)


def warnings_run(rank: int) -> None:
    """Deprecated and CPU-only calls of torch that warn and carry on."""
    warnings.simplefilter("default")
    tensor = torch.ones(64)
    tensor.storage()
    scaler = torch.cuda.amp.GradScaler()
    torch.nn.functional.softmax(torch.ones(2, 3))
    out = torch.empty(2)  # resized by the first step, with torch's warning
    for n in range(4):
        value = step(tensor.fill_(1.0))
        torch.mul(torch.ones(4), value, out=out)
        log.info("rank %d: step %d mean %.1f scaler enabled=%s", rank, n, value,
                 scaler.is_enabled())
    finish(rank, 4)


def metrics(rank: int) -> None:
    """Per-step metrics whose names carry failure words, all of them healthy."""
    tensor = torch.ones(16)
    for n in range(5):
        step(tensor.fill_(1.0))
        if rank == 0:
            print(f"step {n} loss=0.{53 - n} error_rate=0.{12 - n:02d} timeout_count=0 "
                  f"failed_samples=0 loss_oom_skipped=0", flush=True)
            print(f"val/error: 0.{31 - n} | 0 errors, no NaN in gradients | "
                  f"nan_count=0 inf_count=0 skipped_steps=0", flush=True)
    finish(rank, 5)


def nccl_unique_id(rank: int) -> None:
    """libnccl's bootstrap (ncclGetUniqueId, no GPU needed) inside the run, as a job that
    loads NCCL beside Gloo prints it with NCCL_DEBUG=INFO."""
    import nvidia.nccl  # the wheel torch's CUDA builds depend on; only this scenario needs it
    lib_dir = os.path.join(next(iter(nvidia.nccl.__path__)), "lib")
    lib = ctypes.CDLL(min(glob.glob(os.path.join(lib_dir, "libnccl.so*"))))
    version = ctypes.c_int()
    lib.ncclGetVersion(ctypes.byref(version))
    unique_id = ctypes.create_string_buffer(128)
    result = lib.ncclGetUniqueId(unique_id)
    log.info("rank %d: libnccl %d unique id result %d", rank, version.value, result)


def nccl_info(rank: int) -> None:
    if rank == 0:
        nccl_unique_id(rank)
    dist.barrier()
    tensor = torch.ones(64)
    for n in range(4):
        log.info("rank %d: step %d mean %.1f", rank, n, step(tensor.fill_(1.0)))
    finish(rank, 4)


def fetch_retry(rank: int) -> None:
    """Rank 0 downloads a shard from a server that resets the first connection; the fetch
    is retried and succeeds."""
    if rank == 0:
        url = os.environ["SCENARIO_URL"]
        for attempt in range(1, 4):
            try:
                with urllib.request.urlopen(url, timeout=10) as reply:
                    log.info("rank 0: fetched %d bytes from %s", len(reply.read()), url)
                break
            except OSError as exc:
                log.warning("rank 0: fetching %s failed (attempt %d/3): %s; retrying in 1s",
                            url, attempt, exc)
                time.sleep(1)
    dist.barrier()
    tensor = torch.ones(64)
    for n in range(3):
        step(tensor.fill_(1.0))
    finish(rank, 3)


def plain(rank: int) -> None:
    tensor = torch.ones(64)
    for n in range(3):
        step(tensor.fill_(1.0))
    finish(rank, 3)


SCENARIOS = {
    "restart_raise": lambda rank: restart(rank, "raise"),
    "restart_exit": lambda rank: restart(rank, "exit"),
    "handled": handled,
    "store_retry": store_retry,
    "warnings": warnings_run,
    "metrics": metrics,
    "nccl_info": nccl_info,
    "fetch_retry": fetch_retry,
    "plain": plain,
}

if __name__ == "__main__":
    SCENARIOS[SCENARIO](setup())
