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


def job_report(outputs: dict) -> dict:
    """Under a launcher rank 0 prints the one report for the job; the other ranks print nothing
    on stdout (a one-line note goes to stderr)."""
    assert sorted(outputs) == [0, 1]
    assert outputs[1].strip() == ""
    return json.loads(outputs[0])


def by_rank(report: dict, check_id: str) -> dict[int, dict]:
    return {c["rank"]: c for c in report["checks"] if c["id"] == check_id}


def test_both_ranks_report_a_consistent_layout(tmp_path):
    proc, outputs = torchrun(tmp_path, "ranks", "--format", "json", "--per-rank")
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = job_report(outputs)
    assert report["status"] == "pass"
    for check_id in ("ranks.launcher", "ranks.world_size", "ranks.local_rank", "ranks.rank"):
        assert sorted(by_rank(report, check_id)) == [0, 1], check_id
    for rank, check in by_rank(report, "ranks.launcher").items():
        assert check["details"]["launcher"] == "torchrun"
    for rank, check in by_rank(report, "ranks.world_size").items():
        assert check["details"]["world_size"] == 2
    for rank, check in by_rank(report, "ranks.local_rank").items():
        assert check["details"]["local_rank"] == rank
    for check in by_rank(report, "ranks.layout").values():
        assert check["summary"].startswith("expected layout 1 x 2 = 2")
    reported = [c for c in report["checks"] if c["id"] == "cluster.reported"]
    assert reported and reported[0]["status"] == "pass"


def test_wrong_nodes_fails_on_every_rank(tmp_path):
    proc, outputs = torchrun(tmp_path, "ranks", "--format", "json", "--nodes", "2",
                             "--gpus-per-node", "2")
    assert proc.returncode != 0
    report = job_report(outputs)
    assert report["status"] == "fail"
    layout = by_rank(report, "ranks.layout")
    world = by_rank(report, "ranks.world_size")
    assert sorted(layout) == sorted(world) == [0, 1]
    for rank in (0, 1):
        assert layout[rank]["status"] == "fail" and "--nodes 2" in layout[rank]["summary"]
        assert world[rank]["status"] == "fail" and "2 x 2 = 4" in world[rank]["summary"]
        assert world[rank]["category"] == "rank_mismatch"
