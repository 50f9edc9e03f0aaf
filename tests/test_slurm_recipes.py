"""The Slurm recipes of docs/cluster.md, taken from the page and run through a real
``sbatch --wait`` on the single-host Slurm of tests/slurm.py.

Only the size changes: one node and 2 tasks instead of the recipe's nodes x 8, no GPU request,
and ``python train.py`` is a stand-in training that says it ran.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

DOC = Path(__file__).parents[1] / "docs" / "cluster.md"
TASKS = 2


def recipe(name: str) -> str:
    match = re.search(rf"<!-- recipe: {re.escape(name)} -->\n```\w*\n(.*?)```", DOC.read_text(), re.S)
    assert match, f"docs/cluster.md has no recipe {name}"
    return match.group(1)


def scaled(script: str) -> str:
    """The recipe on one node with 2 tasks and no GPU request (this host has none)."""
    script = re.sub(r"^#SBATCH --gpus-per-node=\d+\n", "", script, flags=re.M)
    script = re.sub(r"--nodes=\d+", "--nodes=1", script)
    script = re.sub(r"--ntasks-per-node=\d+", f"--ntasks-per-node={TASKS}", script)
    return script.replace("--exclusive", "--oversubscribe")


def tools(tmp_path: Path) -> str:
    """A PATH where `ncclcheck` is this checkout's and `python train.py` prints TRAINING."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name, body in (("ncclcheck", f'exec {shlex.quote(sys.executable)} -m ncclcheck "$@"'),
                       ("python", f'exec {shlex.quote(sys.executable)} "$@"')):
        tool = folder / name
        tool.write_text(f"#!/bin/sh\n{body}\n")
        tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "train.py").write_text("import os\nprint('TRAINING', os.environ['SLURM_PROCID'])\n")
    return f"{folder}:{os.environ['PATH']}"


def with_status_file(script: str, status: Path) -> str:
    """The script with an EXIT trap (after its #SBATCH lines) that records its exit status:
    ``sbatch --wait`` loses it when a loaded host polls after Slurm forgot the job."""
    lines = script.splitlines()
    first_command = next(i for i, line in enumerate(lines) if line and not line.startswith("#"))
    lines.insert(first_command, f"trap 'echo $? > {shlex.quote(str(status))}' EXIT")
    return "\n".join(lines) + "\n"


def sbatch(slurm, tmp_path: Path, script: str, **env: str) -> tuple[int, str, str]:
    """Run the script with sbatch --wait: its exit status, stdout and stderr."""
    status = tmp_path / "job.status"
    path = tmp_path / "job.sh"
    path.write_text(with_status_file(script, status))
    out = tmp_path / "job.out"
    done = slurm.run(["sbatch", "--wait", "-o", str(out), "-e", str(tmp_path / "job.err"),
                      str(path)], timeout=240, cwd=tmp_path, env={"PATH": tools(tmp_path), **env})
    assert status.exists(), (done.stdout, done.stderr)
    code = int(status.read_text())
    if "no longer found" not in done.stderr:
        assert done.returncode == code, done.stderr
    return code, out.read_text(), (tmp_path / "job.err").read_text()


def test_batch_recipe_checks_the_job_then_trains(slurm_cluster, tmp_path):
    script = scaled(recipe("slurm-batch"))
    assert "MASTER_ADDR" not in script and "MASTER_PORT" not in script  # srun alone is enough
    code, out, err = sbatch(slurm_cluster, tmp_path, script)
    assert code == 0, (out, err)
    assert "launcher slurm" in out and f"all {TASKS} ranks reported to rank 0" in out, out
    assert sorted(line for line in out.splitlines() if line.startswith("TRAINING")) == [
        f"TRAINING {rank}" for rank in range(TASKS)]
    junit = next(tmp_path.glob("ncclcheck-*.xml"))
    assert 'name="cluster.reported"' in junit.read_text()


@pytest.mark.parametrize("bad", [False, True])
def test_prolog_recipe_trains_only_when_the_job_passes(slurm_cluster, tmp_path, bad):
    env = {"NCCL_SOCKET_IFNAME": "eth9"} if bad else {}
    # the recipe is the training step's line; the job around it asks for the tasks
    script = f"#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --ntasks-per-node={TASKS}\n" + scaled(
        recipe("slurm-prolog"))
    code, out, err = sbatch(slurm_cluster, tmp_path, script, **env)
    assert code == (1 if bad else 0), (out, err)
    trained = [line for line in out.splitlines() if line.startswith("TRAINING")]
    assert len(trained) == (0 if bad else TASKS), out
    if bad:
        assert "net.nccl_interface" in out and "eth9" in out


def test_health_recipe_drains_the_bad_node_and_writes_metrics(slurm_cluster, tmp_path):
    prom = tmp_path / "textfile" / "ncclcheck.prom"
    prom.parent.mkdir()
    script = scaled(recipe("slurm-health")).replace(
        "/var/lib/node_exporter/textfile/ncclcheck.prom", str(prom))
    script = script.replace("--on-fail drain", "--on-fail drain --format json")
    host = slurm_cluster.hostname
    try:
        code, out, err = sbatch(slurm_cluster, tmp_path, script, NCCL_SOCKET_IFNAME="eth9")
        assert code == 1, (out, err)
        drain = json.loads(out)["context"]["drain"]
        assert [(a["node"], a["drained"]) for a in drain["actions"]] == [(host, True)]
        reason = drain["actions"][0]["reason"]
        assert reason.startswith("ncclcheck: net.nccl_interface: ")
        reasons = slurm_cluster.run(["sinfo", "-R", "-h", "-o", "%n|%E"], timeout=10).stdout
        assert f"{host}|{reason}" in reasons.splitlines(), reasons
        assert f"drained {host}" in err
        metrics = prom.read_text()
        assert 'check="net.nccl_interface"' in metrics and f'host="{host}"' in metrics
    finally:
        slurm_cluster.run(["scontrol", "update", f"nodename={host}", "state=resume"], timeout=10)
        deadline = time.monotonic() + 60
        while slurm_cluster.node_state() != "idle" and time.monotonic() < deadline:
            time.sleep(0.5)
    assert slurm_cluster.node_state() == "idle"
