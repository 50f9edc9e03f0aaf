"""`ncclcheck ranks --lightning` inside a real srun step: Lightning's SLURMEnvironment view, and
the --ntasks-per-node vs Trainer(devices=) mismatch Lightning itself reports."""

from __future__ import annotations

import json
import socket
import sys

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def test_ranks_lightning_under_srun_shows_slurm_environment_and_the_devices_mismatch(
        slurm_cluster, tmp_path):
    pytest.importorskip("pytorch_lightning")
    out = tmp_path / "task-%t.json"
    done = slurm_cluster.run(
        ["srun", "-N1", "-n2", "--ntasks-per-node=2", f"--output={out}",
         sys.executable, "-m", "ncclcheck", "ranks", "--lightning", "--devices", "4",
         "--format", "json", "--per-rank"], timeout=240, cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # a failing check, not a crash or bad usage
    host = socket.gethostname()
    # one job report, from rank 0, covering both tasks (no MASTER_* needed under srun), each
    # task's every result in it (--per-rank)
    report = json.loads((tmp_path / "task-0.json").read_text())
    assert "reported to rank 0" in (tmp_path / "task-1.json").read_text()
    for task in (0, 1):
        checks = {c["id"]: c for c in report["checks"] if c.get("rank") == task}

        environment = checks["ranks.lightning.environment"]
        assert environment["details"]["environment"] == "SLURMEnvironment"
        values = checks["ranks.lightning.values"]["details"]
        assert (values["global_rank"], values["local_rank"], values["world_size"]) == (task, task, 2)
        # SLURMEnvironment derives rank 0's address from SLURM_NODELIST and the port from the
        # job id (15000 + its last four digits), as Lightning does under a real srun
        assert values["main_address"] == host
        assert 15000 <= values["main_port"] <= 24999

        settings = checks["ranks.lightning.settings"]
        assert settings["status"] == "fail" and settings["category"] == "rank_mismatch"
        assert settings["details"]["lightning_message"] == (
            "You set `devices=4` in Lightning, but the number of tasks per node configured in "
            "SLURM `--ntasks-per-node=2` does not match. HINT: Set `devices=2`.")
        assert "devices=2" in settings["fix"]
