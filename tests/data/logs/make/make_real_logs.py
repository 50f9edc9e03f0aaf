"""Re-create the corpus's real logs: real torchrun, Gloo, Lightning and libnccl on this machine.

    python tests/data/logs/make/make_real_logs.py [NAME ...]

Each scenario provokes one failure of the real software on CPU (loopback, or network
namespaces in 198.18.3.0/24 standing in for nodes; those need root) and stores what it
printed, with the machine's paths replaced by neutral ones. The committed logs are what the
tests read; this script is how they were made (the ``torch2.11-*`` copies: the same scenarios
under another torch release, kept where their wording differs beyond numbers).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
OUT = HERE.parent / "real"
PY = sys.executable
TORCHRUN = [PY, "-m", "torch.distributed.run"]
WORKER = str(HERE / "worker.py")
LIGHTNING = str(HERE / "lightning_job.py")
NCCL = str(HERE / "nccl_bootstrap.py")
STRAGGLER = str(HERE / "straggler_lightning.py")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NCCL_", "GLOO_", "TORCH", "MASTER_", "RANK", "WORLD_", "LOCAL_",
                                "PET_", "SLURM_"))}
    env.update(PYTHONUNBUFFERED="1", **extra)
    return env


def run(argv: list[str], env: dict[str, str], timeout: float = 120) -> str:
    try:
        done = subprocess.run(argv, env=env, cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=timeout)
        return done.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as exc:
        return (exc.stdout or b"").decode("utf-8", "replace") + "\n[make_real_logs: timed out]\n"


def neutral(text: str) -> str:
    """This machine's paths -> neutral ones; everything else stays as printed."""
    venv = str(Path(PY).resolve().parents[1])
    text = text.replace(str(Path(sys.prefix)), "/opt/venv").replace(venv, "/opt/venv")
    text = text.replace(str(REPO), "/opt/project")
    text = re.sub(r"/tmp/[\w.\-]+(?:/[\w.\-]+)*", "/tmp/job", text)
    text = re.sub(r"/(?:root|home/\w+)/", "/home/user/", text)
    return text


def scenario_half_world() -> str:
    port = free_port()
    return run(TORCHRUN + ["--nnodes=1", "--nproc-per-node=4", "--master-port", str(port),
                           WORKER, "half_world"], base_env())


def scenario_kill_rank() -> str:
    port = free_port()
    return run(TORCHRUN + ["--nnodes=1", "--nproc-per-node=2", "--master-port", str(port),
                           "--tee=3", WORKER, "kill_rank1"], base_env())


def scenario_value_error() -> str:
    port = free_port()
    return run(TORCHRUN + ["--nnodes=1", "--nproc-per-node=2", "--master-port", str(port),
                           "--role=trainer", "--tee=3", WORKER, "value_error"],
               base_env())


def scenario_busy_port_torchrun() -> str:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        return run(TORCHRUN + ["--nnodes=1", "--nproc-per-node=2", "--master-addr=127.0.0.1",
                               f"--master-port={port}", WORKER, "init"], base_env(), timeout=90)


def scenario_busy_port_plain() -> str:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = base_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="2")
        return run([PY, WORKER, "init"], env, timeout=60)


def scenario_unreachable_master() -> str:
    port = free_port()  # nothing listens there
    env = base_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="1", WORLD_SIZE="2",
                   SCENARIO_TIMEOUT="5")
    return run([PY, WORKER, "init"], env, timeout=60)


def scenario_unreachable_master_torchrun() -> str:
    port = free_port()
    env = base_env()
    return run(TORCHRUN + ["--nnodes=2", "--node-rank=1", "--nproc-per-node=2",
                           "--master-addr=127.0.0.1", f"--master-port={port}",
                           "--rdzv-conf=timeout=5,join_timeout=5", WORKER, "init"], env, timeout=120)


def scenario_wrong_gloo_ifname() -> str:
    port = free_port()
    return run(TORCHRUN + ["--nnodes=1", "--nproc-per-node=2", "--master-port", str(port),
                           WORKER, "init"], base_env(GLOO_SOCKET_IFNAME="eth9"))


def scenario_world_size_none() -> str:
    env = base_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    return run([PY, WORKER, "init_none_world"], env)


def scenario_master_addr_missing() -> str:
    env = base_env(MASTER_PORT=str(free_port()), RANK="0", WORLD_SIZE="1")
    return run([PY, WORKER, "init"], env)


def scenario_debug_level_bogus() -> str:
    env = base_env(TORCH_DISTRIBUTED_DEBUG="VERBOSE", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(free_port()), RANK="0", WORLD_SIZE="1")
    return run([PY, WORKER, "init"], env)


def scenario_lightning_devices_mismatch() -> str:
    port = free_port()
    return run(TORCHRUN + ["--nnodes=1", "--nproc-per-node=4", "--master-port", str(port),
                           LIGHTNING, "2", "1", "builtin"], base_env(), timeout=180)


def scenario_lightning_custom_env() -> str:
    """2 'nodes' x 2 processes, world_size() = per-node count: the motivating case on Gloo."""
    port = free_port()
    procs = []
    with tempfile.TemporaryDirectory() as tmp:
        outs = []
        for node in range(2):
            out = open(os.path.join(tmp, f"node{node}.log"), "wb")
            outs.append(out)
            env = base_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NODE_RANK=str(node))
            procs.append(subprocess.Popen([PY, LIGHTNING, "2", "2", "custom"], env=env, cwd=REPO,
                                          stdout=out, stderr=subprocess.STDOUT))
        for proc in procs:
            try:
                proc.wait(timeout=150)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for out in outs:
            out.close()
        return "".join(Path(tmp, f"node{n}.log").read_text("utf-8", "replace") for n in range(2))


def scenario_nccl_no_interface() -> str:
    return run([PY, NCCL], base_env(NCCL_DEBUG="INFO", NCCL_SOCKET_IFNAME="eth9"))


def scenario_nccl_bad_comm_id() -> str:
    return run([PY, NCCL], base_env(NCCL_DEBUG="WARN", NCCL_COMM_ID="node1-29600"))


def scenario_nccl_comm_id_other_subnet() -> str:
    return run([PY, NCCL], base_env(NCCL_DEBUG="INFO", NCCL_COMM_ID="198.18.3.77:29600"))


def _cluster():
    sys.path.insert(0, str(REPO))
    from tests.netns import Cluster
    return Cluster("nc3", subnet="198.18.3", nodes=2)


def scenario_netns_unreachable_master() -> str:
    """node1 (its own namespace) points torchrun at 198.18.3.99, where no host answers."""
    with _cluster() as cluster:
        argv = cluster.command(1, TORCHRUN + ["--nnodes=2", "--node-rank=1", "--nproc-per-node=1",
                                              "--master-addr=198.18.3.99", "--master-port=29500",
                                              "--rdzv-conf=timeout=5,join_timeout=5",
                                              WORKER, "init"], hostname="node1")
        return run(argv, base_env(), timeout=150)


def scenario_netns_two_nodes_killed_rank() -> str:
    """Two namespaces as two nodes, one torchrun each; rank 1 (on node1) is SIGKILLed."""
    with _cluster() as cluster:
        master = cluster.node(0).address
        procs = []
        for i in range(2):
            argv = cluster.command(i, TORCHRUN + [
                "--nnodes=2", f"--node-rank={i}", "--nproc-per-node=1", f"--master-addr={master}",
                "--master-port=29500", WORKER, "kill_rank1"], hostname=f"node{i}")
            procs.append(subprocess.Popen(argv, env=base_env(GLOO_SOCKET_IFNAME="eth0"),
                                          cwd=REPO, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT))
        outs = []
        for proc in procs:
            try:
                out, _ = proc.communicate(timeout=150)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
            outs.append(out.decode("utf-8", "replace"))
        return "".join(outs)


def clean_torchrun() -> str:
    port = free_port()
    return run(TORCHRUN + ["--nnodes=1", "--nproc-per-node=2", "--master-port", str(port),
                           WORKER, "ok"], base_env())


def scenario_lightning_straggler() -> str:
    """Lightning DDP on Gloo, rank 1 slow from the middle of the epoch on: nothing errors."""
    return run([PY, STRAGGLER], base_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port())),
               timeout=180)


def clean_nccl_info() -> str:
    return run([PY, NCCL], base_env(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="ALL"))


def clean_lightning() -> str:
    return run([PY, LIGHTNING, "2", "1", "builtin"],
               base_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port())), timeout=180)


REAL = {
    "torchrun-gloo-half-world.log": scenario_half_world,
    "torchrun-killed-rank.log": scenario_kill_rank,
    "torchrun-rank-valueerror.log": scenario_value_error,
    "torchrun-busy-master-port.log": scenario_busy_port_torchrun,
    "gloo-busy-master-port.log": scenario_busy_port_plain,
    "gloo-unreachable-master.log": scenario_unreachable_master,
    "torchrun-unreachable-master.log": scenario_unreachable_master_torchrun,
    "torchrun-wrong-gloo-ifname.log": scenario_wrong_gloo_ifname,
    "torch-world-size-none.log": scenario_world_size_none,
    "torch-master-addr-unset.log": scenario_master_addr_missing,
    "torch-debug-level-bogus.log": scenario_debug_level_bogus,
    "lightning-devices-vs-world-size.log": scenario_lightning_devices_mismatch,
    "lightning-custom-env-per-node-world.log": scenario_lightning_custom_env,
    "netns-torchrun-unreachable-master.log": scenario_netns_unreachable_master,
    "netns-two-nodes-killed-rank.log": scenario_netns_two_nodes_killed_rank,
    "nccl-socket-ifname-nothing.log": scenario_nccl_no_interface,
    "nccl-bad-comm-id.log": scenario_nccl_bad_comm_id,
    "nccl-comm-id-other-subnet.log": scenario_nccl_comm_id_other_subnet,
    "lightning-straggler-slowdown.log": scenario_lightning_straggler,
}
CLEAN = {
    "torchrun-gloo-ok.log": clean_torchrun,
    "nccl-info-bootstrap-ok.log": clean_nccl_info,
    "lightning-ddp-cpu-ok.log": clean_lightning,
}


def main(names: list[str]) -> None:
    for folder, table in ((OUT, REAL), (HERE.parent / "clean", CLEAN)):
        for name, make in table.items():
            if names and name not in names:
                continue
            text = neutral(make())
            (folder / name).write_text(text, "utf-8")
            print(f"{folder.name}/{name}: {len(text.splitlines())} lines", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
