"""Re-create the real launcher tails: what torchrun, srun and mpirun print when a rank dies.

    python tests/data/logs/make/make_launcher_tails.py [NAME ...]

A log whose root cause explain names must keep that root cause when the launcher's report of
the death is appended, as it is in every real capture (tests/logshapes.py appends these).
Each tail is made by the real launcher running dying_rank.py with 2 ranks, rank 1 aborting
(SIGABRT) or exiting 1: torchrun (torch's elastic agent), srun on the tests' single-host
Slurm (tests/slurm.py; needs root) and Open MPI's mpirun. Only the launcher's own lines about
the death are kept (the worker's marker lines and torchrun's OMP_NUM_THREADS banner are not),
with paths, host names, pids, job ids and times made neutral; tails/index.toml records the
launcher's version and command. tests/test_launcher_tails.py re-makes them and compares shapes.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
OUT = HERE.parent / "tails"
WORKER = HERE / "dying_rank.py"
MARKER = "dying_rank: ready"  # the worker's one line (dying_rank.py)
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests"))

from make_real_logs import base_env, free_port, neutral as neutral_paths  # noqa: E402
from slurm import SlurmCluster  # noqa: E402


@dataclass(frozen=True)
class Tail:
    """One way to die under one launcher."""

    launcher: str  # torchrun | srun | mpirun
    how: str  # abort | exit1 (dying_rank.py's argument)
    label: bool = False  # srun -l


TAILS = {
    "torchrun-abort": Tail("torchrun", "abort"),
    "torchrun-exit1": Tail("torchrun", "exit1"),
    "srun-abort": Tail("srun", "abort"),
    "srun-exit1": Tail("srun", "exit1"),
    "srun-l-abort": Tail("srun", "abort", label=True),
    "srun-l-exit1": Tail("srun", "exit1", label=True),
    "mpirun-abort": Tail("mpirun", "abort"),
    "mpirun-exit1": Tail("mpirun", "exit1"),
}
WORKER_ARGS = ("train.py",)  # dying_rank.py is copied into the job's folder under this name


@dataclass
class Made:
    """A tail as the launcher printed it (``raw``) and as stored (``text``)."""

    text: str
    raw: str
    command: str
    version: str


def torchrun_argv() -> list[str]:
    """torchrun's console script run by this interpreter (the venv's, as a user runs it)."""
    script = Path(sys.executable).parent / "torchrun"
    return [sys.executable, str(script)] if script.exists() else \
        [sys.executable, "-m", "torch.distributed.run"]


def argv_for(tail: Tail) -> tuple[list[str], str]:
    """The command to run and how index.toml shows it (no machine paths)."""
    job = [*WORKER_ARGS, tail.how]
    if tail.launcher == "torchrun":
        flags = ["--nproc-per-node", "2", "--master-port", str(free_port()), "--tee", "3"]
        shown = ["torchrun", *flags[:3], "PORT", *flags[4:]]
        return [*torchrun_argv(), *flags, *job], " ".join([*shown, *job])
    if tail.launcher == "srun":
        flags = ["-N1", "-n2", "--kill-on-bad-exit=1", *(["-l"] if tail.label else [])]
        return ["srun", *flags, sys.executable, *job], " ".join(["srun", *flags, "python", *job])
    flags = ["-np", "2", "--allow-run-as-root", "--oversubscribe"]
    return ["mpirun", *flags, sys.executable, *job], " ".join(["mpirun", *flags, "python", *job])


def _core_dumps_on() -> None:
    """In the launcher's process, before exec: allow core files, as a cluster's limits do
    (srun hands its limits to the tasks; ``Aborted (core dumped)`` needs it)."""
    _, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))


def run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 90) -> str:
    """Run a launcher in its own process group; the group is killed at the deadline, and
    whatever of it is left afterwards."""
    child = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, start_new_session=True,
                             preexec_fn=_core_dumps_on)
    try:
        out, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, _ = child.communicate(timeout=30)
        out += b"\n[make_launcher_tails: timed out]\n"
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return out.decode("utf-8", "replace")


FIRST_ABOUT_THE_DEATH = {"torchrun": "multiprocessing/api.py", "srun": "srun: error:"}


def launcher_lines(launcher: str, raw: str) -> str:
    """The launcher's own lines about the death: the worker's marker lines go, and what comes
    before the launcher's first report (torchrun's OMP_NUM_THREADS banner, srun's "job N
    queued" / "has been allocated resources" when the node was still busy)."""
    lines = [line for line in raw.splitlines() if MARKER not in line and line.strip()]
    if launcher in FIRST_ABOUT_THE_DEATH:
        first = next((i for i, line in enumerate(lines)
                      if FIRST_ABOUT_THE_DEATH[launcher] in line), 0)
        lines = lines[first:]
    return "\n".join(lines) + "\n"


_HOSTS = (  # where each launcher names the host: replaced by node1
    re.compile(r"(?m)^(\s*host\s*:\s*)\S+"),  # torchrun's failure block
    re.compile(r"(srun: error: )[^:\s]+(?=: task)"),
    re.compile(r"(slurmstepd-)[^:\s]+(?=:)"),
    re.compile(r"( ON )\S+(?= CANCELLED)"),
    re.compile(r"(on node )\S+(?= exited)"),
)
_PIDS = re.compile(r"(?m)(?:^[IWEF]\d{4} [\d:.]+ |pid: |PID |process )(\d+)")
_TIMES = (
    (re.compile(r"(?m)^([IWEF])\d{4} \d\d:\d\d:\d\d\.\d+"), r"\g<1>0101 00:00:00.000000"),
    (re.compile(r"\d{4}-\d\d-\d\d([_T ])\d\d:\d\d:\d\d"), r"2026-01-01\g<1>00:00:00"),
)
_JOBS = ((re.compile(r"(StepId=|STEP )\d+\."), r"\g<1>4242."),
         (re.compile(r"\[\[\d+,"), "[[4242,"))


def neutral(text: str) -> str:
    """Paths as make_real_logs.py neutralises them; the host as node1; pids by first
    appearance as 2000, 2031, 2032, ... (as many digits as the real ones); times as
    2026-01-01 00:00:00; job ids as 4242."""
    text = neutral_paths(text)
    for pattern in _HOSTS:
        text = pattern.sub(r"\g<1>node1", text)
    pids: dict[str, str] = {}
    for found in _PIDS.finditer(text):
        pid = found.group(1)
        if pid == "0":  # mpirun's "with PID 0" is what it prints
            continue
        # as many digits as the real one: torchrun sizes its report's rules to its lines
        pids.setdefault(pid, str(2 * 10 ** (len(pid) - 1) + (30 + len(pids) if pids else 0)))
    text = _PIDS.sub(lambda m: m.group(0)[:m.start(1) - m.start(0)]
                     + pids.get(m.group(1), m.group(1)), text)
    for pattern, replacement in (*_TIMES, *_JOBS):
        text = pattern.sub(replacement, text)
    return text


def version_of(launcher: str, env: dict[str, str]) -> str:
    if launcher == "torchrun":
        return "torch " + importlib.metadata.version("torch")
    argv = ["srun", "--version"] if launcher == "srun" else ["mpirun", "--version"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env)
    return (done.stdout or done.stderr).strip().splitlines()[0]


def make(name: str, cluster: SlurmCluster | None = None) -> Made:
    """Run the launcher for tail ``name`` (srun needs a running ``cluster``)."""
    tail = TAILS[name]
    argv, shown = argv_for(tail)
    env = base_env()
    if tail.launcher == "srun":
        if cluster is None:
            raise ValueError(f"{name}: srun needs a running Slurm (tests/slurm.py)")
        env["SLURM_CONF"] = str(cluster.conf)
    with tempfile.TemporaryDirectory(prefix="tail-") as tmp:
        shutil.copy(WORKER, Path(tmp) / WORKER_ARGS[0])
        raw = run(argv, Path(tmp), env)
    return Made(neutral(launcher_lines(tail.launcher, raw)), raw, shown, version_of(tail.launcher, env))


def prefixes(raw: str) -> dict[int, str]:
    """What the launcher put before each rank's marker line: its per-line prefix."""
    found = {}
    for line in raw.splitlines():
        if MARKER in line:
            head, _, rest = line.partition(MARKER)
            found[int(rest.split()[-1])] = head
    return found


def shape(text: str) -> list[str]:
    """The tail's lines with every number as N and every rule of - or = as three, sorted
    (torchrun sizes its rules to its longest line, pids included; a launcher's stderr and
    its tasks' lines can arrive in either order)."""
    return sorted(re.sub(r"([-=])\1{9,}", r"\1\1\1", re.sub(r"\d+", "N", line)).rstrip()
                  for line in text.splitlines() if line.strip())


def write_index(made: dict[str, Made]) -> None:
    """tails/index.toml: one entry per tail, the ones not re-made this time kept as they were."""
    index = OUT / "index.toml"
    old = {e["file"]: e for e in tomllib.loads(index.read_text("utf-8")).get("tail", [])} \
        if index.exists() else {}
    today = datetime.date.today().isoformat()
    for name, tail in made.items():
        spec = TAILS[name]
        old[f"{name}.txt"] = {"file": f"{name}.txt", "launcher": spec.launcher, "how": spec.how,
                              "version": tail.version, "command": tail.command, "made": today}
    lines = ["# The launcher tails in this folder: each made by the real launcher "
             "(tests/data/logs/make/make_launcher_tails.py).", ""]
    for name in sorted(old):
        lines.append("[[tail]]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in old[name].items()]
        lines.append("")
    index.write_text("\n".join(lines), "utf-8")


def main(names: list[str]) -> None:
    wanted = names or list(TAILS)
    cluster = None
    with tempfile.TemporaryDirectory(prefix="tails-slurm-") as state:
        if any(TAILS[name].launcher == "srun" for name in wanted):
            cluster = SlurmCluster.start(Path(state))
        try:
            made = {}
            for name in wanted:
                made[name] = make(name, cluster)
                (OUT / f"{name}.txt").write_text(made[name].text, "utf-8")
                print(f"tails/{name}.txt: {len(made[name].text.splitlines())} lines", flush=True)
        finally:
            if cluster is not None:
                cluster.stop()
    write_index(made)


if __name__ == "__main__":
    main(sys.argv[1:])
