"""Re-create the corpus's GPU logs: real torch, NCCL and Lightning on a node with CUDA GPUs.

    python tests/data/logs/make/make_gpu_logs.py [--out DIR] [NAME ...]

Each scenario provokes one failure (or one clean run) with NCCL_DEBUG set and stores what was
printed, paths made neutral as make_real_logs.py does. By default the logs go where the corpus
keeps them (real/ and clean/); tests/gpu/test_gpu_logs.py writes them to a temporary folder
instead and checks that explain still reads today's NCCL and torch the way the corpus says.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_real_logs import HERE, PY, TORCHRUN, base_env, free_port, neutral, run  # noqa: E402

JOB = str(HERE / "gpu_job.py")


def job(case: str, **env: str) -> str:
    return run([PY, JOB, case, str(free_port())], base_env(**env), timeout=90)


def torchrun(case: str, nproc: int, **env: str) -> str:
    argv = TORCHRUN + ["--standalone", "--nproc-per-node", str(nproc), JOB, case]
    return run(argv, base_env(**env), timeout=120)


def gpus() -> int:
    import torch
    return torch.cuda.device_count()


# name -> (folder, how it is made)
SCENARIOS = {
    "gpu-nccl-socket-ifname-nothing.log":
        ("real", lambda: job("one_rank", NCCL_DEBUG="INFO", NCCL_SOCKET_IFNAME="nosuch0")),
    "gpu-nccl-net-ib-without-ib.log":
        ("real", lambda: job("one_rank", NCCL_DEBUG="INFO", NCCL_NET="IB")),
    "gpu-nccl-invalid-rank.log":
        ("real", lambda: job("invalid_rank", NCCL_DEBUG="WARN")),
    "gpu-torchrun-more-ranks-than-gpus.log":
        ("real", lambda: torchrun("local_rank_gpu", gpus() + 3, NCCL_DEBUG="INFO")),
    "gpu-torchrun-two-ranks-one-gpu.log":
        ("real", lambda: torchrun("same_gpu", 2, NCCL_DEBUG="WARN", CUDA_VISIBLE_DEVICES="0")),
    "gpu-cuda-out-of-memory.log":
        ("real", lambda: job("oom")),
    "gpu-nccl-backend-no-visible-gpu.log":
        ("real", lambda: job("nccl_without_gpu", NCCL_DEBUG="INFO", CUDA_VISIBLE_DEVICES="")),
    "gpu-lightning-devices-beyond-gpus.log":
        ("real", lambda: job("lightning_devices")),
    "gpu-nccl-info-allreduce-ok.log":
        ("clean", lambda: job("one_rank", NCCL_DEBUG="INFO")),
    "gpu-nccl-missing-net-plugin-ok.log":
        ("clean", lambda: job("one_rank", NCCL_DEBUG="INFO", NCCL_NET_PLUGIN="nosuchplugin")),
}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="one folder for every log (default: the corpus)")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args(argv)
    for name, (folder, make) in SCENARIOS.items():
        if args.names and name not in args.names:
            continue
        target = (args.out or HERE.parent / folder) / name
        target.parent.mkdir(parents=True, exist_ok=True)
        text = neutral(make())
        target.write_text(text, "utf-8")
        print(f"{target.parent.name}/{name}: {len(text.splitlines())} lines", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
