"""A ClusterEnvironment that is right under torchrun and under Lightning's own launcher: ranks
from the launcher when it sets them, else the values Lightning passes to the setters."""

import os

from pytorch_lightning.plugins.environments import ClusterEnvironment


class CorrectClusterEnvironment(ClusterEnvironment):
    def __init__(self):
        super().__init__()
        self._world_size = 1
        self._global_rank = 0

    @property
    def creates_processes_externally(self):
        return "LOCAL_RANK" in os.environ

    @property
    def main_address(self):
        return os.environ.get("MASTER_ADDR", "127.0.0.1")

    @property
    def main_port(self):
        return int(os.environ.get("MASTER_PORT", 12910))

    @staticmethod
    def detect():
        return True

    def world_size(self):
        return int(os.environ.get("WORLD_SIZE", self._world_size))

    def set_world_size(self, size):
        self._world_size = size

    def global_rank(self):
        return int(os.environ["RANK"]) if "RANK" in os.environ else self._global_rank

    def set_global_rank(self, rank):
        self._global_rank = rank

    def local_rank(self):
        return int(os.environ.get("LOCAL_RANK", 0))

    def node_rank(self):
        return int(os.environ.get("NODE_RANK", os.environ.get("GROUP_RANK", 0)))
