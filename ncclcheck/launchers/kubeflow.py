"""Kubeflow training-operator PyTorchJob pods."""

from __future__ import annotations

from typing import Mapping

from .base import Agreement, EnvReader, LaunchAdvice, Launcher, Layout, finish


class KubeflowLauncher(Launcher):
    """A PyTorchJob pod (training-operator v1).

    Reads PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, RANK (the *pod* index, not a process
    rank), WORLD_SIZE (replicas x nprocPerNode since operator v1.7; replicas only before),
    MASTER_ADDR, MASTER_PORT. These are meant for torchrun, which reads the PET_* variables;
    under torchrun the torchrun launcher is detected instead.
    """

    name = "kubeflow"
    title = "Kubeflow PyTorchJob"
    variables: tuple[str, ...] = ("PET_NODE_RANK", "PET_NNODES", "PET_NPROC_PER_NODE",
                                   "PET_MASTER_ADDR", "RANK", "WORLD_SIZE", "MASTER_ADDR",
                                   "MASTER_PORT")

    @staticmethod
    def detect(env: Mapping[str, str]) -> str | None:
        for name in ("PET_NODE_RANK", "PET_NNODES", "PET_MASTER_ADDR"):
            if name in env:
                return f"{name} is set (Kubeflow PyTorchJob pod, not under torchrun)"
        return None

    def read(self, env: EnvReader, reason: str) -> Layout:
        nnodes_raw = env.str("PET_NNODES")
        num_nodes = None
        if nnodes_raw is not None and ":" not in nnodes_raw:
            num_nodes = env.int("PET_NNODES", minimum=1)
        nproc_raw = env.str("PET_NPROC_PER_NODE")
        nproc = None
        if nproc_raw is not None and nproc_raw.isdigit():
            nproc = env.int("PET_NPROC_PER_NODE", minimum=1)
        pod_index = env.int("PET_NODE_RANK")
        layout = self._layout(
            env, reason,
            world_size=env.int("WORLD_SIZE", minimum=1),
            node_rank=pod_index if pod_index is not None else env.int("RANK"),
            num_nodes=num_nodes,
            local_world_size=nproc,
            sources={"world_size": "WORLD_SIZE", "node_rank": "PET_NODE_RANK",
                     "num_nodes": "PET_NNODES", "local_world_size": "PET_NPROC_PER_NODE"},
        )
        if nproc is not None and nproc > 1:
            layout.notes.append(
                f"RANK is the pod index, not a process rank, and nprocPerNode={nproc}: run the "
                "container's command under torchrun (it reads the PET_* variables) so that each "
                "process gets its own RANK and LOCAL_RANK.")
            layout.advice = LaunchAdvice(True, layout.notes[-1], "Run `torchrun` as the "
                                         "PyTorchJob container command; it turns the PET_* "
                                         "variables into per-process RANK / LOCAL_RANK / "
                                         "WORLD_SIZE.")
        elif nproc is None or nproc == 1:
            layout.rank = env.int("RANK")
            layout.sources["rank"] = "RANK"
            if layout.local_world_size is None:
                layout.local_world_size = 1
            layout.local_rank = 0
        if None not in (layout.world_size, num_nodes, nproc):
            layout.agreements.append(Agreement(
                "world_size", "WORLD_SIZE", layout.world_size, "PET_NNODES x PET_NPROC_PER_NODE",
                num_nodes * nproc,
                "training-operator before v1.7 set WORLD_SIZE to the replica count; upgrade the "
                "operator or launch with torchrun, which recomputes WORLD_SIZE."))
        return finish(layout, env)
