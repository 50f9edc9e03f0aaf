"""What each rank says about itself when it joins: place in the job, settings, versions.

Rank 0 compares these across ranks and nodes (ncclcheck/probes/cluster/); they are sent as
soon as a rank connects, so a rank that dies later can still be named with its host.
"""

from __future__ import annotations

import os
import platform
import uuid
from typing import Any, Mapping

from ncclcheck.launchers import Layout
from ncclcheck.ncclib.gpu import kernel_driver_version
from ncclcheck.ncclib.version import version_text
from ncclcheck.ncclib.wheel import installed_nccl_version
from ncclcheck.redact import redact_env

# Settings that must be identical on every rank of one job.
SAME_EVERYWHERE = ("WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
SAME_PREFIXES = ("NCCL_", "GLOO_")


def job_settings(env: Mapping[str, str]) -> dict[str, str]:
    """The variables compared across ranks, secrets masked."""
    chosen = {name: value for name, value in env.items()
              if name in SAME_EVERYWHERE or name.startswith(SAME_PREFIXES)}
    return dict(sorted(redact_env(chosen).items()))


def versions() -> dict[str, str | None]:
    """Library versions that must match between nodes. torch is already loaded (the store)."""
    found: dict[str, str | None] = {"python": platform.python_version(), "torch": None,
                                    "cuda": None, "nccl": None, "driver": kernel_driver_version()}
    try:
        import torch  # deferred: seconds to import (already loaded here by the store)
        found["torch"] = torch.__version__
        found["cuda"] = torch.version.cuda
    except Exception:  # torch missing or broken: the versions we can read are still useful
        return found
    found["nccl"] = _nccl_version()
    return found


def _nccl_version() -> str | None:
    """torch's own NCCL when a GPU is there, else the NCCL wheel installed (one owner each)."""
    try:
        import torch  # deferred: seconds to import (already loaded here by the store)
        if torch.cuda.is_available():
            return version_text(torch.cuda.nccl.version()) or str(torch.cuda.nccl.version())
    except Exception:  # no GPU build, no driver: the wheel still says which NCCL is here
        pass
    return installed_nccl_version()


def identity(layout: Layout, host: str, env: Mapping[str, str], rank: int | None = None,
             nonce: str | None = None,
             known_versions: dict[str, str | None] | None = None) -> dict[str, Any]:
    """``rank``: the rank this process claims (negative ones too; default the layout's).
    ``member`` (host, pid, a per-launch nonce) names the process whatever rank it claims.
    ``known_versions``: ``versions()`` already read in this process (they cost milliseconds)."""
    settings = job_settings(env)
    size_from = layout.source("world_size")  # SLURM_NTASKS, OMPI_COMM_WORLD_SIZE, ...
    if size_from in env:
        settings[size_from] = env[size_from]
    return {
        "rank": layout.rank if rank is None else rank,
        "member": f"{host}/{os.getpid()}/{nonce or uuid.uuid4().hex[:12]}",
        "world_size": layout.world_size,
        "local_rank": layout.local_rank,
        "local_world_size": layout.local_world_size,
        "node_rank": layout.node_rank,
        "num_nodes": layout.num_nodes,
        "host": host,
        "pid": os.getpid(),
        "launcher": layout.launcher,
        "settings": settings,
        "world_size_from": size_from,
        "versions": versions() if known_versions is None else dict(known_versions),
    }
