"""A real single-host Slurm for the tests: munged, slurmctld and slurmd from the Debian packages.

Everything lives in one private folder (configuration from tests/slurm/slurm.conf with this
host's name and CPU count filled in, free ports, its own munge key and socket, state, spool,
logs and pid files), so nothing touches /etc/slurm or a site's Slurm. Each daemon runs in the
foreground as a child of the test process and is stopped by its own pid.

    with SlurmCluster.start(tmp_dir) as slurm:
        slurm.run(["srun", "-N1", "-n2", "hostname"])

Tests use the session fixture ``slurm_cluster`` (tests/conftest.py), which skips when not root
or without the packages locally and fails under CI=true, where a skip would hide a missing
dependency.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import string
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

CONF_TEMPLATE = Path(__file__).parent / "slurm" / "slurm.conf"
DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd")
CLIENTS = ("srun", "sbatch", "sinfo", "scontrol", "scancel")
PACKAGES = "slurmd slurmctld slurm-client munge"


def slurm_unavailable_reason() -> str | None:
    """Why a real Slurm cannot be started here, or None when it can."""
    if os.geteuid() != 0:
        return "real-Slurm tests need root (the daemons run as root)"
    missing = [tool for tool in DAEMONS + CLIENTS if shutil.which(tool) is None]
    if missing:
        return f"real-Slurm tests need {', '.join(missing)} (Debian packages: {PACKAGES})"
    return None


def slurm_client_unavailable_reason() -> str | None:
    """Why ``scontrol`` cannot run here (no daemons needed), or None."""
    return None if shutil.which("scontrol") else "needs scontrol (Debian package slurm-client)"


def minimal_conf(folder: Path) -> Path:
    """A slurm.conf just complete enough for local-only commands (``scontrol show hostnames``)."""
    path = folder / "slurm-local.conf"
    path.write_text("ClusterName=ncclcheck-local\nSlurmctldHost=localhost\n")
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_daemons(daemons: Sequence["Daemon"], ready: Callable[[], bool], timeout: float,
                     what: str, logs: Callable[[], str], pause: float) -> None:
    """Until ``ready()`` (a probe that times out counts as not yet), failing at once, with
    the logs, when a daemon exits, and at the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for daemon in daemons:
            if daemon.process.poll() is not None:
                raise RuntimeError(f"{daemon.name} exited ({daemon.process.returncode}):\n"
                                   + logs())
        try:
            if ready():
                return
        except subprocess.TimeoutExpired:
            pass
        time.sleep(pause)
    raise RuntimeError(f"Slurm not ready ({what}) after {timeout:g} s:\n" + logs())


def cancel_test_jobs(daemons: Sequence["Daemon"],
                     run: Callable[..., subprocess.CompletedProcess[str]]) -> bool:
    """Cancel what is left of the tests' jobs while slurmctld still runs (10 s at most); True
    when it did."""
    if not any(d.name == "slurmctld" and d.process.poll() is None for d in daemons):
        return False
    try:
        run(["scancel", "--full", "--partition=test", "--user=root"], timeout=10)
    except subprocess.TimeoutExpired:
        pass
    return True


def daemon_logs(folder: Path, tail: int) -> str:
    """The end of every daemon's output and log file in ``folder``."""
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-tail:]}"
                     for p in sorted(folder.glob("*.out")) + sorted(folder.glob("*.log")))


@dataclass
class Daemon:
    """One daemon process this fixture started, and the pid file it writes."""

    name: str
    process: subprocess.Popen
    pid_file: Path | None = None

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM by pid, then SIGKILL after ``grace`` seconds."""
        if self.process.poll() is not None:
            return
        os.kill(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=grace)


@dataclass
class SlurmCluster:
    """A running single-host Slurm: ``run`` executes a client command against it."""

    folder: Path
    hostname: str
    conf: Path
    daemons: list[Daemon] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)

    @property
    def env(self) -> dict[str, str]:
        """The caller's environment pointed at this cluster (and not at any other Slurm job)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "MASTER_"))}
        env["SLURM_CONF"] = str(self.conf)
        return env

    def run(self, args: Sequence[str], timeout: float = 60, check: bool = False,
            **kwargs) -> subprocess.CompletedProcess[str]:
        env = {**self.env, **kwargs.pop("env", {})}
        return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout,
                              env=env, check=check, **kwargs)

    def node_state(self) -> str:
        done = self.run(["sinfo", "-h", "-N", "-n", self.hostname, "-o", "%T"], timeout=10)
        return done.stdout.strip()

    def resume(self, node: str) -> None:
        """Undo a drain: the node back in service, waited for (up to 20 s) until idle."""
        done = self.run(["scontrol", "update", f"nodename={node}", "state=resume"], timeout=10)
        assert done.returncode == 0, done.stderr
        deadline = time.monotonic() + 20
        while self.node_state() != "idle" and time.monotonic() < deadline:
            time.sleep(0.3)

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def start(cls, folder: Path, ready_timeout: float = 60) -> "SlurmCluster":
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o755)  # munged wants the socket's folder traversable by everyone
        for sub in ("ctld", "spool"):
            (folder / sub).mkdir(exist_ok=True)
        hostname = socket.gethostname()
        conf = folder / "slurm.conf"
        conf.write_text(string.Template(CONF_TEMPLATE.read_text()).substitute(
            hostname=hostname, cpus=os.cpu_count() or 1, state=folder,
            ctld_port=_free_port(), slurmd_port=_free_port()))
        cluster = cls(folder, hostname, conf)
        try:
            cluster._start_daemons(ready_timeout)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _spawn(self, name: str, args: list[str], pid_file: str | None) -> None:
        log = open(self.folder / f"{name}.out", "w")
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=self.env)
        log.close()
        self.daemons.append(Daemon(name, process, self.folder / pid_file if pid_file else None))

    def _start_daemons(self, ready_timeout: float) -> None:
        folder = self.folder
        subprocess.run(["mungekey", "--create", f"--keyfile={folder / 'munge.key'}"], check=True,
                       capture_output=True, timeout=30)
        self._spawn("munged", ["munged", "--foreground", "--force",
                               f"--socket={folder / 'munge.sock'}",
                               f"--key-file={folder / 'munge.key'}",
                               f"--pid-file={folder / 'munged.pid'}",
                               f"--log-file={folder / 'munged.log'}",
                               f"--seed-file={folder / 'munged.seed'}"], "munged.pid")
        self._wait_for(lambda: (folder / "munge.sock").exists(), ready_timeout, "munged socket")
        self._spawn("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)], "slurmctld.pid")
        self._spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf)], "slurmd.pid")
        self._wait_for(lambda: self.node_state() == "idle", ready_timeout, "node idle in sinfo")

    def _wait_for(self, ready, timeout: float, what: str) -> None:
        wait_for_daemons(self.daemons, ready, timeout, what, self.logs, pause=0.3)

    def logs(self) -> str:
        return daemon_logs(self.folder, tail=3000)

    def stop(self) -> None:
        """Cancel what is left of the tests' jobs, then stop slurmd, slurmctld, munged by pid."""
        if cancel_test_jobs(self.daemons, self.run):
            self._wait_for_no_steps(15)
        for daemon in reversed(self.daemons):
            daemon.stop()

    def _wait_for_no_steps(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.leftover_steps():
            time.sleep(0.3)

    def leftover_steps(self) -> list[int]:
        """Pids of slurmstepd processes started since this cluster started."""
        import psutil

        found = []
        for proc in psutil.process_iter(["name", "create_time"]):
            if proc.info["name"] == "slurmstepd" and proc.info["create_time"] >= self.started_at - 1:
                found.append(proc.pid)
        return found

    def running_pids(self) -> list[int]:
        """Pids of this cluster's daemons and job-step daemons still alive (empty once stopped)."""
        alive = [d.process.pid for d in self.daemons if d.process.poll() is None]
        return alive + self.leftover_steps()

    def __enter__(self) -> "SlurmCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
