"""Which job a process belongs to, and which job to look at when a node runs several.

A verdict compares ranks of one job: two jobs on a shared node must never be judged together
(one's ranks would look like the other's culprits). Processes are told apart by the launcher
they run under (the nearest torchrun, srun step or mpirun above them), else by the job's own
variables. Where several jobs are found, the one named by ``--job`` (a launcher's pid, a Slurm
job id, a torchrun run id) is taken; inside a Slurm job (``srun --overlap --jobid J``) that
job's own; otherwise the choice is the user's, and the jobs found are listed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ncclcheck.hang.discover import Found

_JOB_VARIABLES = ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "OMPI_MCA_ess_base_jobid")


class JobChoice(Exception):
    """Several jobs run here and none was chosen, or the one named is not here: one line."""


@dataclass(frozen=True)
class Job:
    """One job's processes on this node, and the names it answers to."""

    key: str
    names: frozenset[str]
    processes: tuple[Found, ...]

    def describe(self) -> str:
        pids = ", ".join(str(f.pid) for f in self.processes[:4])
        more = "..." if len(self.processes) > 4 else ""
        return f"{self.key} ({len(self.processes)} process(es): {pids}{more})"


def _names(found: Found) -> set[str]:
    env = found.env or {}
    names = {env[v] for v in _JOB_VARIABLES if env.get(v)}
    if env.get("SLURM_JOB_ID") and env.get("SLURM_STEP_ID"):
        names.add(f"{env['SLURM_JOB_ID']}.{env['SLURM_STEP_ID']}")
    if found.launcher_pid is not None:
        names.add(str(found.launcher_pid))
    return names


def _key(found: Found) -> str:
    env = found.env or {}
    if found.launcher_pid is not None:
        return f"launcher pid {found.launcher_pid}"
    for variable in _JOB_VARIABLES:
        if env.get(variable):
            return f"{variable}={env[variable]}"
    if env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        return f"MASTER_ADDR:PORT={env['MASTER_ADDR']}:{env['MASTER_PORT']}"
    return "unknown job"


def group(found: list[Found]) -> list[Job]:
    """The jobs among the processes found, largest first."""
    by_key: dict[str, list[Found]] = {}
    for item in found:
        by_key.setdefault(_key(item), []).append(item)
    jobs = [Job(key, frozenset().union(*(_names(f) for f in members)), tuple(members))
            for key, members in by_key.items()]
    return sorted(jobs, key=lambda j: (-len(j.processes), j.key))


def choose(found: list[Found], wanted: str | None, own_slurm_job: str | None) -> list[Found]:
    """The processes of the job to look at; JobChoice when that cannot be told."""
    jobs = group(found)
    if wanted is not None:
        chosen = [j for j in jobs if wanted in j.names]
        if not chosen:
            listed = "; ".join(j.describe() for j in jobs) or "none"
            raise JobChoice(f"--job {wanted}: no such job on this node (found: {listed})")
        return [f for j in chosen for f in j.processes]
    if len(jobs) <= 1:
        return list(jobs[0].processes) if jobs else []
    if own_slurm_job:
        mine = [j for j in jobs if own_slurm_job in j.names]
        if mine:
            return [f for j in mine for f in j.processes]
    raise JobChoice(f"{len(jobs)} jobs run on this node: "
                    + "; ".join(j.describe() for j in jobs)
                    + " — name one with --job (a launcher's pid, a Slurm job id or a torchrun "
                      "run id), or give --pid")
