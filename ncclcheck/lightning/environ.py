"""Run Lightning's environment classes against an environment that is not this process's.

Lightning's classes read ``os.environ`` and some write it (``SLURMEnvironment.main_address``
sets MASTER_ADDR). Every call goes through ``swapped_environ``, which restores the process
environment exactly, whatever the call did or raised.
"""

from __future__ import annotations

import os
import threading
import warnings
from contextlib import contextmanager
from typing import Iterator, Mapping

_SWAP_LOCK = threading.Lock()

# Variables a launcher sets; stripped before a simulated launcher adds its own.
LAUNCHER_PREFIXES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK",
                     "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_", "TORCHELASTIC_", "SLURM_",
                     "OMPI_COMM_WORLD", "PMI_", "MPI_LOCAL", "JSM_", "LSB_", "PET_",
                     "KUBERNETES_PORT")


@contextmanager
def swapped_environ(env: Mapping[str, str]) -> Iterator[list[str]]:
    """``os.environ`` is exactly ``env`` inside the block; yields the warnings raised in it."""
    with _SWAP_LOCK:
        saved = dict(os.environ)
        seen: list[str] = []
        try:
            os.environ.clear()
            os.environ.update({str(k): str(v) for k, v in env.items()})
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                yield seen
                seen.extend(str(w.message) for w in caught)
        finally:
            os.environ.clear()
            os.environ.update(saved)


def without_launcher(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` minus every launcher variable, as a fresh process outside any launcher sees it."""
    return {k: v for k, v in env.items() if not k.startswith(LAUNCHER_PREFIXES)}
