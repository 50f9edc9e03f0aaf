"""A real multi-node Slurm for the tests: slurmctld and one slurmd per "node", each node a
network namespace with its own host name (tests/netns.py), on a private bridge.

munged runs in the test's own namespace (its socket is a file, so every namespace reaches it);
slurmctld runs in a namespace of its own named ``ctl``; node i's slurmd runs in namespace i with
host name ``node{i}``, so the jobs' tasks run there, see that host name and talk to each other
over the bridge (198.18.x.0/24, nothing leaves the machine). Clients (srun, sinfo, scontrol) run
inside the controller's namespace. Everything else is as tests/slurm.py: a private folder, free
ports, daemons in the foreground stopped by their pids.

    with NodesSlurm.start(tmp_dir, cluster, nodes=6) as slurm:
        slurm.run(["srun", "-N6", "hostname"])
"""

from __future__ import annotations

import os
import string
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from netns import Cluster
from slurm import Daemon, _free_port, cancel_test_jobs, daemon_logs, wait_for_daemons

CONF_TEMPLATE = Path(__file__).parent / "slurm" / "slurm-nodes.conf"
CONTROLLER = "ctl"


@dataclass
class NodesSlurm:
    """A running Slurm whose nodes are the namespaces 0..nodes-1 of ``cluster``; its namespace
    ``nodes`` holds slurmctld and runs the clients."""

    folder: Path
    cluster: Cluster
    nodes: int
    conf: Path
    daemons: list[Daemon] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [f"node{i}" for i in range(self.nodes)]

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "MASTER_"))}
        env["SLURM_CONF"] = str(self.conf)
        return env

    def command(self, args: Sequence[str]) -> list[str]:
        """A client command run inside the controller's namespace."""
        return self.cluster.command(self.nodes, list(args))

    def run(self, args: Sequence[str], timeout: float = 60, **kwargs) -> subprocess.CompletedProcess[str]:
        env = {**self.env, **kwargs.pop("env", {})}
        return subprocess.run(self.command(args), capture_output=True, text=True,
                              timeout=timeout, env=env, **kwargs)

    def popen(self, args: Sequence[str], **kwargs) -> subprocess.Popen[str]:
        env = {**self.env, **kwargs.pop("env", {})}
        return subprocess.Popen(self.command(args), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, **kwargs)

    def states(self) -> dict[str, str]:
        done = self.run(["sinfo", "-h", "-N", "-o", "%N %T"], timeout=15)
        return dict(line.split() for line in done.stdout.splitlines() if len(line.split()) == 2)

    def wait_idle(self, timeout: float = 60) -> None:
        """Every node idle (after a drain and resume, or a job's completion)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.states() == {name: "idle" for name in self.names}:
                return
            time.sleep(0.5)
        raise RuntimeError(f"Slurm nodes not idle after {timeout:g} s: {self.states()}\n"
                           + self.logs())

    def resume(self) -> None:
        drained = [n for n, s in self.states().items() if s != "idle"]
        if drained:
            self.run(["scontrol", "update", f"nodename={','.join(drained)}", "state=resume"],
                     timeout=15)
        self.wait_idle()

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def start(cls, folder: Path, cluster: Cluster, nodes: int,
              ready_timeout: float = 90) -> "NodesSlurm":
        """``cluster`` must have ``nodes`` + 1 namespaces: the nodes, then the controller's."""
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o755)
        for sub in ["ctld", "spool"] + [f"spool/node{i}" for i in range(nodes)]:
            (folder / sub).mkdir(exist_ok=True)
        lines = [f"NodeName=node{i} NodeAddr={cluster.node(i).address} CPUs={os.cpu_count() or 1}"
                 f" State=UNKNOWN" for i in range(nodes)]
        conf = folder / "slurm.conf"
        conf.write_text(string.Template(CONF_TEMPLATE.read_text()).substitute(
            controller=CONTROLLER, controller_addr=cluster.node(nodes).address, state=folder,
            ctld_port=_free_port(), slurmd_port=_free_port(), nodes="\n".join(lines),
            node_names=",".join(f"node{i}" for i in range(nodes))))
        slurm = cls(folder, cluster, nodes, conf)
        try:
            slurm._start_daemons(ready_timeout)
        except BaseException:
            slurm.stop()
            raise
        return slurm

    def in_node(self, i: int, argv: list[str], hostname: str) -> list[str]:
        """argv in namespace i's network and its own host name, keeping the test's mounts:
        `ip netns exec` would remount /sys, and slurmd wants /sys/fs/cgroup."""
        netns = self.cluster.node(i).netns
        return ["nsenter", f"--net=/run/netns/{netns}", "unshare", "--uts", "sh", "-c",
                'hostname "$0" && exec "$@"', hostname, *argv]

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.folder / f"{name}.out", "w")
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=self.env)
        log.close()
        self.daemons.append(Daemon(name, process))

    def _start_daemons(self, ready_timeout: float) -> None:
        folder = self.folder
        subprocess.run(["mungekey", "--create", f"--keyfile={folder / 'munge.key'}"], check=True,
                       capture_output=True, timeout=30)
        self._spawn("munged", ["munged", "--foreground", "--force",
                               f"--socket={folder / 'munge.sock'}",
                               f"--key-file={folder / 'munge.key'}",
                               f"--pid-file={folder / 'munged.pid'}",
                               f"--log-file={folder / 'munged.log'}",
                               f"--seed-file={folder / 'munged.seed'}"])
        self._wait_for(lambda: (folder / "munge.sock").exists(), ready_timeout, "munged socket")
        self._spawn("slurmctld", self.in_node(
            self.nodes, ["slurmctld", "-D", "-f", str(self.conf)], hostname=CONTROLLER))
        for i in range(self.nodes):
            self._spawn(f"slurmd-node{i}", self.in_node(
                i, ["slurmd", "-D", "-f", str(self.conf)], hostname=f"node{i}"))
        self._wait_for(lambda: self.states() == {n: "idle" for n in self.names}, ready_timeout,
                       "every node idle in sinfo")

    def _wait_for(self, ready, timeout: float, what: str) -> None:
        wait_for_daemons(self.daemons, ready, timeout, what, self.logs, pause=0.5)

    def logs(self) -> str:
        return daemon_logs(self.folder, tail=2000)

    def stop(self) -> None:
        """Cancel what is left of the jobs, then stop every daemon by its pid (slurmds first)."""
        cancel_test_jobs(self.daemons, self.run)
        for daemon in reversed(self.daemons):
            daemon.stop()

    def running_pids(self) -> list[int]:
        return [d.process.pid for d in self.daemons if d.process.poll() is None]

    def __enter__(self) -> "NodesSlurm":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
