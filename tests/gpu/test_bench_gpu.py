"""NCCL on real GPUs: the sweep on every local GPU, the NCCL version three ways, bfloat16, and
two ranks on one GPU explained as duplicate_gpu. Skipped where torch sees no CUDA device;
`bash tests/gpu/run_gpu_checks.sh` runs these on a GPU machine.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys

import pytest


def _cuda_devices() -> int:
    if not glob.glob("/dev/nvidia[0-9]*"):
        return 0
    try:
        import torch
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


GPUS = _cuda_devices()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPUS == 0, reason="needs a CUDA GPU")]
LAUNCHER_PREFIXES = ("RANK", "WORLD_SIZE", "LOCAL_", "NODE_RANK", "GROUP_", "MASTER_", "SLURM",
                     "OMPI_", "PMI_", "MPI_LOCAL", "PET_", "JSM_", "LSB_", "TORCHELASTIC", "ROLE_",
                     "NCCLCHECK_BENCH_FAULT")


def ncclcheck(*args: str, env: dict[str, str] | None = None, launcher: list[str] | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_PREFIXES)}
    base.update(env or {})
    argv = (launcher or [sys.executable]) + ["-m", "ncclcheck", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=base, timeout=timeout)


def checks_of(report: dict) -> dict[str, dict]:
    return {c["id"]: c for c in report["checks"]}


def torch_nccl_version() -> str:
    import torch
    return ".".join(str(v) for v in torch.cuda.nccl.version()[:3])


def test_nccl_bench_on_every_local_gpu():
    proc = ncclcheck("bench", "--backend", "nccl", "--max-bytes", "256M", "--format", "json",
                     "--timeout", "180")
    report = json.loads(proc.stdout)
    bench = report["bench"]
    assert proc.returncode == 0, json.dumps(report["checks"], indent=1) + proc.stderr[-3000:]
    assert bench["backend"] == "nccl" and bench["world_size"] == GPUS
    assert bench["rows"][-1]["bytes"] == 256 << 20
    assert all(r["wrong"] == 0 and r["algbw_gbps"] > 0 for r in bench["rows"])
    if GPUS > 1:
        assert bench["peak_busbw_gbps"] > 1.0  # any GPU interconnect beats 1 GB/s
    assert checks_of(report)["bench.allreduce"]["status"] == "pass"
    print(json.dumps({k: bench[k] for k in ("world_size", "gpu", "nccl_version",
                                              "avg_busbw_gbps", "peak_busbw_gbps", "peak_bytes")}))


def test_nccl_version_agrees_with_torch_and_the_library_banner():
    proc = ncclcheck("run", "--checks", "nccl,bench", "--format", "json", "--timeout", "120")
    report = json.loads(proc.stdout)
    bench_version = report["bench"]["nccl_version"]
    assert bench_version.split("-")[0] == torch_nccl_version()
    library = checks_of(report).get("nccl.version")
    if library and library["status"] == "pass":
        assert library["details"]["version"] == bench_version.split("-")[0]
    banner = subprocess.run(
        [sys.executable, "-c",
         "import os, torch, torch.distributed as dist\n"
         "dist.init_process_group('nccl', init_method='tcp://127.0.0.1:29593', rank=0, "
         "world_size=1, device_id=torch.device('cuda:0'))\n"
         "t = torch.ones(4, device='cuda'); dist.all_reduce(t); torch.cuda.synchronize()\n"
         "dist.destroy_process_group()\n"],
        capture_output=True, text=True, env=dict(os.environ, NCCL_DEBUG="VERSION"), timeout=120)
    match = re.search(r"NCCL version (\d+\.\d+\.\d+)", banner.stdout + banner.stderr)
    assert match, banner.stdout + banner.stderr
    assert match.group(1) == bench_version.split("-")[0]


def test_bfloat16_sweep_is_exact():
    proc = ncclcheck("bench", "--backend", "nccl", "--dtype", "bfloat16", "--max-bytes", "64M",
                     "--format", "json", "--timeout", "120")
    report = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert {r["dtype"] for r in report["bench"]["rows"]} == {"bfloat16"}
    assert sum(r["wrong"] for r in report["bench"]["rows"]) == 0


def test_two_ranks_on_one_gpu_are_duplicate_gpu():
    torchrun = [os.path.join(os.path.dirname(sys.executable), "torchrun"), "--standalone",
                "--nproc-per-node", "2"]
    proc = ncclcheck("bench", "--backend", "nccl", "--max-bytes", "1M", "--format", "json",
                     "--timeout", "90", env={"CUDA_VISIBLE_DEVICES": "0"}, launcher=torchrun)
    report = json.loads(proc.stdout)
    check = checks_of(report)["bench.allreduce"]
    assert proc.returncode == 1
    assert check["status"] == "fail" and check["category"] == "duplicate_gpu", check
    assert "ranks 0, 1" in check["summary"]


@pytest.mark.skipif(GPUS < 2, reason="needs two GPUs")
def test_a_hung_nccl_rank_is_named_and_torn_down():
    proc = ncclcheck("bench", "--backend", "nccl", "--max-bytes", "1M", "--format", "json",
                     "--timeout", "30", env={"NCCLCHECK_BENCH_FAULT": "hang:1@1"}, timeout=60)
    check = checks_of(json.loads(proc.stdout))["bench.allreduce"]
    assert check["category"] == "timeout" and 1 in check["details"]["ranks"]


def test_the_sweep_is_compared_with_the_figure_expected_of_these_gpus():
    """bench.expected_busbw on real GPUs: with one GPU a skip that says why; with several, the
    share of the table's figure for this model and count (or the PCIe floor), like with like
    only when the sweep reached the figure's size."""
    proc = ncclcheck("bench", "--backend", "nccl", "--max-bytes", "256M", "--format", "json",
                     "--timeout", "180")
    check = checks_of(json.loads(proc.stdout))["bench.expected_busbw"]
    if GPUS == 1:
        assert check["status"] == "skip" and "one GPU on one node" in check["summary"], check
        return
    details = check["details"]
    assert check["status"] in ("pass", "warn", "fail"), check
    assert details["expected"]["sources"] and 0 < details["share"]
    assert details["hardware"]["gpus_per_node"] == GPUS and details["hardware"]["gpu"]
    if details["expected"]["bytes"] and details["expected"]["bytes"] > 256 << 20:
        assert details["like_for_like"] is False and check["status"] != "fail"


def test_known_issues_read_the_gpu_names_the_driver_lists():
    from ncclcheck.probes.nccl.known_issues import read_gpu_names
    names = read_gpu_names()
    assert names and all(n for n in names), names
    proc = ncclcheck("nccl", "--format", "json", "--local")
    check = checks_of(json.loads(proc.stdout))["nccl.known_issues"]
    assert check["status"] in ("pass", "warn") and "nccl" in check["details"]["versions"]
