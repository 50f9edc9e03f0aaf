"""A healthy Lightning fit that prints what Lightning prints on a real run (run by
make_clean_logs.py): its DDP launcher starts 2 CPU processes on Gloo, with the progress bar,
a CSV logger, checkpointing, a validation loop and the warnings these settings draw
(few dataloader workers, sync_dist, the logging interval), and metrics named after failures.
"""

from __future__ import annotations

import os

import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import CSVLogger
from torch.utils.data import DataLoader, TensorDataset

ROOT = os.environ["SCENARIO_DIR"]


class Model(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch: list[torch.Tensor], _: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss, prog_bar=True)
        self.log("error_rate", (self.layer(x) - y).abs().gt(1).float().mean(), prog_bar=True)
        return loss

    def validation_step(self, batch: list[torch.Tensor], _: int) -> None:
        x, y = batch
        self.log("val/error", torch.nn.functional.l1_loss(self.layer(x), y), prog_bar=True)
        self.log("val/nan_count", torch.isnan(self.layer(x)).sum().float())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def loader(n: int) -> DataLoader:
    generator = torch.Generator().manual_seed(n)
    return DataLoader(TensorDataset(torch.randn(n, 4, generator=generator),
                                    torch.randn(n, 1, generator=generator)), batch_size=8)


if __name__ == "__main__":
    pl.seed_everything(7)
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=2,
                         default_root_dir=ROOT, logger=CSVLogger(ROOT, name="noisy"))
    trainer.fit(Model(), loader(128), loader(32))
    print(f"rank {trainer.global_rank}: fit done", flush=True)
