"""preflight() (the plain function, for Fabric or the top of a script) and the live check the
callback adds, in this process with launcher environments handed in (no launch needed)."""

from __future__ import annotations

import pytest

from ncclcheck.lightning import PreflightCallback, PreflightError, preflight
from ncclcheck.lightning.installed import load_lightning
from ncclcheck.lightning.preflight import check_live_environment, families_to_run
from ncclcheck.model import Status

TORCHRUN_RANK3 = {"TORCHELASTIC_RUN_ID": "job", "RANK": "3", "LOCAL_RANK": "1",
                  "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1",
                  "GROUP_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


def test_preflight_raises_with_every_failure_and_its_fix():
    with pytest.raises(PreflightError) as raised:
        preflight(num_nodes=1, devices=2, env=TORCHRUN_RANK3, families=["ranks"])
    text = str(raised.value)
    assert text.startswith("ncclcheck preflight failed on ")
    assert "ranks.lightning.settings" in text and "fix: Set Trainer(num_nodes=2)" in text
    assert raised.value.report.checks  # the full report travels with the exception


def test_preflight_passes_a_consistent_launch():
    report = preflight(num_nodes=2, devices=2, env=TORCHRUN_RANK3, families=["ranks"])
    assert {c.status for c in report.checks} <= {Status.PASS, Status.SKIP}
    assert any(c.id == "ranks.lightning.settings" for c in report.checks)


def test_preflight_can_return_instead_of_raising():
    report = preflight(num_nodes=1, devices=2, env=TORCHRUN_RANK3, families=["ranks"],
                       raise_on_failure=False)
    assert any(c.status is Status.FAIL for c in report.checks)


def test_live_environment_check_names_the_method():
    environments = load_lightning().environments

    class PerNode(environments.LightningEnvironment):
        def world_size(self):
            return 2

    env = PerNode()
    env.set_global_rank(3)
    result = check_live_environment(env, num_nodes=2, devices=2)
    assert result.status is Status.FAIL
    assert "world_size() = 2 but num_nodes x devices = 2 x 2 = 4" in result.summary
    assert "global_rank() = 3 is outside 0..3" not in result.summary
    assert "PerNode.world_size() must return 4" in result.fix


def test_families_are_the_fast_ones_that_exist():
    from ncclcheck.probes import FAMILY_NAMES
    chosen = families_to_run(None, bench=False)
    assert "ranks" in chosen and "bench" not in chosen
    assert set(chosen) <= set(FAMILY_NAMES) & {"ranks", "net", "nccl"}


def test_callback_is_a_callback_of_the_installed_lightning():
    base = load_lightning().callback_base()
    callback = PreflightCallback(families=["ranks"])
    assert isinstance(callback, base)
    assert PreflightCallback is type(callback)


def test_preflight_environment_stops_the_real_trainer_before_init_process_group(clean_env):
    """A real Trainer in this process, as rank 3 of a torchrun world of 4 (the variables are
    set, no torchrun runs): the wrapped per-node ClusterEnvironment is refused in
    validate_settings, which Lightning's launcher calls before anything else, so no process
    group is ever created."""
    import importlib.util
    from pathlib import Path

    import pytorch_lightning as pl
    import torch
    import torch.distributed as dist

    from ncclcheck.lightning import preflight_environment

    for name, value in TORCHRUN_RANK3.items():
        clean_env.setenv(name, value)
    path = Path(__file__).parent / "data" / "cluster_envs" / "per_node.py"
    spec = importlib.util.spec_from_file_location("per_node_env", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)
            self.steps = 0

        def training_step(self, batch, batch_idx):
            self.steps += 1
            return self.layer(batch[0]).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    plugin = preflight_environment(module.PerNodeWorldSizeEnvironment(), families=["ranks"])
    trainer = pl.Trainer(accelerator="cpu", devices=2, num_nodes=2, strategy="ddp",
                         plugins=[plugin], max_steps=1, enable_progress_bar=False, logger=False,
                         enable_checkpointing=False, enable_model_summary=False)
    model = Tiny()
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(4, 2)))
    with pytest.raises(PreflightError) as raised:
        trainer.fit(model, data)
    assert "world_size() = 2 but num_nodes x devices = 2 x 2 = 4" in str(raised.value)
    assert not dist.is_initialized() and model.steps == 0


def test_preflight_environment_passes_a_consistent_launch_through(clean_env):
    """The wrapper detects what the Trainer would and delegates to it unchanged."""
    from ncclcheck.lightning import preflight_environment

    for name, value in TORCHRUN_RANK3.items():
        clean_env.setenv(name, value)
    plugin = preflight_environment(families=["ranks"])
    assert type(plugin.inner).__name__ == "TorchElasticEnvironment"
    assert isinstance(plugin, load_lightning().cluster_environment)
    assert (plugin.world_size(), plugin.global_rank(), plugin.main_port) == (4, 3, 29500)
    plugin.validate_settings(num_devices=2, num_nodes=2)
    assert plugin.report is not None
    with pytest.raises(ValueError, match="does not match the world size"):
        plugin.validate_settings(num_devices=2, num_nodes=1)  # Lightning's own check first


def test_importing_the_package_imports_neither_torch_nor_lightning():
    import subprocess
    import sys
    code = ("import sys, ncclcheck.lightning, ncclcheck.cli; "
            "print(sorted(m for m in ('torch', 'pytorch_lightning', 'lightning') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "[]", proc.stderr


def test_callback_and_environment_pickle(clean_env):
    """ddp_spawn and checkpoints pickle callbacks and plugins."""
    import pickle

    from ncclcheck.lightning import preflight_environment

    callback = pickle.loads(pickle.dumps(PreflightCallback(families=["ranks"], timeout=5)))
    assert callback.families == ["ranks"] and callback.timeout == 5
    plugin = pickle.loads(pickle.dumps(preflight_environment(families=["ranks"])))
    assert type(plugin.inner).__name__ == "LightningEnvironment"
