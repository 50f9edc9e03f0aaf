"""The recipes of docs/cluster.md, taken from the page and run as far as this machine allows.

Real here: torchrun, Open MPI's mpirun, every ncclcheck rank, the TCPStore. Stood in for,
because they cannot exist on this machine: srun (its tasks get the variables srun sets), the
Kubernetes operator and cluster DNS (pods are network namespaces named like the pods; the init
containers get the env the manifest and the downward API give them; the master's name resolves
through each namespace's hosts file) and Docker (a `docker` stand-in runs the command here).
The multi-node torchrun recipe runs in tests/test_cluster_netns.py.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from procs import collect

pytestmark = pytest.mark.slow

DOC = Path(__file__).parents[1] / "docs" / "cluster.md"
STRIP = ("RANK", "WORLD_SIZE", "LOCAL_", "NODE_RANK", "GROUP_", "MASTER_", "SLURM", "OMPI_",
         "PMI_", "MPI_LOCAL", "PET_", "JSM_", "LSB_", "TORCHELASTIC", "NCCL_", "TORCH_NCCL",
         "GLOO_", "ROLE_")
LIMIT = 90


def recipe(name: str) -> str:
    match = re.search(rf"<!-- recipe: {re.escape(name)} -->\n```\w*\n(.*?)```", DOC.read_text(), re.S)
    assert match, f"docs/cluster.md has no recipe {name}"
    return match.group(1)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(STRIP)}
    env.update(extra)
    return env


def shim_bin(tmp_path: Path) -> Path:
    """A bin folder where `ncclcheck` is this checkout's, for recipes that call it by name."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    tool = folder / "ncclcheck"
    tool.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m ncclcheck \"$@\"\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return folder


def quick(argv: list[str]) -> list[str]:
    """The recipe's ncclcheck arguments, with only the families that exist everywhere and a
    deadline that fits the test budget."""
    out = list(argv)
    if "--timeout" in out:
        out[out.index("--timeout") + 1] = "30"
    return out + ["--checks", "ranks"]


def communicate(procs: list[subprocess.Popen]) -> list[tuple[int, str, str]]:
    return collect(procs, LIMIT)


def test_torchrun_single_node_recipe():
    argv = shlex.split(recipe("torchrun-single"))
    assert argv[0] == "torchrun"
    argv[argv.index("--nproc-per-node") + 1] = "2"
    cmd = [sys.executable, "-m", "torch.distributed.run"] + quick(argv[1:])
    proc = subprocess.run(cmd, capture_output=True, text=True, env=clean_env(), timeout=LIMIT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("cluster.reported") == 1  # one report, from rank 0
    assert "all 2 ranks reported to rank 0" in proc.stdout
    assert "launcher torchrun" in proc.stdout


def slurm_task_env(rank: int, tasks: int, per_node: int, port: int, **extra: str) -> dict[str, str]:
    """What srun gives each task (srun itself cannot run here), plus the script's exports."""
    return clean_env(SLURM_JOB_ID="4242", SLURM_STEP_ID="0", SLURM_PROCID=str(rank),
                     SLURM_LOCALID=str(rank % per_node), SLURM_NODEID=str(rank // per_node),
                     SLURM_NTASKS=str(tasks), SLURM_NNODES=str(tasks // per_node),
                     SLURM_NTASKS_PER_NODE=str(per_node), SLURM_TASKS_PER_NODE=f"{per_node}(x{tasks // per_node})",
                     MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), **extra)


def srun_command(line: str) -> list[str]:
    """The task command of an `srun [--options] COMMAND ...` line."""
    argv = shlex.split(line)
    assert argv[0] == "srun"
    i = 1
    while argv[i].startswith("-"):
        i += 1
    return argv[i:]


def test_slurm_batch_recipe_first_step(tmp_path):
    script = recipe("slurm-batch")
    steps = [ln for ln in script.splitlines() if ln.startswith("srun ")]
    assert "ncclcheck run" in steps[0] and steps[0].endswith("|| exit 1")
    assert "train.py" in steps[1]  # the check comes first
    task = srun_command(steps[0].rsplit("||", 1)[0].replace("$SLURM_JOB_ID", "4242"))
    assert task[0] == "ncclcheck"
    port = free_port()
    cmd = [sys.executable, "-m", "ncclcheck"] + quick(task[1:])
    procs = [subprocess.Popen(cmd, cwd=tmp_path, env=slurm_task_env(r, 2, 2, port),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(2)]
    outs = communicate(procs)
    assert [code for code, _, _ in outs] == [0, 0], outs
    assert "launcher slurm" in outs[0][1] and "all 2 ranks reported to rank 0" in outs[0][1]
    junit = tmp_path / "ncclcheck-4242.xml"
    assert junit.exists() and 'name="cluster.reported"' in junit.read_text()


def test_slurm_prolog_recipe_trains_only_when_the_job_passes(tmp_path):
    line = recipe("slurm-prolog").strip()
    task = srun_command(line)
    assert task[:2] == ["bash", "-c"]
    body = task[2].replace("python train.py", "echo TRAINING")
    body = body.replace("ncclcheck run", "ncclcheck run --checks ranks").replace("--timeout 180", "--timeout 30")
    env_path = f"{shim_bin(tmp_path)}:{os.environ['PATH']}"

    def job(bad_rank: int | None) -> list[tuple[int, str, str]]:
        port = free_port()
        procs = []
        for r in range(2):
            extra = {"NCCL_SOCKET_IFNAME": "eth9" if r == bad_rank else "eth0"}
            env = slurm_task_env(r, 2, 2, port, PATH=env_path, **extra)
            procs.append(subprocess.Popen(["bash", "-c", body], env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        return communicate(procs)

    healthy = job(None)
    assert [code for code, _, _ in healthy] == [0, 0], healthy
    assert all("TRAINING" in out for _, out, _ in healthy)
    broken = job(1)
    assert [code for code, _, _ in broken] == [1, 1], broken
    assert not any("TRAINING" in out for _, out, _ in broken)
    assert "NCCL_SOCKET_IFNAME='eth9'" in " ".join(broken[0][1].split())


@pytest.mark.netns
def test_kubernetes_init_container_recipe(tmp_path, netns_cluster):
    """Pods are network namespaces with the pod's host name; the master's service name
    resolves through the namespace's own hosts file, as cluster DNS would."""
    manifest = yaml.safe_load(recipe("kubernetes"))
    job_name = manifest["metadata"]["name"]
    specs = manifest["spec"]["pytorchReplicaSpecs"]
    pods = [(t, i) for t in ("Master", "Worker") for i in range(specs[t]["replicas"])]
    cluster = netns_cluster("nc4", "198.18.4", nodes=len(pods))
    master_ip = cluster.node(0).address
    env_path = f"{shim_bin(tmp_path)}:{os.environ['PATH']}"
    hosts_dirs = []
    procs = []
    try:
        for n, (replica_type, index) in enumerate(pods):
            hosts_dir = Path("/etc/netns") / cluster.node(n).netns
            hosts_dir.mkdir(parents=True, exist_ok=True)
            hosts_dirs.append(hosts_dir)
            (hosts_dir / "hosts").write_text(f"127.0.0.1 localhost\n{master_ip} {job_name}-master-0\n")
            init = specs[replica_type]["template"]["spec"]["initContainers"][0]
            env = clean_env(PATH=env_path)
            for var in init["env"]:
                if "value" in var:
                    env[var["name"]] = var["value"]
                else:  # the downward API's replica-index label
                    assert "replica-index" in var["valueFrom"]["fieldRef"]["fieldPath"]
                    env[var["name"]] = str(index)
            argv = [a.replace("--timeout 300", "--timeout 30 --checks ranks") for a in init["command"]]
            pod = f"{job_name}-{replica_type.lower()}-{index}"
            procs.append(cluster.popen(n, argv, hostname=pod, env=env))
        outs = communicate(procs)
    finally:
        for hosts_dir in hosts_dirs:
            shutil.rmtree(hosts_dir, ignore_errors=True)
    assert [code for code, _, _ in outs] == [0, 0, 0], outs
    report = " ".join(outs[0][1].split())  # the master pod is rank 0
    assert "all 3 ranks reported to rank 0 (3 processes on 3 hosts)" in report
    assert "global ranks are unique and within 0..2" in report
    assert f"store at {job_name}-master-0:23456" in report
    assert outs[1][1] == outs[2][1] == ""


def mpirun_available() -> bool:
    if shutil.which("mpirun"):
        return True
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("CI=true but mpirun (openmpi-bin) is not installed")
    pytest.skip("mpirun (openmpi-bin) is not installed")


def test_mpirun_recipe():
    mpirun_available()
    argv = shlex.split(recipe("mpirun").replace("\\\n", " "))
    assert argv[0] == "mpirun"
    port = free_port()
    cmd = ["mpirun"]
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        flag, value = argv[i], argv[i + 1]
        if flag == "-np":
            value = "2"
        if flag == "-H":  # one host here
            i += 2
            continue
        if flag == "-x" and value.startswith("MASTER_ADDR="):
            value = "MASTER_ADDR=127.0.0.1"
        if flag == "-x" and value.startswith("MASTER_PORT="):
            value = f"MASTER_PORT={port}"
        cmd += [flag, value]
        i += 2
    assert argv[i] == "ncclcheck"
    cmd += ["--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    cmd += [sys.executable, "-m", "ncclcheck"] + quick(argv[i + 1:])
    proc = subprocess.run(cmd, capture_output=True, text=True, env=clean_env(), timeout=LIMIT)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert proc.stdout.count("cluster.reported") == 1
    assert "all 2 ranks reported to rank 0" in proc.stdout
    assert "launcher ompi" in proc.stdout or "Open MPI" in proc.stdout


DOCKER_STANDIN = """#!{python}
# Stands in for `docker run [options] IMAGE COMMAND...`: runs COMMAND here, with -v mounts
# mapped onto host paths.
import os, sys
args = sys.argv[1:]
assert args[0] == "run"
mounts, i = {{}}, 1
while args[i].startswith("-"):
    if args[i] in ("-v", "--volume"):
        host, inside = args[i + 1].split(":")[:2]
        mounts[inside] = host
        i += 2
    elif args[i] in ("--gpus", "--network", "-e", "--env"):
        i += 2
    else:
        i += 1
command = args[i + 1:]
for inside, host in mounts.items():
    command = [a.replace(inside, host, 1) if a.startswith(inside) else a for a in command]
os.execvp(command[0], command)
"""


def test_ci_gate_recipe_fails_on_exit_1_and_leaves_the_junit_file(tmp_path):
    bin_dir = shim_bin(tmp_path)
    docker = bin_dir / "docker"
    docker.write_text(DOCKER_STANDIN.format(python=sys.executable))
    docker.chmod(0o755)
    gate = tmp_path / "ci-gate.sh"
    gate.write_text(recipe("ci-gate").replace("--timeout 300", "--timeout 30 --checks ranks"))

    def run_gate(out: Path, **extra: str) -> subprocess.CompletedProcess:
        env = clean_env(PATH=f"{bin_dir}:{os.environ['PATH']}", OUT_DIR=str(out), **extra)
        return subprocess.run(["bash", str(gate), "registry.example.com/train:test"], env=env,
                              capture_output=True, text=True, timeout=LIMIT)

    good = run_gate(tmp_path / "good")
    assert good.returncode == 0, good.stderr[-2000:]
    assert (tmp_path / "good" / "ncclcheck.xml").exists()
    bad = run_gate(tmp_path / "bad", RANK="0", WORLD_SIZE="four")  # a malformed launch
    assert bad.returncode == 1, bad.stderr[-2000:]
    junit = (tmp_path / "bad" / "ncclcheck.xml").read_text()
    assert "WORLD_SIZE" in junit and "<failure" in junit
    assert "ranks.env" in bad.stdout  # the markdown report is shown in the CI log

    workflow = yaml.safe_load(recipe("ci-gate-workflow"))
    steps = workflow["jobs"]["ncclcheck"]["steps"]
    gate_step = next(s for s in steps if "ci-gate.sh" in s.get("run", ""))
    upload = next(s for s in steps if "upload-artifact" in s.get("uses", ""))
    assert upload["if"] == "always()"  # uploaded even when the gate failed the job
    assert upload["with"]["path"].rstrip("/") in gate_step["env"]["OUT_DIR"]
