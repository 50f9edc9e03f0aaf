"""The custom ClusterEnvironment proposed as the fix in the motivating case, rewritten from its
description: RANK read with a default of 0 and cached, world_size() returning an attribute that
is initialised to None and never set, master_address/master_port instead of the main_address /
main_port properties, none of creates_processes_externally / detect / the setters, and a
num_nodes argument that is never used. ncclcheck must catch and explain all of it."""

import os

from pytorch_lightning.plugins.environments import ClusterEnvironment


class MotivatingClusterEnvironment(ClusterEnvironment):
    def __init__(self, num_nodes=2):
        super().__init__()
        self._global_rank = None
        self._world_size = None

    def global_rank(self):
        if self._global_rank is None:
            self._global_rank = int(os.environ.get("RANK", 0))
        return self._global_rank

    def world_size(self):
        return self._world_size

    def node_rank(self):
        return int(os.environ.get("NODE_RANK", 0))

    def local_rank(self):
        return int(os.environ.get("LOCAL_RANK", 0))

    def master_address(self):
        return os.environ.get("MASTER_ADDR", "127.0.0.1")

    def master_port(self):
        return int(os.environ.get("MASTER_PORT", 12910))
