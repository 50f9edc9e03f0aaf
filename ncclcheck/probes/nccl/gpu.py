"""GPU and CUDA readiness for NCCL: the questions that need a GPU, asked only when there is one.

Each check skips with its reason when this host has no CUDA build of torch or no GPU; torch and
the driver are asked lazily (``ncclcheck.ncclib.gpu`` holds the pure helpers and the reads).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ncclcheck.gpus import parse_visible_devices
from ncclcheck.model import Category, CheckResult, failed, passed, skipped, warned
from ncclcheck.ncclib.gpu import (arch_supported, compute_modes, cuda_driver_version,
                                  driver_supports, torch_build_without_cuda)
from ncclcheck.ncclib.version import cuda_version_tuple
from ncclcheck.needs import needs_torch, torch_missing
from ncclcheck.probes.nccl.facts import NcclFacts, int_value
from ncclcheck.probes.spec import CheckSpec, judge

_DEVICE = re.compile(r"^(\d+|GPU-[0-9A-Fa-f-]+|MIG-[0-9A-Za-z/-]+)$")
BF16_MIN_CAPABILITY = (8, 0)

CUDA_VISIBLE_DEVICES = CheckSpec(
    "nccl.cuda_visible_devices", "CUDA_VISIBLE_DEVICES is a valid list",
    (Category.DUPLICATE_GPU,),
    fails_when="an entry is empty, invalid (CUDA stops there) or repeated",
    order=100)
CUDA_DRIVER = CheckSpec(
    "nccl.cuda_driver", "The NVIDIA driver runs torch's CUDA build", (Category.CUDA,),
    fails_when="torch is a CPU-only build on a host with a driver, or the driver is "
               "older than torch's CUDA major version",
    order=110)
GPU_VISIBLE = CheckSpec(
    "nccl.gpu_visible", "LOCAL_RANK has a GPU", (Category.RANK_MISMATCH,),
    fails_when="LOCAL_RANK is not below the number of visible GPUs",
    order=120)
GPU_ARCH = CheckSpec(
    "nccl.gpu_arch", "The GPU is in torch's arch list", (Category.CUDA,),
    fails_when="torch has no code for the GPU's compute capability",
    order=130)
GPU_BF16 = CheckSpec(
    "nccl.gpu_bf16", "The GPU has native bfloat16", (Category.CUDA,),
    warns_when="compute capability below 8.0 (bf16 is emulated)",
    order=140)
GPU_COMPUTE_MODE = CheckSpec(
    "nccl.gpu_compute_mode", "GPUs are in the Default compute mode", (Category.CUDA,),
    fails_when="a GPU is exclusive or prohibited",
    order=150)


@judge(CUDA_VISIBLE_DEVICES, CUDA_DRIVER, GPU_VISIBLE, GPU_ARCH, GPU_BF16, GPU_COMPUTE_MODE)
def judge_gpus(facts: NcclFacts) -> list[CheckResult]:
    env = facts.ctx.env
    return gpu_checks(env, int_value(env.get("LOCAL_RANK")), min(5.0, facts.ctx.remaining()))


@dataclass(frozen=True)
class VisibleDevicesFinding:
    ok: bool
    summary: str
    fix: str | None = None
    category: Category | None = None


def judge_visible_devices(value: str) -> VisibleDevicesFinding:
    """CUDA_VISIBLE_DEVICES: CUDA stops at the first invalid entry and a repeated device gives
    two ranks one GPU."""
    entries = parse_visible_devices(value)
    if entries is None:
        return VisibleDevicesFinding(False, f"CUDA_VISIBLE_DEVICES={value!r} has an empty entry",
                                     "Write CUDA_VISIBLE_DEVICES as a comma list without gaps, "
                                     "e.g. 0,1,2,3.", Category.DUPLICATE_GPU)
    bad = next((e for e in entries if not _DEVICE.match(e)), None)
    if bad is not None:
        kept = entries[:entries.index(bad)]
        return VisibleDevicesFinding(False, f"CUDA_VISIBLE_DEVICES={value!r}: CUDA stops at "
                                     f"{bad!r}, so only {len(kept)} device(s) are visible",
                                     "Use GPU indices or GPU-/MIG- UUIDs only, e.g. "
                                     "CUDA_VISIBLE_DEVICES=0,1,2,3.", Category.DUPLICATE_GPU)
    seen: set[str] = set()
    repeated = [e for e in entries if e in seen or seen.add(e)]  # type: ignore[func-returns-value]
    if repeated:
        return VisibleDevicesFinding(False, f"CUDA_VISIBLE_DEVICES={value!r} repeats "
                                     f"{', '.join(sorted(set(repeated)))}: CUDA refuses the list "
                                     "or two ranks share one GPU", "List each GPU once in "
                                     "CUDA_VISIBLE_DEVICES.", Category.DUPLICATE_GPU)
    shown = "no GPU" if not entries else f"{len(entries)} device(s): {', '.join(entries)}"
    return VisibleDevicesFinding(True, f"CUDA_VISIBLE_DEVICES={value!r} exposes {shown}")


def visible_devices_checks(env: Mapping[str, str]) -> list[CheckResult]:
    """nccl.cuda_visible_devices, when CUDA_VISIBLE_DEVICES is set."""
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return []
    finding = judge_visible_devices(value)
    if finding.ok:
        return [passed(CUDA_VISIBLE_DEVICES, finding.summary, value=value)]
    return [failed(CUDA_VISIBLE_DEVICES, finding.summary, finding.fix or "",
                   finding.category or Category.DUPLICATE_GPU, value=value)]


def gpu_checks(env: Mapping[str, str], local_rank: int | None, timeout: float,
               driver_version: Callable[[], int | None] | None = None) -> list[CheckResult]:
    """nccl.cuda_* / nccl.gpu_* checks; each skips with its reason when there is nothing to ask.
    ``driver_version`` defaults to asking libcuda (tests pass their own)."""
    driver_version = driver_version or cuda_driver_version
    results = visible_devices_checks(env)
    cuda_checks = (CUDA_DRIVER, GPU_VISIBLE, GPU_ARCH, GPU_BF16, GPU_COMPUTE_MODE)
    cpu_build = torch_build_without_cuda()
    if cpu_build is not None:
        driver = driver_version()
        if driver is None:
            why = (f"skipped: {cpu_build} is a CPU-only build and this host has no NVIDIA driver, "
                   "so there is no CUDA to check")
            return results + [skipped(i, why, torch=cpu_build) for i in cuda_checks]
        dmaj, dmin = cuda_version_tuple(driver)
        results.append(failed(CUDA_DRIVER, f"{cpu_build} is a CPU-only build, but this host "
                              f"has an NVIDIA driver (CUDA {dmaj}.{dmin}): the job cannot use its "
                              "GPUs or backend='nccl'",
                              "Install a CUDA build of torch matching the driver (CUDA "
                              f"{dmaj}.x wheels from download.pytorch.org/whl/cu{dmaj}x).",
                              Category.CUDA, torch=cpu_build, driver_cuda=f"{dmaj}.{dmin}"))
        why = f"skipped: {cpu_build} is a CPU-only build; torch cannot see the GPUs"
        return results + [skipped(i, why, torch=cpu_build) for i in cuda_checks[1:]]
    missing = torch_missing()
    if missing:  # each of these asks torch what it was built for and what it sees
        return results + [needs_torch(i, missing) for i in cuda_checks]
    try:
        import torch  # deferred: seconds to import; only this family's GPU part pays for it
    except Exception as exc:
        return results + [skipped(i, f"skipped: torch does not import ({type(exc).__name__})")
                          for i in cuda_checks]
    if torch.version.cuda is None:
        why = (f"skipped: torch {torch.__version__} is a CPU-only build, so there is no CUDA "
               "to check")
        return results + [skipped(i, why, torch=torch.__version__) for i in cuda_checks]
    driver = driver_version()
    if driver is None:
        why = "skipped: no NVIDIA driver here (libcuda.so.1 does not load), so no GPU to check"
        return results + [skipped(i, why, torch_cuda=torch.version.cuda) for i in cuda_checks]
    dmaj, dmin = cuda_version_tuple(driver)
    if not driver_supports(torch.version.cuda, driver):
        results.append(failed(CUDA_DRIVER, f"the driver supports CUDA {dmaj}.{dmin}, but "
                              f"torch is built for CUDA {torch.version.cuda}",
                              "Upgrade the NVIDIA driver, "
                              f"or install a torch build for CUDA {dmaj}.x.", Category.CUDA,
                              driver_cuda=f"{dmaj}.{dmin}", torch_cuda=torch.version.cuda))
        return results
    results.append(passed(CUDA_DRIVER, f"driver supports CUDA {dmaj}.{dmin}; torch is built "
                          f"for CUDA {torch.version.cuda}", driver_cuda=f"{dmaj}.{dmin}",
                          torch_cuda=torch.version.cuda))
    if not torch.cuda.is_available():
        return results + [skipped(i, "skipped: the driver loads but torch sees no GPU")
                          for i in cuda_checks[1:]]
    return results + device_checks(torch, local_rank, timeout)


def device_checks(torch: Any, local_rank: int | None, timeout: float) -> list[CheckResult]:
    """nccl.gpu_visible / gpu_arch / gpu_bf16 / gpu_compute_mode on a host torch sees GPUs on."""
    results: list[CheckResult] = []
    count = torch.cuda.device_count()
    rank = local_rank if local_rank is not None else 0
    if rank >= count:
        results.append(failed(GPU_VISIBLE, f"LOCAL_RANK={rank} but only {count} GPU(s) are "
                              "visible", "Start at most one process per visible GPU "
                              f"(--gpus-per-node {count}), or fix CUDA_VISIBLE_DEVICES.",
                              Category.RANK_MISMATCH, local_rank=rank, visible=count))
        return results
    results.append(passed(GPU_VISIBLE, f"LOCAL_RANK={rank} has GPU {rank} of {count}",
                          local_rank=rank, visible=count))
    capability = tuple(torch.cuda.get_device_capability(rank))
    name = torch.cuda.get_device_name(rank)
    arch_list = list(torch.cuda.get_arch_list())
    cap = f"{capability[0]}.{capability[1]}"
    if arch_supported(capability, arch_list):  # type: ignore[arg-type]
        results.append(passed(GPU_ARCH, f"{name} (sm_{cap}) is in torch's arch list",
                              capability=cap, arch_list=arch_list))
    else:
        results.append(failed(GPU_ARCH, f"{name} (compute capability {cap}) has no code in "
                              f"torch's arch list {', '.join(arch_list)}", "Install a torch build "
                              f"that includes sm_{cap.replace('.', '')}.", Category.CUDA,
                              capability=cap, arch_list=arch_list))
    if capability >= BF16_MIN_CAPABILITY:
        results.append(passed(GPU_BF16, f"{name} supports bfloat16 (FSDP bf16 mixed "
                              "precision works)", capability=cap))
    else:
        results.append(warned(GPU_BF16, f"{name} (compute capability {cap}) has no native "
                              "bfloat16: bf16 mixed precision is emulated and slow",
                              "Use float16 mixed precision (MixedPrecision(param_dtype="
                              "torch.float16)) or precision='16-mixed' on this GPU.", Category.CUDA,
                              capability=cap))
    modes = compute_modes(timeout)
    if modes is None:
        results.append(skipped(GPU_COMPUTE_MODE, "skipped: nvidia-smi is not available"))
    elif any(m.lower().startswith(("exclusive", "prohibited")) for m in modes):
        results.append(failed(GPU_COMPUTE_MODE, f"GPU compute modes {', '.join(modes)}: "
                              "an exclusive or prohibited GPU refuses a second process",
                              "Set the default compute mode: nvidia-smi -c DEFAULT (as root).",
                              Category.CUDA, modes=modes))
    else:
        results.append(passed(GPU_COMPUTE_MODE, "every GPU is in the Default compute mode",
                              modes=modes))
    return results
