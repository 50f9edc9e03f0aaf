"""Who joined the job, read by rank 0's gather: every rank reported exactly once, no rank is
claimed twice or out of range, and the world size the launch really has.

Pure judgement of ``Gathered`` (``ncclcheck.cluster.membership``): processes are keyed by their
store slot, never by the rank they claim, because the launches this tool exists for are the
ones where the claimed ranks are wrong.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ncclcheck.cluster.membership import (Gathered, expected_host, member_rank, members_where,
                                          node_hosts)
from ncclcheck.cluster.ranges import ranks_phrase
from ncclcheck.model import Category, CheckResult, failed, passed
from ncclcheck.probes.ranks.facts import Expected, fix_world
from ncclcheck.probes.spec import CheckSpec, judge


REPORTED = CheckSpec(
    "cluster.reported", "every process and every rank delivered a report to rank 0",
    (Category.RANK_CRASHED, Category.TIMEOUT),
    fails_when="a process connected and then stopped, or was still probing at rank "
               "0's deadline (rank_crashed), or a rank of 0..N-1 (N the larger of "
               "WORLD_SIZE and the launch's process count) never connected "
               "(timeout); each is named with its host or the node it was expected on",
    doc="Cluster mode only, as every cluster.* check: rank 0 gathers every rank's "
        "report within --timeout. Processes are counted by their store slot, never "
        "by the rank they claim, so each one appears exactly once "
        "(context.cluster.processes).",
    order=10)


RANK_IDS = CheckSpec(
    "cluster.rank_ids", "global ranks are unique and in range",
    (Category.RANK_MISMATCH,),
    fails_when="two processes claim one RANK, a RANK is outside 0..WORLD_SIZE-1 "
               "(WORLD_SIZE as rank 0 sees it) or negative, or a process has no "
               "integer rank",
    order=20)


WORLD_SIZE = CheckSpec(
    "cluster.world_size", "WORLD_SIZE matches the processes the launch started",
    (Category.RANK_MISMATCH,),
    fails_when="more processes joined than WORLD_SIZE says, or the launch's own "
               "count (nodes x LOCAL_WORLD_SIZE, SLURM_NTASKS, "
               "OMPI_COMM_WORLD_SIZE, --nodes x --gpus-per-node) differs from it; "
               "the fix names the world size the launch needs",
    doc="Rank 0 waits for as many processes as the launch says exist, even when "
        "WORLD_SIZE is smaller, so the ranks beyond it are named rather than lost.",
    order=30)


@judge(REPORTED)
def check_reported(job: Gathered) -> CheckResult:
    """Every process that connected reported, and every rank 0..slots-1 was claimed."""
    reported = {member_rank(m) for m in job.reported()}
    claimed = {member_rank(m) for m in job.members}
    silent = [m for m in job.members if m.get("slot") not in job.reported_slots]
    absent = [r for r in range(job.slots) if r not in claimed]
    hosts_of = node_hosts(job) if absent else ({}, {})
    missing = [r for r in range(job.slots) if r not in reported]
    if not silent and not absent:
        hosts, total = len({m.get("host") for m in job.members}), len(job.members)
        return passed(REPORTED, f"all {job.slots} ranks reported to rank 0 "
                      f"({total} process{'es' if total != 1 else ''} on {hosts} "
                      f"host{'s' if hosts != 1 else ''})", world_size=job.world_size,
                      reported=len(job.reported()))
    parts, entries = [], []
    if silent:
        parts.append(f"{members_where(silent)} connected, then stopped before reporting (killed or "
                     "crashed, or still probing at rank 0's deadline)")
        entries += [{"rank": member_rank(m), "host": m.get("host"), "connected": True,
                     "pid": m.get("pid")} for m in silent]
    if absent:
        places: dict[str, list[int]] = {}
        for r in absent:
            places.setdefault(expected_host(job, r, hosts_of), []).append(r)
        parts.append("; ".join(f"{ranks_phrase(rs)} never connected ({place})"
                               for place, rs in places.items()))
        entries += [{"rank": r, "host": None, "connected": False,
                     "expected": expected_host(job, r, hosts_of)} for r in absent]
    category = Category.RANK_CRASHED if silent else Category.TIMEOUT
    where = "; ".join(w for w in (members_where(silent) if silent else "",
                                  f"{ranks_phrase(absent)} (never connected)" if absent else "") if w)
    fix = ("Look at the launcher's log on the named hosts for why the rank did not finish "
           "(exit code, OOM killer, signal); a rank that cannot reach the store prints its own "
           "report with the reason. If nodes start late, raise --timeout.")
    count = len(silent) + len(absent)
    return failed(REPORTED,
                  f"{count} rank{'s' if count != 1 else ''} never reported: " + "; ".join(parts),
                  fix, category, world_size=job.world_size, missing=entries,
                  missing_ranks=missing, where=where)


def _place(member: dict[str, Any]) -> tuple[str, int, int]:
    """Where a process runs (host, local rank, pid): an order that does not depend on which
    process reached the store first."""
    local = member.get("local_rank")
    return (str(member.get("host")), local if isinstance(local, int) else -1,
            member.get("pid") or 0)


@judge(RANK_IDS)
def check_rank_ids(job: Gathered) -> CheckResult:
    claims: dict[int, list[dict[str, Any]]] = {}
    for m in sorted(job.members, key=_place):  # named in the same order whoever came first
        if member_rank(m) is not None:
            claims.setdefault(member_rank(m), []).append(m)
    dups = {r: ms for r, ms in claims.items() if len(ms) > 1}
    outside = [m for m in job.members if member_rank(m) is not None and member_rank(m) >= job.world_size]
    negative = [m for m in job.members if member_rank(m) is not None and member_rank(m) < 0]
    unknown = [m for m in job.members if member_rank(m) is None]
    top = job.world_size - 1
    if not (dups or outside or negative or unknown):
        return passed(RANK_IDS, f"global ranks are unique and within 0..{top}",
                      world_size=job.world_size)
    parts = [f"rank {r} is claimed by {len(ms)} processes ("
             + ", ".join(f"{m.get('host')} local rank {m.get('local_rank')}" for m in ms) + ")"
             for r, ms in sorted(dups.items())]
    if outside:
        parts.append(f"{members_where(outside)} outside 0..{top} (WORLD_SIZE={job.world_size} on rank 0)")
    if negative:
        parts.append(f"{members_where(negative)} negative")
    if unknown:
        parts.append(f"{len(unknown)} process(es) on {', '.join(sorted({str(m.get('host')) for m in unknown}))} "
                     "without an integer rank")
    fix = ("Give every process a distinct RANK in 0..WORLD_SIZE-1: RANK = NODE_RANK x "
           "processes per node + LOCAL_RANK (let torchrun or srun set it rather than "
           "exporting it by hand).")
    proposal = proposed_world_size(job)
    if outside and proposal is not None and proposal > job.world_size:
        fix = f"The launch runs {proposal} processes: the world size must be {proposal}. " + fix
    bad = [m for ms in dups.values() for m in ms] + outside + negative + unknown
    return failed(RANK_IDS, "global ranks are inconsistent: " + "; ".join(parts),
                  fix, Category.RANK_MISMATCH, where=members_where(bad),
                  duplicates={str(r): [m.get("host") for m in ms] for r, ms in dups.items()},
                  outside=[{"rank": member_rank(m), "host": m.get("host")} for m in outside],
                  outside_ranks=sorted(member_rank(m) for m in outside),
                  negative=[{"rank": member_rank(m), "host": m.get("host")} for m in negative],
                  proposed_world_size=proposal)


def proposed_world_size(job: Gathered) -> int | None:
    """The launch's own count when it states one, else the processes that joined."""
    if job.expect is not None and job.expect.launch is not None:
        return job.expect.launch
    return len(job.members) or None


@judge(WORLD_SIZE)
def check_world_size(job: Gathered) -> CheckResult:
    """WORLD_SIZE against the processes that joined and the count the launch states."""
    joined, hosts = len(job.members), len({m.get("host") for m in job.members})
    proposal = proposed_world_size(job)
    launch = job.expect.launch if job.expect else None
    declared_from = job.expect.declared_from if job.expect else "WORLD_SIZE"
    too_many = joined > job.world_size
    disagrees = launch is not None and launch != job.world_size
    details = {"world_size": job.world_size, "joined": joined, "hosts": hosts,
               "launch": launch, "launch_from": job.expect.launch_from if job.expect else "",
               "proposed_world_size": proposal}
    if not (too_many or disagrees) or proposal is None or proposal == job.world_size:
        return passed(WORLD_SIZE, f"{declared_from}={job.world_size} fits the launch "
                      f"({joined} process{'es' if joined != 1 else ''} joined)", **details)
    stated = f" ({job.expect.launch_from} = {launch})" if disagrees and job.expect else ""
    summary = (f"{joined} process{'es' if joined != 1 else ''} on {hosts} host"
               f"{'s' if hosts != 1 else ''} joined a job declared as {declared_from}="
               f"{job.world_size}{stated}: the world size must be {proposal}")
    return failed(WORLD_SIZE, summary, _world_fix(job, proposal),
                  Category.RANK_MISMATCH, **details)


def _world_fix(job: Gathered, proposal: int) -> str:
    """The ranks probe's fix for nodes x GPUs when the shape is known, else the plain one."""
    nodes = job.expect.nodes if job.expect else None
    per_node = job.expect.per_node if job.expect else None
    if nodes is None or per_node is None or nodes * per_node != proposal:
        hosts = Counter(m.get("host") for m in job.members)
        if len(set(hosts.values())) == 1 and len(hosts) * next(iter(hosts.values())) == proposal:
            nodes, per_node = len(hosts), next(iter(hosts.values()))
    if nodes is not None and per_node is not None and nodes * per_node == proposal:
        return fix_world(Expected(nodes, per_node, "--nodes", "--gpus-per-node"))
    return (f"Set WORLD_SIZE={proposal} on every process (or let the launcher set it); a custom "
            f"ClusterEnvironment's world_size() must return {proposal}.")
