"""How long `ncclcheck explain` takes to start on a small log, against the command line's own
start (`ncclcheck --version`) and a bare interpreter.

    python benchmarks/explain_startup.py [--rounds 21]
    python benchmarks/explain_startup.py --smoke   # 3 rounds: seconds

Two real failing logs of about 1 KB from the world corpus: one a signature decides (an NCCL
watchdog timeout) and one no signature decides, which the text model reads. Each round runs
every command once, in a fresh process, in turn (`python -c pass`, `ncclcheck --version`,
`explain` on each log), so a load on the machine that comes and goes weighs on all of them
alike; the medians and each explain's ratio to `--version` are printed (goal: 2x at most).

The children run as an installed package does: their bytecode cached (in a temporary folder,
whatever ``PYTHONDONTWRITEBYTECODE`` says here) and explain's cache folder filled, both by one
untimed round first. Before timing, each log is checked to be what its label says (decided by a
signature, or by the model's reading).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT / "tests" / "data" / "logs" / "world" / "dev"
LOGS = {  # label -> (log, decided by the model's reading)
    "signature": (DEV / "c4-006-colbert-kmeans-rank0-allreduce-watchdog-timeout.log", False),
    "model": (DEV / "c32-003-torchelastic-etcdstore-needs-newer-torch.log", True),
}
GOAL = 2.0  # explain on a 1 KB log, at most this many times `ncclcheck --version`
DEADLINE_S = 60.0


def child_env(folder: str) -> dict[str, str]:
    """The environment of every timed process: bytecode cached in ``folder``/pyc, explain's
    cache in ``folder``/cache, this checkout's package first on the path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = os.path.join(folder, "pyc")
    env["NCCLCHECK_CACHE_DIR"] = os.path.join(folder, "cache")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def commands() -> dict[str, list[str]]:
    ncclcheck = [sys.executable, "-m", "ncclcheck"]
    found = {"python -c pass": [sys.executable, "-c", "pass"],
             "ncclcheck --version": ncclcheck + ["--version"]}
    for label, (log, _) in LOGS.items():
        found[f"explain ({label})"] = ncclcheck + ["explain", str(log)]
    return found


def timed(argv: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one run; a run that fails stops the benchmark."""
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          timeout=DEADLINE_S, cwd=ROOT)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[1:])} exited {done.returncode}: "
                         f"{done.stderr.decode(errors='replace')[-500:]}")
    return wall


def check_labels(env: dict[str, str]) -> None:
    """Each log is decided the way its label says, so the two figures measure what they claim."""
    for label, (log, by_model) in LOGS.items():
        done = subprocess.run([sys.executable, "-m", "ncclcheck", "explain", "--format", "json",
                               str(log)], env=env, capture_output=True, text=True,
                              timeout=DEADLINE_S, cwd=ROOT, check=True)
        findings = json.loads(done.stdout)["findings"]
        root = findings[0]["id"] if findings and findings[0]["root_cause"] else None
        if root is None or root.startswith("model.") != by_model:
            raise SystemExit(f"{log.name}: root cause {root}, not the {label}'s reading")
        print(f"{label:>9} log: {log.name} ({log.stat().st_size} bytes), root cause {root}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--smoke", action="store_true", help="3 rounds: a quick run of the code")
    args = parser.parse_args()
    rounds = 3 if args.smoke else max(1, args.rounds)
    folder = tempfile.mkdtemp(prefix="explain-startup-")
    try:
        env = child_env(folder)
        argvs = commands()
        for argv in argvs.values():  # untimed: bytecode and explain's cache written
            timed(argv, env)
        check_labels(env)
        times: dict[str, list[float]] = {name: [] for name in argvs}
        for _ in range(rounds):
            for name, argv in argvs.items():
                times[name].append(timed(argv, env))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    medians = {name: statistics.median(values) for name, values in times.items()}
    base = medians["ncclcheck --version"]
    print(f"{rounds} interleaved rounds, median wall (min-max); goal: explain <= {GOAL:g}x "
          f"`ncclcheck --version`")
    for name, median in medians.items():
        ratio = f"{median / base:5.2f}x --version" if name.startswith("explain") else ""
        print(f"  {name:<22} {median:6.3f} s ({min(times[name]):.3f}-{max(times[name]):.3f})"
              f"  {ratio}")
    worst = max(medians[n] / base for n in medians if n.startswith("explain"))
    print(f"worst explain ratio {worst:.2f}x: " + ("within" if worst <= GOAL else "over")
          + " the goal")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
