"""`ranks --lightning`: Lightning's own classes asked what the Trainer will do.

The environments are launcher variables handed to the probe (no real Slurm here); the classes,
their detect(), constructors, rank methods and validate_settings are the installed
pytorch-lightning 2.6.6's. The 1.9 rows run the same classes under 1.9.5's detection order and
without validate_settings, as 1.9.5 defines them.
"""

from __future__ import annotations

import dataclasses
import os

import pytest

from ncclcheck.context import ProbeContext
from ncclcheck.lightning.installed import load_lightning
from ncclcheck.lightning.trainer_view import lightning_results
from ncclcheck.model import Category, Status

LIGHTNING = load_lightning()
LIGHTNING_1_9 = dataclasses.replace(LIGHTNING, version="1.9.5")

TORCHRUN_2x2_RANK3 = {"TORCHELASTIC_RUN_ID": "job", "RANK": "3", "LOCAL_RANK": "1",
                      "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1",
                      "GROUP_WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
SLURM_2x2_RANK3 = {"SLURM_JOB_ID": "81234", "SLURM_JOB_NAME": "train", "SLURM_NTASKS": "4",
                   "SLURM_NTASKS_PER_NODE": "2", "SLURM_NNODES": "2", "SLURM_PROCID": "3",
                   "SLURM_LOCALID": "1", "SLURM_NODEID": "1", "SLURM_NODELIST": "gpu[07-08]",
                   "PATH": "/usr/bin:/bin"}


def view(env, nodes, devices, lightning=LIGHTNING):
    results = lightning_results(ProbeContext(env=env, nodes=nodes, gpus_per_node=devices), lightning)
    return {r.id.rsplit(".", 1)[1]: r for r in results}


def test_torchrun_world_4_with_trainer_1x2_predicts_validate_settings_error():
    before = dict(os.environ)
    got = view(TORCHRUN_2x2_RANK3, nodes=1, devices=2)
    assert dict(os.environ) == before  # the swap left the process environment as it was
    assert got["environment"].details["environment"] == "TorchElasticEnvironment"
    values = got["values"].details
    assert (values["global_rank"], values["local_rank"], values["node_rank"],
            values["world_size"]) == (3, 1, 1, 4)
    assert (values["main_address"], values["main_port"]) == ("10.0.0.1", 29500)
    settings = got["settings"]
    assert settings.status is Status.FAIL and settings.category is Category.RANK_MISMATCH
    assert "2 != world size 4" in settings.summary and "num_nodes=1" in settings.summary
    assert settings.fix.startswith("Set Trainer(num_nodes=2)")
    assert settings.details["lightning_message"] == (
        "You set `devices=2` and `num_nodes=1` in Lightning, but the product (2 * 1) does not "
        "match the world size (4).")


def test_devices_disagreeing_with_local_world_size_names_devices():
    got = view(dict(TORCHRUN_2x2_RANK3, WORLD_SIZE="8", LOCAL_WORLD_SIZE="4", RANK="5"),
               nodes=2, devices=2)
    assert got["settings"].status is Status.FAIL
    assert "devices=4" in got["settings"].fix


def test_matching_settings_pass():
    got = view(TORCHRUN_2x2_RANK3, nodes=2, devices=2)
    assert all(r.status is Status.PASS for r in got.values()), [r.summary for r in got.values()]


def test_lightning_launcher_world_comes_from_the_trainer():
    got = view({"NODE_RANK": "1", "LOCAL_RANK": "1", "RANK": "99", "WORLD_SIZE": "99"},
               nodes=2, devices=2)
    values = got["values"].details
    assert got["environment"].details["environment"] == "LightningEnvironment"
    # The reference's run: LightningEnvironment ignores RANK / WORLD_SIZE entirely.
    assert (values["world_size"], values["global_rank"]) == (4, 3)


def test_slurm_ntasks_without_per_node_is_lightnings_constructor_error():
    env = {k: v for k, v in SLURM_2x2_RANK3.items() if k != "SLURM_NTASKS_PER_NODE"}
    got = view(env, nodes=2, devices=2)
    assert got["environment"].status is Status.FAIL
    assert "--ntasks-per-node=4" in got["environment"].summary
    assert "--ntasks-per-node" in got["environment"].fix


def test_slurm_nodes_mismatch_uses_lightnings_hint():
    got = view(SLURM_2x2_RANK3, nodes=1, devices=2)
    settings = got["settings"]
    assert got["environment"].details["environment"] == "SLURMEnvironment"
    assert settings.status is Status.FAIL
    assert "HINT: Set `num_nodes=2`" in settings.details["lightning_message"]
    assert "num_nodes=2" in settings.fix
    assert got["values"].details["main_address"] == "gpu07"
    assert got["values"].details["main_port"] == 1234 + 15000


@pytest.mark.parametrize("lightning, chosen", [(LIGHTNING, "TorchElasticEnvironment"),
                                               (LIGHTNING_1_9, "SLURMEnvironment")],
                         ids=["2.x", "1.9"])
def test_slurm_and_torchrun_together_follow_each_versions_order(lightning, chosen):
    got = view({**SLURM_2x2_RANK3, **TORCHRUN_2x2_RANK3}, nodes=2, devices=2, lightning=lightning)
    assert got["environment"].details["environment"] == chosen


def test_1_9_mismatch_is_reported_as_silent():
    got = view(TORCHRUN_2x2_RANK3, nodes=1, devices=2, lightning=LIGHTNING_1_9)
    settings = got["settings"]
    assert settings.status is Status.FAIL
    assert settings.details["lightning_message"] is None  # 1.9 has no validate_settings
    assert "does not check this" in settings.summary and "sampler" in settings.summary
    assert settings.fix.startswith("Set Trainer(num_nodes=2)")


def test_missing_rank_variable_is_explained():
    env = {k: v for k, v in TORCHRUN_2x2_RANK3.items() if k != "RANK"}
    got = view(env, nodes=2, devices=2)
    assert got["values"].status is Status.FAIL
    assert "KeyError" in got["values"].summary and "'RANK'" in got["values"].summary


def test_without_devices_settings_are_skipped():
    got = view(TORCHRUN_2x2_RANK3, nodes=None, devices=None)
    assert got["settings"].status is Status.SKIP and "--devices" in got["settings"].summary


def test_lightning_launcher_on_several_nodes_needs_a_shared_master():
    got = view({"NODE_RANK": "1"}, nodes=2, devices=2)
    assert got["values"].status is Status.FAIL
    assert "MASTER_ADDR and MASTER_PORT unset" in got["values"].summary
    got = view({"NODE_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}, 2, 2)
    assert got["values"].status is Status.PASS
    assert got["values"].details["main_port"] == 29500


SHIM = {
    "lightning/__init__.py": "from pytorch_lightning import __version__\n",
    "lightning/pytorch/__init__.py": "",
    "lightning/pytorch/plugins/__init__.py": "",
    "lightning/pytorch/plugins/environments.py":
        "from pytorch_lightning.plugins import environments as _e\n"
        "globals().update({k: getattr(_e, k) for k in dir(_e) if not k.startswith('_')})\n",
    "lightning/pytorch/callbacks.py": "from pytorch_lightning.callbacks import Callback\n",
}


@pytest.mark.slow  # seconds: the full suite runs it, the quick loop leaves it out
def test_the_lightning_package_name_is_preferred_when_installed(tmp_path):
    """The unified `lightning` package is not installed here: a shim package of that name
    re-exports the installed classes, which is all ncclcheck reads from it."""
    import json
    import subprocess
    import sys

    for name, text in SHIM.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE",
           "LOCAL_", "NODE_RANK", "GROUP_", "MASTER_", "SLURM", "TORCHELASTIC"))}
    env["PYTHONPATH"] = str(tmp_path)
    code = ("import json, sys; from ncclcheck.lightning.installed import load_lightning; "
            "print(json.dumps(load_lightning().package)); "
            "from ncclcheck.cli import main; main(sys.argv[1:])")
    proc = subprocess.run([sys.executable, "-c", code, "ranks", "--lightning", "--devices", "1",
                           "--format", "json"], capture_output=True, text=True, env=env,
                          timeout=120)
    package, report = proc.stdout.split("\n", 1)
    assert json.loads(package) == "lightning"
    checks = {c["id"]: c for c in json.loads(report)["checks"]}
    assert checks["ranks.lightning.environment"]["summary"].startswith(
        "lightning 2.6.6 selects LightningEnvironment")
