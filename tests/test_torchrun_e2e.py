"""Real torchrun, real worker processes: what every rank prints for `ncclcheck ranks`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
STRIP = ("RANK", "WORLD_SIZE", "LOCAL_", "NODE_RANK", "GROUP_", "MASTER_", "SLURM", "OMPI_",
         "PMI_", "PET_", "TORCHELASTIC", "NCCL_")


def torchrun(tmp_path: Path, *ncclcheck_args: str) -> tuple[subprocess.CompletedProcess, dict]:
    """Run `torchrun --standalone --nproc-per-node 2 -m ncclcheck ...`; each rank's stdout is
    captured to its own file so what every rank printed can be checked."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(STRIP)}
    logs = tmp_path / "logs"
    proc = subprocess.run(
        TORCHRUN + ["--standalone", "--nproc-per-node", "2", "--log-dir", str(logs),
                    "--redirects", "1", "-m", "ncclcheck", *ncclcheck_args],
        capture_output=True, text=True, env=env, timeout=120)
    outputs = {}
    for path in logs.rglob("stdout.log"):
        outputs[int(path.parent.name)] = path.read_text()
    return proc, outputs


def reports(outputs: dict) -> dict[int, dict]:
    return {local: json.loads(text) for local, text in outputs.items() if text.strip()}


def test_both_ranks_report_a_consistent_layout(tmp_path):
    proc, outputs = torchrun(tmp_path, "ranks", "--format", "json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    docs = reports(outputs)
    assert sorted(docs) == [0, 1]
    for local, report in docs.items():
        checks = {c["id"]: c for c in report["checks"]}
        assert report["status"] == "pass"
        assert checks["ranks.launcher"]["details"]["launcher"] == "torchrun"
        assert checks["ranks.world_size"]["details"]["world_size"] == 2
        assert checks["ranks.local_rank"]["details"]["local_rank"] == local
        assert checks["ranks.rank"]["rank"] == local
        assert checks["ranks.layout"]["summary"].startswith("expected layout 1 x 2 = 2")


def test_wrong_nodes_fails_on_every_rank(tmp_path):
    proc, outputs = torchrun(tmp_path, "ranks", "--format", "json", "--nodes", "2",
                             "--gpus-per-node", "2")
    assert proc.returncode != 0
    docs = reports(outputs)
    assert sorted(docs) == [0, 1]
    for report in docs.values():
        checks = {c["id"]: c for c in report["checks"]}
        assert report["status"] == "fail"
        assert checks["ranks.layout"]["status"] == "fail"
        assert "--nodes 2" in checks["ranks.layout"]["summary"]
        assert checks["ranks.world_size"]["status"] == "fail"
        assert "2 x 2 = 4" in checks["ranks.world_size"]["summary"]
        assert checks["ranks.world_size"]["category"] == "rank_mismatch"
