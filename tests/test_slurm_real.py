"""The real single-host Slurm the tests start (tests/slurm.py): jobs run through it."""

from __future__ import annotations

import socket

import pytest

pytestmark = pytest.mark.slurm


def test_srun_runs_two_tasks_on_this_host(slurm_cluster):
    done = slurm_cluster.run(["srun", "-N1", "-n2", "hostname"], timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [socket.gethostname()] * 2


def test_srun_tasks_see_their_rank_and_the_nodelist(slurm_cluster):
    done = slurm_cluster.run(
        ["srun", "-N1", "-n2", "--label", "sh", "-c",
         "echo $SLURM_PROCID/$SLURM_NTASKS $SLURM_NODELIST $SLURM_JOB_ID"], timeout=60)
    assert done.returncode == 0, done.stderr
    lines = sorted(done.stdout.splitlines())
    assert [line.split()[1] for line in lines] == ["0/2", "1/2"]
    assert {line.split()[2] for line in lines} == {socket.gethostname()}


def test_sbatch_wait_runs_the_script_and_returns_its_status(slurm_cluster, tmp_path):
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\necho job $SLURM_JOB_ID on $(hostname)\nexit 3\n")
    out = tmp_path / "job.out"
    done = slurm_cluster.run(["sbatch", "--wait", "-o", str(out), str(script)], timeout=60,
                             cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert out.read_text().startswith("job ")
    assert socket.gethostname() in out.read_text()


def test_the_daemons_run_from_the_private_folder(slurm_cluster):
    names = [daemon.name for daemon in slurm_cluster.daemons]
    assert names == ["munged", "slurmctld", "slurmd"]
    for daemon in slurm_cluster.daemons:
        assert daemon.process.poll() is None
        assert int(daemon.pid_file.read_text().split()[0]) == daemon.process.pid
    assert slurm_cluster.node_state() == "idle"
