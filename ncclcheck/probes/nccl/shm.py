"""Room in /dev/shm for NCCL's shared-memory transport.

NCCL creates the segments its ranks on one node share as files in /dev/shm
(``/dev/shm/nccl-XXXXXX``, megabytes per pair of ranks and channel). A container's /dev/shm is
64 MB unless the runtime is told otherwise (Docker's default), and a multi-GPU job then dies at
its first collective with "Error while creating shared memory segment ... No space left on
device", the failure ``ncclcheck explain`` names nccl.shm_failed. This check reads the mount
before the job, so the container is fixed before GPUs wait on it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

from ncclcheck.catalogue import catalogue_fix
from ncclcheck.model import Category, CheckResult, passed, warned
from ncclcheck.probes.nccl.facts import NcclFacts, int_value
from ncclcheck.probes.spec import CheckSpec, judge

SHM_PATH = "/dev/shm"
MIN_FREE = 1 << 30  # 1 GiB: docker --shm-size=1g, what container guides for NCCL ask for
MIB = 1 << 20
_ON = {"1", "true", "yes", "on", "y", "t"}

SHM = CheckSpec(
    "nccl.shm", "/dev/shm has room for NCCL's shared-memory segments",
    (Category.SHARED_MEMORY,),
    warns_when="/dev/shm is missing, not writable, or has less than 1 GiB free (a container's "
               "64 MB default), unless NCCL_SHM_DISABLE=1 or the job runs one rank per node "
               "(LOCAL_WORLD_SIZE=1)",
    doc="The segments live in /dev/shm whatever NCCL_SHM_* say, and several ranks on one node "
        "need them as soon as GPUs cannot talk peer-to-peer. `ncclcheck explain` names the "
        "failure this prevents nccl.shm_failed.",
    order=155)


@dataclass(frozen=True)
class ShmMount:
    """What /dev/shm is on this host: there at all, writable, its size and free bytes."""

    path: str
    exists: bool
    writable: bool = False
    size: int = 0
    free: int = 0
    error: str | None = None


def read_shm(path: str = SHM_PATH) -> ShmMount:
    """The mount's facts; never raises (an unreadable mount is a fact too)."""
    if not os.path.isdir(path):
        return ShmMount(path, exists=False)
    try:
        stat = os.statvfs(path)
    except OSError as exc:
        return ShmMount(path, exists=True, error=exc.strerror or str(exc))
    return ShmMount(path, exists=True, writable=os.access(path, os.W_OK | os.X_OK),
                    size=stat.f_frsize * stat.f_blocks, free=stat.f_frsize * stat.f_bavail)


@judge(SHM)
def judge_shm(facts: NcclFacts) -> CheckResult:
    return check_shm(read_shm(), facts.ctx.env)


def check_shm(mount: ShmMount, env: Mapping[str, str]) -> CheckResult:
    local = int_value(env.get("LOCAL_WORLD_SIZE"))
    details: dict[str, Any] = {"path": mount.path, "exists": mount.exists,
                               "writable": mount.writable, "size_bytes": mount.size,
                               "free_bytes": mount.free, "local_world_size": local}
    if env.get("NCCL_SHM_DISABLE", "").strip().lower() in _ON:
        return passed(SHM, "NCCL_SHM_DISABLE=1: NCCL sends intra-node traffic over P2P or the "
                      "network, not through /dev/shm", **details)
    if local == 1:
        return passed(SHM, f"one rank per node (LOCAL_WORLD_SIZE=1): no segments to share "
                      f"({_space(mount)})", **details)
    fix = catalogue_fix("nccl.shm_failed")
    if not mount.exists:
        return warned(SHM, f"there is no {mount.path}: NCCL cannot create the segments its "
                      "ranks on one node share", fix, Category.SHARED_MEMORY, **details)
    if mount.error is not None:
        return warned(SHM, f"{mount.path} cannot be read ({mount.error})", fix,
                      Category.SHARED_MEMORY, error=mount.error, **details)
    if not mount.writable:
        return warned(SHM, f"{mount.path} is not writable for this user: NCCL cannot create "
                      "its segments there", fix, Category.SHARED_MEMORY, **details)
    if mount.free < MIN_FREE:
        ranks = f"{local} ranks" if local else "several ranks"
        return warned(SHM, f"{mount.path}: {_space(mount)}, below {MIN_FREE // MIB} MiB: the "
                      f"segments of {ranks} on this node may not fit ('Error while creating "
                      "shared memory segment ... No space left on device')", fix,
                      Category.SHARED_MEMORY, **details)
    return passed(SHM, f"{mount.path}: {_space(mount)}", **details)


def _space(mount: ShmMount) -> str:
    return f"{mount.free // MIB} MiB free of {mount.size // MIB} MiB"
