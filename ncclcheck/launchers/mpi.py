"""MPI launchers: Open MPI (OMPI_*) and MPICH / Intel MPI (PMI_*)."""

from __future__ import annotations

from typing import Mapping

from .base import EnvReader, Launcher, Layout, finish


class _MpiLauncher(Launcher):
    master_required = False  # mpirun never sets MASTER_ADDR/PORT; the script must export them
    RANK = SIZE = LOCAL_RANK = LOCAL_SIZE = ""

    def read(self, env: EnvReader, reason: str) -> Layout:
        layout = self._layout(
            env, reason,
            rank=env.int(self.RANK),
            world_size=env.int(self.SIZE, minimum=1),
            local_rank=env.int(self.LOCAL_RANK),
            local_world_size=env.int(self.LOCAL_SIZE, minimum=1),
            sources={"rank": self.RANK, "world_size": self.SIZE, "local_rank": self.LOCAL_RANK,
                     "local_world_size": self.LOCAL_SIZE},
        )
        if layout.world_size and layout.local_world_size:
            if layout.world_size % layout.local_world_size == 0:
                layout.num_nodes = layout.world_size // layout.local_world_size
                layout.sources["num_nodes"] = f"{self.SIZE} / {self.LOCAL_SIZE}"
            if layout.rank is not None:
                layout.node_rank = layout.rank // layout.local_world_size
                layout.sources["node_rank"] = f"{self.RANK} // {self.LOCAL_SIZE}"
                layout.notes.append("MPI has no node-rank variable; it is inferred assuming "
                                    "ranks are placed node by node (--map-by slot/ppr).")
        self._agree(layout, env, "world_size", self.SIZE, layout.world_size, "WORLD_SIZE",
                    f"Set WORLD_SIZE from {self.SIZE} (or leave it unset).")
        self._agree(layout, env, "rank", self.RANK, layout.rank, "RANK",
                    f"Set RANK from {self.RANK} in each process (or leave it unset).")
        self._agree(layout, env, "local_rank", self.LOCAL_RANK, layout.local_rank, "LOCAL_RANK",
                    f"Set LOCAL_RANK from {self.LOCAL_RANK} (or leave it unset).")
        return finish(layout, env)


class OpenMpiLauncher(_MpiLauncher):
    """Open MPI's mpirun / prterun.

    Reads OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK,
    OMPI_COMM_WORLD_LOCAL_SIZE, and RANK / WORLD_SIZE / LOCAL_RANK when exported as well.
    """

    name = "openmpi"
    title = "Open MPI (mpirun)"
    variables: tuple[str, ...] = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                   "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                   "RANK", "WORLD_SIZE", "LOCAL_RANK")
    RANK, SIZE = "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"
    LOCAL_RANK, LOCAL_SIZE = "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"

    @staticmethod
    def detect(env: Mapping[str, str]) -> str | None:
        if "OMPI_COMM_WORLD_SIZE" in env:
            return "OMPI_COMM_WORLD_SIZE is set (Open MPI)"
        return None


class MpichLauncher(_MpiLauncher):
    """MPICH / Intel MPI (Hydra, PMI).

    Reads PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS. In ``-pmi-port`` mode Hydra
    sets PMI_ID / PMI_PORT instead of PMI_RANK / PMI_SIZE, so the rank is unknown here.
    """

    name = "mpich"
    title = "MPICH / Intel MPI (PMI)"
    variables: tuple[str, ...] = ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS",
                                   "PMI_ID", "PMI_PORT")
    RANK, SIZE = "PMI_RANK", "PMI_SIZE"
    LOCAL_RANK, LOCAL_SIZE = "MPI_LOCALRANKID", "MPI_LOCALNRANKS"

    @staticmethod
    def detect(env: Mapping[str, str]) -> str | None:
        if "PMI_RANK" in env or "PMI_SIZE" in env:
            return "PMI_RANK / PMI_SIZE are set (MPICH / Intel MPI Hydra)"
        if "MPI_LOCALRANKID" in env or ("PMI_ID" in env and "PMI_PORT" in env):
            return "MPI_LOCALRANKID or PMI_ID/PMI_PORT are set (Hydra in -pmi-port mode)"
        return None
