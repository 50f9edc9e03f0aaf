"""Who joined the job: every process that contacted the store, accounted for exactly once.

A process is keyed by its store slot (an atomic counter, so two processes never share one)
and named by host, pid and a per-launch nonce, never by the rank it claims: the launches this
tool exists for are the ones where the claimed ranks are wrong. The checks here name each way
a rank can be wrong (duplicated, out of range, negative, missing, late) and the world size the
launch actually has. Every function is pure.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ncclcheck.model import Category, CheckResult, failed, passed
from ncclcheck.probes.ranks_layout import Expected, fix_world
from ncclcheck.registry import CheckSpec

from .expect import Expectation
from .ranges import by_host, ranks_phrase

# What a process says about itself that is usually the same on every rank of a node (and of
# the job): sent once per distinct value (a "variant"), not once per rank.
VARIANT_KEYS = ("settings", "versions", "world_size_from")


def split_identity(identity: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what is this process's own, its variant: settings, versions, world-size source)."""
    own = {k: v for k, v in identity.items() if k not in VARIANT_KEYS}
    return own, {k: identity.get(k) for k in VARIANT_KEYS}


class Variants:
    """Distinct variants, each stored once, numbered as they first appear."""

    def __init__(self) -> None:
        self.values: list[dict[str, Any]] = []
        self._index: dict[str, int] = {}

    def number(self, variant: dict[str, Any]) -> int:
        # ncclcheck builds every variant in one key order, so its repr names it (a variant
        # written in another order would only be stored twice, never mistaken for another)
        text = repr(variant)
        found = self._index.get(text)
        if found is None:
            found = self._index[text] = len(self.values)
            self.values.append(variant)
        return found


@dataclass
class Gathered:
    """What rank 0 knows at the deadline.

    A member carries its settings, versions and world-size source either itself or as
    ``variant``, an index into ``variants`` (how rank 0 keeps 100k identities small).
    """

    world_size: int  # rank 0's view: WORLD_SIZE (or the launcher's own variable)
    members: list[dict[str, Any]]  # identities of every process that connected, one per slot
    reported_slots: set[int] = field(default_factory=set)
    local_world_size: int | None = None  # rank 0's, to place ranks that never connected
    # host -> the version each node's libnccl itself reported (the nccl.version check); more
    # exact than what a rank can tell when it joins (torch's view or the wheel's metadata)
    nccl_by_host: dict[str, str] = field(default_factory=dict)
    expect: Expectation | None = None  # what the launch says; None: WORLD_SIZE is all we know
    variants: list[dict[str, Any]] = field(default_factory=list)

    def facts(self, member: dict[str, Any]) -> dict[str, Any]:
        """A member's settings, versions and world-size source, wherever they are kept."""
        number = member.get("variant")
        return self.variants[number] if isinstance(number, int) else member

    def by_variant(self) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
        """Members grouped by identical settings, versions and world-size source, in the order
        of their first member."""
        groups: dict[Any, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
        for m in self.members:
            number = m.get("variant")
            key = (number if isinstance(number, int)
                   else json.dumps(split_identity(m)[1], sort_keys=True, default=str))
            groups.setdefault(key, (self.facts(m), []))[1].append(m)
        return list(groups.values())

    def reported(self) -> list[dict[str, Any]]:
        return [m for m in self.members if m.get("slot") in self.reported_slots]

    @property
    def reference(self) -> dict[str, Any] | None:
        return next((m for m in self.members if m.get("rank") == 0), None)

    @property
    def slots(self) -> int:
        """Ranks 0..slots-1 are expected to exist (the larger of WORLD_SIZE and the launch)."""
        return max(self.world_size, self.expect.slots if self.expect else 0)


def _rank(member: dict[str, Any]) -> int | None:
    rank = member.get("rank")
    return rank if isinstance(rank, int) and not isinstance(rank, bool) else None


def _where(members: list[dict[str, Any]]) -> str:
    return by_host((m.get("host"), _rank(m)) for m in members)


def processes(job: Gathered, everyone: bool = True) -> list[dict[str, Any]]:
    """One entry per process that joined, with what is wrong with its rank (``problems``);
    only those with a problem unless ``everyone``."""
    claims = Counter(_rank(m) for m in job.members)
    entries = []
    for m in job.members:
        rank, problems = _rank(m), []
        if rank is None:
            problems.append("no_rank")
        elif rank < 0:
            problems.append("negative")
        elif rank >= job.world_size:
            problems.append("outside")
        if rank is not None and claims[rank] > 1:
            problems.append("duplicate")
        if m.get("slot") not in job.reported_slots:
            problems.append("not_reported")
        if not problems and not everyone:
            continue
        entries.append({"slot": m.get("slot"), "member": m.get("member"), "rank": rank,
                        "host": m.get("host"), "pid": m.get("pid"),
                        "local_rank": m.get("local_rank"),
                        "reported": m.get("slot") in job.reported_slots, "problems": problems})
    return sorted(entries, key=lambda e: (e["rank"] if e["rank"] is not None else 1 << 40,
                                          str(e["host"]), e["pid"] or 0, e["slot"] or 0))


# -- missing and late ranks ------------------------------------------------------------------
def node_hosts(job: Gathered) -> tuple[dict[Any, set[str]], dict[int, set[str]]]:
    """The hosts of each node rank, and of each block of ``local_world_size`` ranks."""
    by_node: dict[Any, set[str]] = {}
    by_block: dict[int, set[str]] = {}
    per_node = job.local_world_size
    for m in job.members:
        if not m.get("host"):
            continue
        by_node.setdefault(m.get("node_rank"), set()).add(m["host"])
        if per_node and _rank(m) is not None:
            by_block.setdefault(_rank(m) // per_node, set()).add(m["host"])
    return by_node, by_block


def expected_host(job: Gathered, rank: int,
                  hosts_of: tuple[dict[Any, set[str]], dict[int, set[str]]] | None = None) -> str:
    """Where a rank that never connected should have run, as far as anyone can tell
    (``hosts_of``: ``node_hosts(job)``, when asked for many ranks)."""
    per_node = job.local_world_size
    if not per_node:  # the launcher gave no per-node count: no honest guess
        return "host unknown"
    node = rank // per_node
    by_node, by_block = hosts_of if hosts_of is not None else node_hosts(job)
    # no node rank known: a neighbour in the same block of ranks
    hosts = sorted(by_node.get(node) or by_block.get(node) or ())
    if hosts:
        return f"expected on {', '.join(hosts)} (node {node})"
    return f"expected on node {node}, from which no rank connected"


def check_reported(job: Gathered) -> CheckResult:
    """Every process that connected reported, and every rank 0..slots-1 was claimed."""
    reported = {_rank(m) for m in job.reported()}
    claimed = {_rank(m) for m in job.members}
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
        parts.append(f"{_where(silent)} connected, then stopped before reporting (killed or "
                     "crashed, or still probing at rank 0's deadline)")
        entries += [{"rank": _rank(m), "host": m.get("host"), "connected": True,
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
    where = "; ".join(w for w in (_where(silent) if silent else "",
                                  f"{ranks_phrase(absent)} (never connected)" if absent else "") if w)
    fix = ("Look at the launcher's log on the named hosts for why the rank did not finish "
           "(exit code, OOM killer, signal); a rank that cannot reach the store prints its own "
           "report with the reason. If nodes start late, raise --timeout.")
    count = len(silent) + len(absent)
    return failed(REPORTED,
                  f"{count} rank{'s' if count != 1 else ''} never reported: " + "; ".join(parts),
                  fix, category, world_size=job.world_size, missing=entries,
                  missing_ranks=missing, where=where)


# -- duplicated / out-of-range / negative ranks --------------------------------------------------
def _place(member: dict[str, Any]) -> tuple[str, int, int]:
    """Where a process runs (host, local rank, pid): an order that does not depend on which
    process reached the store first."""
    local = member.get("local_rank")
    return (str(member.get("host")), local if isinstance(local, int) else -1,
            member.get("pid") or 0)


def check_rank_ids(job: Gathered) -> CheckResult:
    claims: dict[int, list[dict[str, Any]]] = {}
    for m in sorted(job.members, key=_place):  # named in the same order whoever came first
        if _rank(m) is not None:
            claims.setdefault(_rank(m), []).append(m)
    dups = {r: ms for r, ms in claims.items() if len(ms) > 1}
    outside = [m for m in job.members if _rank(m) is not None and _rank(m) >= job.world_size]
    negative = [m for m in job.members if _rank(m) is not None and _rank(m) < 0]
    unknown = [m for m in job.members if _rank(m) is None]
    top = job.world_size - 1
    if not (dups or outside or negative or unknown):
        return passed(RANK_IDS, f"global ranks are unique and within 0..{top}",
                      world_size=job.world_size)
    parts = [f"rank {r} is claimed by {len(ms)} processes ("
             + ", ".join(f"{m.get('host')} local rank {m.get('local_rank')}" for m in ms) + ")"
             for r, ms in sorted(dups.items())]
    if outside:
        parts.append(f"{_where(outside)} outside 0..{top} (WORLD_SIZE={job.world_size} on rank 0)")
    if negative:
        parts.append(f"{_where(negative)} negative")
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
                  fix, Category.RANK_MISMATCH, where=_where(bad),
                  duplicates={str(r): [m.get("host") for m in ms] for r, ms in dups.items()},
                  outside=[{"rank": _rank(m), "host": m.get("host")} for m in outside],
                  outside_ranks=sorted(_rank(m) for m in outside),
                  negative=[{"rank": _rank(m), "host": m.get("host")} for m in negative],
                  proposed_world_size=proposal)


# -- the world size the launch has -----------------------------------------------------------
def proposed_world_size(job: Gathered) -> int | None:
    """The launch's own count when it states one, else the processes that joined."""
    if job.expect is not None and job.expect.launch is not None:
        return job.expect.launch
    return len(job.members) or None


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


# -- declarations: the checks above, for the registry (``ncclcheck checks``) -------------------
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
        "(context.cluster.processes).")
RANK_IDS = CheckSpec(
    "cluster.rank_ids", "global ranks are unique and in range",
    (Category.RANK_MISMATCH,),
    fails_when="two processes claim one RANK, a RANK is outside 0..WORLD_SIZE-1 "
               "(WORLD_SIZE as rank 0 sees it) or negative, or a process has no "
               "integer rank")
WORLD_SIZE = CheckSpec(
    "cluster.world_size", "WORLD_SIZE matches the processes the launch started",
    (Category.RANK_MISMATCH,),
    fails_when="more processes joined than WORLD_SIZE says, or the launch's own "
               "count (nodes x LOCAL_WORLD_SIZE, SLURM_NTASKS, "
               "OMPI_COMM_WORLD_SIZE, --nodes x --gpus-per-node) differs from it; "
               "the fix names the world size the launch needs",
    doc="Rank 0 waits for as many processes as the launch says exist, even when "
        "WORLD_SIZE is smaller, so the ranks beyond it are named rather than lost.")


CHECKS: tuple[CheckSpec, ...] = (REPORTED, RANK_IDS, WORLD_SIZE)
