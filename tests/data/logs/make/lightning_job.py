"""A tiny Lightning fit on CPU with DDP; argv picks devices/num_nodes and an optional
custom ClusterEnvironment whose world_size() is the per-node count (the motivating case)."""

import sys

import pytorch_lightning as pl
import torch
from pytorch_lightning.plugins.environments import LightningEnvironment
from torch.utils.data import DataLoader, TensorDataset

devices, num_nodes, custom = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "custom"


class PerNodeWorldSize(LightningEnvironment):
    """world_size() returns the processes of one node, not of the job."""

    def world_size(self) -> int:
        return devices


class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, _):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


data = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
trainer = pl.Trainer(accelerator="cpu", devices=devices, num_nodes=num_nodes, strategy="ddp",
                     max_epochs=1, enable_checkpointing=False, logger=False,
                     enable_progress_bar=False, enable_model_summary=False,
                     plugins=[PerNodeWorldSize()] if custom else None)
trainer.fit(Model(), data)
print(f"rank {trainer.global_rank}: fit done", flush=True)
