"""Who joined the job: every process that contacted the store, accounted for exactly once.

A process is keyed by its store slot (an atomic counter, so two processes never share one)
and named by host, pid and a per-launch nonce, never by the rank it claims: the launches this
tool exists for are the ones where the claimed ranks are wrong. The facts here let the checks
name each way a rank can be wrong (duplicated, out of range, negative, missing, late) and the
world size the launch actually has (``ncclcheck.probes.cluster.membership`` judges them). Every function is
pure.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


from .expect import Expectation
from .ranges import by_host

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


def member_rank(member: dict[str, Any]) -> int | None:
    rank = member.get("rank")
    return rank if isinstance(rank, int) and not isinstance(rank, bool) else None


def members_where(members: list[dict[str, Any]]) -> str:
    return by_host((m.get("host"), member_rank(m)) for m in members)


def claims_where(members: list[dict[str, Any]]) -> str:
    """Hosts and ranks as each process announced them (its rank value taken as it is)."""
    return by_host((m.get("host"), m.get("rank")) for m in members)


def processes(job: Gathered, everyone: bool = True) -> list[dict[str, Any]]:
    """One entry per process that joined, with what is wrong with its rank (``problems``);
    only those with a problem unless ``everyone``."""
    claims = Counter(member_rank(m) for m in job.members)
    entries = []
    for m in job.members:
        rank, problems = member_rank(m), []
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
        if per_node and member_rank(m) is not None:
            by_block.setdefault(member_rank(m) // per_node, set()).add(m["host"])
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
