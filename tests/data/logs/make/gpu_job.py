"""One real failure on a GPU node per argv[1], printed by the real torch, NCCL and Lightning.

Run by make_gpu_logs.py; each case is what a user's job does wrong, made on purpose.
"""

from __future__ import annotations

import ctypes
import os
import sys

import torch
import torch.distributed as dist


def allreduce() -> None:
    tensor = torch.ones(1024, device="cuda")
    dist.all_reduce(tensor)
    torch.cuda.synchronize()
    print("all_reduce sum", tensor[0].item(), flush=True)


def one_rank(port: str) -> None:
    """A one-rank NCCL group on GPU 0 with one all-reduce: the settings make or break it."""
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0,
                            world_size=1, device_id=torch.device("cuda:0"))
    allreduce()
    dist.destroy_process_group()


def invalid_rank() -> None:
    """The motivating case at the library itself: rank 6 asks to join a 4-rank communicator."""
    torch.zeros(1, device="cuda")
    lib = ctypes.CDLL("libnccl.so.2")  # the copy torch loaded

    class UniqueId(ctypes.Structure):
        _fields_ = [("internal", ctypes.c_char * 128)]

    uid, comm = UniqueId(), ctypes.c_void_p()
    lib.ncclGetUniqueId(ctypes.byref(uid))
    lib.ncclGetErrorString.restype = ctypes.c_char_p
    code = lib.ncclCommInitRank(ctypes.byref(comm), 4, uid, 6)
    print(f"ncclCommInitRank(nranks=4, rank=6): {lib.ncclGetErrorString(code).decode()}",
          flush=True)
    sys.exit(1 if code else 0)


def torchrun_rank(device: int) -> None:
    """Under torchrun: each rank takes GPU ``device`` and joins the job's NCCL group."""
    torch.cuda.set_device(device)
    dist.init_process_group("nccl")
    allreduce()
    dist.destroy_process_group()


def main(case: str, port: str) -> None:
    if case == "one_rank":
        one_rank(port)
    elif case == "invalid_rank":
        invalid_rank()
    elif case == "local_rank_gpu":          # torchrun --nproc-per-node beyond the GPUs
        torchrun_rank(int(os.environ["LOCAL_RANK"]))
    elif case == "same_gpu":                # every rank on GPU 0
        torchrun_rank(0)
    elif case == "oom":
        torch.empty(int(400e9), dtype=torch.uint8, device="cuda")
    elif case == "nccl_without_gpu":        # CUDA_VISIBLE_DEVICES= and the nccl backend
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0,
                                world_size=1)
        dist.all_reduce(torch.ones(4))
    elif case == "lightning_devices":
        try:
            import lightning.pytorch as pl
        except ImportError:  # only the older package name installed
            import pytorch_lightning as pl
        pl.Trainer(accelerator="gpu", devices=torch.cuda.device_count() + 3, strategy="ddp",
                   logger=False)
    else:
        raise SystemExit(f"unknown case {case!r}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "29611")
