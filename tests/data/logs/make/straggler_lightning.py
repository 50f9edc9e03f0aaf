"""A Lightning fit on CPU (DDP, 2 processes over Gloo, the progress bar on) in which rank 1
turns into a straggler halfway: from batch STRAGGLE on it takes SLOW seconds more per batch (a
node that throttles, a data loader stalling on one host). Nothing errors; rank 0 waits for it at
every gradient all-reduce, and the progress bar's rate falls (run by make_real_logs.py)."""

import time

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

BATCHES, STRAGGLE, SLOW = 80, 40, 0.15


class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, index):
        if self.global_rank == 1 and index >= STRAGGLE:
            time.sleep(SLOW)
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


data = DataLoader(TensorDataset(torch.randn(BATCHES * 8, 4), torch.randn(BATCHES * 8, 1)),
                  batch_size=4)  # 2 ranks x 4 per batch: BATCHES batches each
trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=1,
                     enable_checkpointing=False, logger=False, enable_model_summary=False,
                     log_every_n_steps=10)
trainer.fit(Model(), data)
print(f"rank {trainer.global_rank}: fit done", flush=True)
