"""torchrun / torch.distributed.elastic."""

from __future__ import annotations

from typing import Mapping

from .base import Agreement, EnvReader, Launcher, Layout, finish


class TorchrunLauncher(Launcher):
    """torchrun (torchelastic) workers.

    Reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (the node index),
    GROUP_WORLD_SIZE (the node count), MASTER_ADDR, MASTER_PORT. Detected by
    TORCHELASTIC_RUN_ID, exactly as ``torch.distributed.is_torchelastic_launched()``.
    """

    name = "torchrun"
    title = "torchrun / torchelastic"
    variables: tuple[str, ...] = ("TORCHELASTIC_RUN_ID", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                                   "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                                   "NODE_RANK", "MASTER_ADDR", "MASTER_PORT")
    rank_formula_guaranteed = True  # ranks are assigned node by node (cumulative local sizes)
    agent_holds_master_port = True  # the elastic agent's own store listens on MASTER_PORT

    @staticmethod
    def detect(env: Mapping[str, str]) -> str | None:
        if "TORCHELASTIC_RUN_ID" in env:
            return "TORCHELASTIC_RUN_ID is set (torch.distributed.is_torchelastic_launched())"
        return None

    def read(self, env: EnvReader, reason: str) -> Layout:
        layout = self._layout(
            env, reason,
            rank=env.int("RANK"),
            world_size=env.int("WORLD_SIZE", minimum=1),
            local_rank=env.int("LOCAL_RANK"),
            local_world_size=env.int("LOCAL_WORLD_SIZE", minimum=1),
            node_rank=env.int("GROUP_RANK"),
            num_nodes=env.int("GROUP_WORLD_SIZE", minimum=1),
            sources={"rank": "RANK", "world_size": "WORLD_SIZE", "local_rank": "LOCAL_RANK",
                     "local_world_size": "LOCAL_WORLD_SIZE", "node_rank": "GROUP_RANK",
                     "num_nodes": "GROUP_WORLD_SIZE"},
        )
        if None not in (layout.world_size, layout.num_nodes, layout.local_world_size):
            layout.agreements.append(Agreement(
                "world_size", "WORLD_SIZE", layout.world_size, "GROUP_WORLD_SIZE x LOCAL_WORLD_SIZE",
                layout.num_nodes * layout.local_world_size,
                "Start every node with the same --nproc-per-node and --nnodes; torchrun sums the "
                "per-node process counts into WORLD_SIZE."))
        node_rank_env = env.int("NODE_RANK")
        if node_rank_env is not None and layout.node_rank is not None:
            layout.agreements.append(Agreement(
                "node_rank", "GROUP_RANK", layout.node_rank, "NODE_RANK", node_rank_env,
                "torchrun does not set NODE_RANK; unset it or give torchrun --node-rank the same "
                "value."))
        return finish(layout, env)
