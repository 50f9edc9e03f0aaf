"""A complete ClusterEnvironment with one classic mistake: world_size() returns the per-node
count (LOCAL_WORLD_SIZE), so on 2 nodes x 2 processes ranks 2 and 3 ask for a world of 2."""

import os

from pytorch_lightning.plugins.environments import ClusterEnvironment


class PerNodeWorldSizeEnvironment(ClusterEnvironment):
    @property
    def creates_processes_externally(self):
        return True

    @property
    def main_address(self):
        return os.environ["MASTER_ADDR"]

    @property
    def main_port(self):
        return int(os.environ["MASTER_PORT"])

    @staticmethod
    def detect():
        return True

    def world_size(self):
        return int(os.environ["LOCAL_WORLD_SIZE"])

    def set_world_size(self, size):
        pass

    def global_rank(self):
        return int(os.environ["RANK"])

    def set_global_rank(self, rank):
        pass

    def local_rank(self):
        return int(os.environ["LOCAL_RANK"])

    def node_rank(self):
        return int(os.environ["GROUP_RANK"])
