"""The plain torch / Lightning environment, and no launcher at all."""

from __future__ import annotations

from typing import Mapping

from .base import EnvReader, Launcher, Layout, finish

PLAIN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK", "MASTER_ADDR",
              "MASTER_PORT")


class PlainEnvLauncher(Launcher):
    """Processes configured by hand or by Lightning's own launcher.

    Reads RANK, WORLD_SIZE, LOCAL_RANK, NODE_RANK (or GROUP_RANK), MASTER_ADDR, MASTER_PORT.
    Lightning starts ``devices - 1`` children with LOCAL_RANK and NODE_RANK set and never sets
    RANK; its global rank is NODE_RANK x devices + LOCAL_RANK.
    """

    name = "env"
    title = "plain environment (RANK / NODE_RANK / MASTER_ADDR, as Lightning uses)"
    variables: tuple[str, ...] = PLAIN_VARS
    rank_formula_guaranteed = True  # Lightning computes node_rank * devices + local_rank

    @staticmethod
    def detect(env: Mapping[str, str]) -> str | None:
        present = [name for name in PLAIN_VARS if name in env]
        if present:
            return f"{', '.join(present)} set without a known launcher"
        return None

    def read(self, env: EnvReader, reason: str) -> Layout:
        node_name = "NODE_RANK" if env.has("NODE_RANK") or not env.has("GROUP_RANK") else "GROUP_RANK"
        layout = self._layout(
            env, reason,
            rank=env.int("RANK"),
            world_size=env.int("WORLD_SIZE", minimum=1),
            local_rank=env.int("LOCAL_RANK"),
            node_rank=env.int(node_name),
            sources={"rank": "RANK", "world_size": "WORLD_SIZE", "local_rank": "LOCAL_RANK",
                     "node_rank": node_name},
        )
        if layout.world_size is None and not env.has("WORLD_SIZE"):
            layout.notes.append("WORLD_SIZE is not set: Lightning computes num_nodes x devices; "
                                "torch's env:// rendezvous requires it.")
        return finish(layout, env)


class StandaloneLauncher(Launcher):
    """No launcher: one process on this machine, rank 0 of 1."""

    name = "standalone"
    title = "none (standalone single process)"
    variables: tuple[str, ...] = ()
    master_required = False
    single_process = True

    @staticmethod
    def detect(env: Mapping[str, str]) -> str | None:
        return "no launcher variables are set"

    def read(self, env: EnvReader, reason: str) -> Layout:
        layout = self._layout(env, reason, rank=0, world_size=1, local_rank=0, local_world_size=1,
                              node_rank=0, num_nodes=1,
                              sources={"rank": "(standalone)", "world_size": "(standalone)"})
        return finish(layout, env)
