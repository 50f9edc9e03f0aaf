"""`ranks --cluster-env MODULE:CLASS`: a user's ClusterEnvironment over the N x M grid.

The classes in tests/data/cluster_envs are real subclasses of the installed Lightning's
ClusterEnvironment, called exactly as the DDP strategy calls them, under the environment each
launcher would set for each slot.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ncclcheck.cli import main
from ncclcheck.lightning.custom import run_slot
from ncclcheck.lightning.custom_findings import judge
from ncclcheck.lightning.installed import load_lightning
from ncclcheck.lightning.launch_styles import TORCHRUN, grid

DATA = Path(__file__).parent / "data" / "cluster_envs"
MOTIVATING = f"{DATA / 'motivating.py'}:MotivatingClusterEnvironment"
CORRECT = f"{DATA / 'correct.py'}:CorrectClusterEnvironment"
PER_NODE = f"{DATA / 'per_node.py'}:PerNodeWorldSizeEnvironment"

load_lightning()  # importing Lightning sets a few variables itself; the checks must add none


def run_cli(capsys, *args):
    with pytest.raises(SystemExit) as exited:
        main(["ranks", "--format", "json", *args])
    out, err = capsys.readouterr()
    return exited.value.code, out, err


def cluster_env_checks(capsys, spec, nodes="2", gpus="4"):
    code, out, _ = run_cli(capsys, "--cluster-env", spec, "--nodes", nodes, "--gpus-per-node", gpus)
    checks = {c["id"]: c for c in json.loads(out)["checks"] if c["id"].startswith("ranks.cluster_env")}
    return code, checks


def test_motivating_class_is_caught_and_explained(clean_env, capsys):
    before = dict(os.environ)
    code, checks = cluster_env_checks(capsys, MOTIVATING)
    assert dict(os.environ) == before
    assert code == 1
    interface = checks["ranks.cluster_env.interface"]
    assert interface["status"] == "fail" and "cannot instantiate" in interface["summary"]
    for member in ("creates_processes_externally", "main_address", "main_port", "detect",
                   "set_world_size", "set_global_rank"):
        assert member in interface["summary"]
    assert "master_address is defined, but Lightning 2.6.6 never calls it" in interface["summary"]
    assert "Rename master_address to @property main_address(self)" in interface["fix"]

    torchrun = checks["ranks.cluster_env.torchrun"]
    assert torchrun["status"] == "fail" and torchrun["category"] == "rank_mismatch"
    assert "world_size() returns None (never set) instead of 2 x 4 = 8" in torchrun["summary"]
    assert "world_size() must return 8" in torchrun["fix"]
    assert "node_rank() returns 0 on node 1" in torchrun["summary"]  # reads NODE_RANK, not GROUP_RANK

    own = checks["ranks.cluster_env.lightning_launcher"]
    assert own["status"] == "fail"
    assert "every process reports global_rank() = 0" in own["summary"]
    assert "Lightning's launcher never sets RANK" in own["summary"]
    assert "set_global_rank(rank)" in own["fix"]
    assert [s["global_rank"] for s in own["details"]["slots"]] == [0] * 8

    constructor = checks["ranks.cluster_env.constructor"]
    assert constructor["status"] == "warn" and "num_nodes" in constructor["summary"]


def test_correct_class_passes(clean_env, capsys):
    code, checks = cluster_env_checks(capsys, CORRECT)
    assert code == 0
    assert {c["status"] for c in checks.values()} == {"pass"}, checks
    slots = checks["ranks.cluster_env.lightning_launcher"]["details"]["slots"]
    assert sorted(s["global_rank"] for s in slots) == list(range(8))


def test_per_node_world_size_is_named(clean_env, capsys):
    code, checks = cluster_env_checks(capsys, PER_NODE, nodes="2", gpus="2")
    assert code == 1
    assert checks["ranks.cluster_env.interface"]["status"] == "pass"
    torchrun = checks["ranks.cluster_env.torchrun"]
    assert "world_size() returns the per-node count instead of 2 x 2 = 4" in torchrun["summary"]
    # creates_processes_externally is always True: Lightning would not launch it itself.
    assert checks["ranks.cluster_env.lightning_launcher"]["status"] == "skip"


def test_slurm_is_simulated_inside_a_slurm_job(clean_env, capsys):
    clean_env.setenv("SLURM_JOB_ID", "4711")
    _, checks = cluster_env_checks(capsys, MOTIVATING, nodes="2", gpus="2")
    slurm = checks["ranks.cluster_env.slurm"]
    assert "every process reports global_rank() = 0" in slurm["summary"]
    _, checks = cluster_env_checks(capsys, CORRECT, nodes="2", gpus="2")
    assert checks["ranks.cluster_env.slurm"]["status"] == "fail"  # reads RANK, srun sets SLURM_PROCID


def test_constant_world_size_and_duplicates_from_judge():
    class Constant:
        creates_processes_externally = True
        main_address, main_port = "h", 1

        def __init__(self):
            pass

        def world_size(self):
            return 1

        def global_rank(self):
            return int(os.environ["LOCAL_RANK"])

        def local_rank(self):
            return int(os.environ["LOCAL_RANK"])

        def node_rank(self):
            return int(os.environ["GROUP_RANK"])

        def set_world_size(self, size):
            pass

        def set_global_rank(self, rank):
            pass

    answers = [run_slot(Constant, s, TORCHRUN.env_for(s, {})) for s in grid(2, 2)]
    text = " ".join(f.summary for f in judge(answers, TORCHRUN, 2, 2))
    assert "world_size() returns 1 instead of 2 x 2 = 4" in text
    assert "duplicates: [0, 1]" in text and "missing: [2, 3]" in text


def test_module_spec_resolves_from_the_current_directory(clean_env, capsys, tmp_path):
    (tmp_path / "my_envs.py").write_text((DATA / "correct.py").read_text())
    clean_env.chdir(tmp_path)
    code, checks = cluster_env_checks(capsys, "my_envs:CorrectClusterEnvironment", "1", "2")
    assert code == 0 and checks["ranks.cluster_env.interface"]["status"] == "pass"


@pytest.mark.parametrize("spec, message", [
    ("no_colon", "expected MODULE:CLASS"),
    ("no_such_module_xyz:Env", "cannot import no_such_module_xyz"),
    ("os:NoSuchClass", "os has no class NoSuchClass"),
    ("missing/file.py:Env", "no such file"),
])
def test_bad_spec_is_one_line_exit_2(capsys, spec, message):
    with pytest.raises(SystemExit) as exited:
        main(["ranks", "--cluster-env", spec])
    out, err = capsys.readouterr()
    assert exited.value.code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err


BLOCK_LIGHTNING = ("import sys; sys.modules['lightning'] = None; "
                   "sys.modules['pytorch_lightning'] = None; "
                   "from ncclcheck.cli import main; main(sys.argv[1:])")


@pytest.mark.parametrize("args", [["--lightning"], ["--cluster-env", "x:Y"]])
def test_without_lightning_says_how_to_install(args):
    proc = subprocess.run([sys.executable, "-c", BLOCK_LIGHTNING, "ranks", *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "pip install 'ncclcheck[lightning]'" in proc.stderr
