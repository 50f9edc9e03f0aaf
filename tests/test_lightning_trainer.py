"""Real Lightning Trainers in multi-process Gloo DDP on CPU, started by real torchrun: two
torchrun agents (--nnodes 2 --nproc-per-node 2, static rendezvous on loopback) stand for two
nodes of two GPUs each. Only the GPUs are missing; torchrun, Lightning, its strategy,
init_process_group and Gloo are real.

Each job first asks ncclcheck (the same code `ncclcheck ranks --lightning` / `--cluster-env`
runs) and then lets the real Trainer run, so the prediction is checked against what
Lightning actually does.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

DATA = Path(__file__).parent / "data" / "cluster_envs"
STRIP = ("RANK", "WORLD_SIZE", "LOCAL_", "NODE_RANK", "GROUP_", "MASTER_", "SLURM", "OMPI_",
         "PMI_", "PET_", "TORCHELASTIC", "NCCL_", "ROLE_")

WORKER = r'''
import json, os, subprocess, sys
out_dir, mode = sys.argv[1], sys.argv[2]
rank = os.environ["RANK"]
record = {"rank": int(rank)}

if mode == "num_nodes":
    # The prediction first: the real CLI on every rank, as a user would run it under torchrun
    # (cluster mode: rank 0 prints the job-wide report).
    cli = subprocess.run([sys.executable, "-m", "ncclcheck", "ranks", "--lightning",
                          "--num-nodes", "1", "--devices", "2", "--format", "json",
                          "--timeout", "60"], capture_output=True, text=True, timeout=90)
    record["cli_exit"], record["cli_stdout"] = cli.returncode, cli.stdout
    record["cli_stderr"] = cli.stderr[-2000:]

import torch
import pytorch_lightning as pl
from torch.utils.data import DataLoader, TensorDataset


class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.steps = 0

    def training_step(self, batch, batch_idx):
        self.steps += 1
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


common = dict(accelerator="cpu", strategy="ddp", max_steps=2, enable_progress_bar=False,
              logger=False, enable_checkpointing=False, enable_model_summary=False)
if mode == "num_nodes":
    trainer = pl.Trainer(devices=2, num_nodes=1, **common)
    callback = None
else:
    import importlib.util
    spec = importlib.util.spec_from_file_location("per_node", sys.argv[3])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from ncclcheck.lightning import PreflightCallback
    callback = PreflightCallback(families=["ranks"], timeout=30)
    trainer = pl.Trainer(devices=2, num_nodes=2, plugins=[module.PerNodeWorldSizeEnvironment()],
                         callbacks=[callback], **common)

model = Tiny()
data = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
try:
    trainer.fit(model, data)
    record["outcome"] = "trained"
except BaseException as exc:
    record["outcome"] = "raised"
    record["error_type"] = type(exc).__name__
    record["error"] = str(exc)
record["steps"] = model.steps
if callback is not None:
    record["process_group_was_ready"] = callback.process_group_was_ready
with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as handle:
    json.dump(record, handle)
'''


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def two_node_job(tmp_path: Path, *args: str) -> dict[int, dict]:
    """torchrun --nnodes 2 --nproc-per-node 2 twice (node 0 and node 1) on loopback."""
    script = tmp_path / "train.py"
    script.write_text(WORKER)
    out = tmp_path / "out"
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(STRIP)}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    port = free_port()
    agents = [subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(node),
         "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", str(port),
         "--max-restarts", "0", str(script), str(out), *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for node in (0, 1)]
    logs = []
    try:
        for agent in agents:
            logs.append(agent.communicate(timeout=150)[0])
    finally:
        for agent in agents:
            if agent.poll() is None:
                agent.kill()
                agent.wait()
    records = {int(p.stem[4:]): json.loads(p.read_text()) for p in out.glob("rank*.json")}
    assert sorted(records) == [0, 1, 2, 3], "\n".join(log[-3000:] for log in logs)
    return records


def test_num_nodes_mismatch_predicted_then_reproduced_by_the_trainer(tmp_path):
    """torchrun world of 4 (2 nodes x 2), Trainer(num_nodes=1, devices=2): ncclcheck predicts
    TorchElasticEnvironment's validate_settings error and the fix num_nodes=2; the real
    Trainer then fails with exactly that error on every rank, before any step."""
    records = two_node_job(tmp_path, "num_nodes")
    reports = [json.loads(r["cli_stdout"]) for r in records.values() if r["cli_stdout"].strip()]
    assert reports, "rank 0 prints the job-wide report"
    assert all(r.get("cli_exit") == 1 for r in records.values())
    settings = [c for rep in reports for c in rep["checks"] if c["id"] == "ranks.lightning.settings"]
    environments = [c for rep in reports for c in rep["checks"]
                    if c["id"] == "ranks.lightning.environment"]
    assert {c["details"]["environment"] for c in environments} == {"TorchElasticEnvironment"}
    assert settings and all(c["status"] == "fail" for c in settings)
    predicted = {c["details"]["lightning_message"] for c in settings}
    assert all("devices=2 x num_nodes=1 = 2 != world size 4" in c["summary"] for c in settings)
    assert all(c["fix"].startswith("Set Trainer(num_nodes=2)") for c in settings)
    for record in records.values():
        assert record["outcome"] == "raised" and record["error_type"] == "ValueError"
        assert record["error"] in predicted  # the Trainer raised what ncclcheck predicted
        assert record["steps"] == 0


def test_custom_env_wrong_world_size_predicted_and_stopped_by_the_callback(tmp_path, capsys):
    """A ClusterEnvironment whose world_size() is the per-node count (2 of 4): ncclcheck
    predicts it; in the real job ranks 2 and 3 die in init_process_group (rank >= world size)
    while ranks 0 and 1 form a 2-rank world on their own, where PreflightCallback stops them
    before the first training step."""
    from ncclcheck.cli import main

    spec = f"{DATA / 'per_node.py'}:PerNodeWorldSizeEnvironment"
    with pytest.raises(SystemExit) as exited:
        main(["ranks", "--cluster-env", spec, "--nodes", "2", "--gpus-per-node", "2",
              "--format", "json"])
    checks = {c["id"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert exited.value.code == 1
    predicted = checks["ranks.cluster_env.torchrun"]
    assert "world_size() returns the per-node count instead of 2 x 2 = 4" in predicted["summary"]
    assert [s["world_size"] for s in predicted["details"]["slots"]] == [2, 2, 2, 2]

    records = two_node_job(tmp_path, "callback", str(DATA / "per_node.py"))
    for rank in (2, 3):  # rank 2 or 3 of a world of 2: Gloo refuses, as predicted
        assert records[rank]["outcome"] == "raised"
        assert f"rank < size. {rank} vs 2" in records[rank]["error"]
        assert records[rank]["steps"] == 0
    for rank in (0, 1):
        record = records[rank]
        assert record["error_type"] == "PreflightError", record
        assert "ranks.lightning.live" in record["error"]
        assert "world_size() = 2 but num_nodes x devices = 2 x 2 = 4" in record["error"]
        assert "world_size() must return 4" in record["error"]
        assert record["steps"] == 0  # stopped before training
        # What is real: Lightning calls Callback.setup after init_process_group.
        assert record["process_group_was_ready"] is True
