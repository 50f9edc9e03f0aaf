"""The checks only the gather can see: who is missing, who is duplicated, what differs.

Input is what each process announced when it connected (``identity``), plus which of them
later delivered a report. Every function is pure, so the cases are tested directly as well as
through real processes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ncclcheck.model import Category, CheckResult, failed, passed, warned

from .aggregate import by_host, ranks_phrase

VERSION_NAMES = {"python": "Python", "torch": "torch", "cuda": "CUDA (torch build)",
                 "nccl": "NCCL", "driver": "NVIDIA driver"}


@dataclass
class Gathered:
    """What rank 0 knows at the deadline."""

    world_size: int  # rank 0's view: the ranks it expects
    members: list[dict[str, Any]]  # identities of every process that connected
    reported_slots: set[int] = field(default_factory=set)
    local_world_size: int | None = None  # rank 0's, to place ranks that never connected
    # host -> the version each node's libnccl itself reported (the nccl.version check); more
    # exact than what a rank can tell when it joins (torch's view or the wheel's metadata)
    nccl_by_host: dict[str, str] = field(default_factory=dict)

    def reported(self) -> list[dict[str, Any]]:
        return [m for m in self.members if m.get("slot") in self.reported_slots]

    @property
    def reference(self) -> dict[str, Any] | None:
        return next((m for m in self.members if m.get("rank") == 0), None)


def cluster_checks(job: Gathered) -> list[CheckResult]:
    return [check_reported(job), check_rank_ids(job), check_local_ranks(job),
            check_hosts(job), check_settings(job), check_versions(job)]


def _where(members: list[dict[str, Any]]) -> str:
    return by_host((m.get("host"), m.get("rank")) for m in members)


# -- missing ranks ---------------------------------------------------------------------------
def expected_host(job: Gathered, rank: int) -> str:
    """Where a rank that never connected should have run, as far as anyone can tell."""
    per_node = job.local_world_size
    if not per_node:  # the launcher gave no per-node count: no honest guess
        return "host unknown"
    node = rank // per_node
    hosts = sorted({m["host"] for m in job.members if m.get("node_rank") == node and m.get("host")})
    if not hosts:  # no node rank known: a neighbour in the same block of ranks
        hosts = sorted({m["host"] for m in job.members if isinstance(m.get("rank"), int)
                        and m["rank"] // per_node == node and m.get("host")})
    if hosts:
        return f"expected on {', '.join(hosts)} (node {node})"
    return f"expected on node {node}, from which no rank connected"


def check_reported(job: Gathered) -> CheckResult:
    reported = {m.get("rank") for m in job.reported()}
    connected = {m.get("rank"): m for m in job.members}
    missing = [r for r in range(job.world_size) if r not in reported]
    total = len(job.members)
    if not missing:
        hosts = len({m.get("host") for m in job.members})
        return passed("cluster.reported", f"all {job.world_size} ranks reported to rank 0 "
                      f"({total} process{'es' if total != 1 else ''} on {hosts} "
                      f"host{'s' if hosts != 1 else ''})", world_size=job.world_size,
                      reported=len(job.reported()))
    silent = [connected[r] for r in missing if r in connected]
    absent = [r for r in missing if r not in connected]
    parts, entries = [], []
    if silent:
        parts.append(f"{_where(silent)} connected, then stopped before reporting (killed or crashed)")
        entries += [{"rank": m["rank"], "host": m.get("host"), "connected": True,
                     "pid": m.get("pid")} for m in silent]
    if absent:
        places: dict[str, list[int]] = {}
        for r in absent:
            places.setdefault(expected_host(job, r), []).append(r)
        parts.append("; ".join(f"{ranks_phrase(rs)} never connected ({place})"
                               for place, rs in places.items()))
        entries += [{"rank": r, "host": None, "connected": False, "expected": expected_host(job, r)}
                    for r in absent]
    category = Category.RANK_CRASHED if silent else Category.TIMEOUT
    where = "; ".join(w for w in (_where(silent) if silent else "",
                                  f"{ranks_phrase(absent)} (never connected)" if absent else "") if w)
    fix = ("Look at the launcher's log on the named hosts for why the rank did not finish "
           "(exit code, OOM killer, signal); a rank that cannot reach the store prints its own "
           "one-line reason on stderr. If nodes start late, raise --timeout.")
    return failed("cluster.reported",
                  f"{len(missing)} of {job.world_size} ranks never reported: " + "; ".join(parts),
                  fix, category, world_size=job.world_size, missing=entries,
                  missing_ranks=missing, where=where)


# -- duplicated / out-of-range ranks -----------------------------------------------------------
def check_rank_ids(job: Gathered) -> CheckResult:
    claims: dict[Any, list[dict[str, Any]]] = {}
    for m in job.members:
        claims.setdefault(m.get("rank"), []).append(m)
    dups = {r: ms for r, ms in claims.items() if isinstance(r, int) and len(ms) > 1}
    outside = [m for m in job.members if not isinstance(m.get("rank"), int)
               or not 0 <= m["rank"] < job.world_size]
    if not dups and not outside:
        return passed("cluster.rank_ids", f"global ranks are unique and within 0..{job.world_size - 1}",
                      world_size=job.world_size)
    parts = [f"rank {r} is claimed by {len(ms)} processes ("
             + ", ".join(f"{m.get('host')} local rank {m.get('local_rank')}" for m in ms) + ")"
             for r, ms in sorted(dups.items())]
    if outside:
        parts.append(f"{_where(outside)} outside 0..{job.world_size - 1} (WORLD_SIZE="
                     f"{job.world_size} on rank 0)")
    return failed("cluster.rank_ids", "global ranks are inconsistent: " + "; ".join(parts),
                  "Give every process a distinct RANK in 0..WORLD_SIZE-1: RANK = NODE_RANK x "
                  "processes per node + LOCAL_RANK (let torchrun or srun set it rather than "
                  "exporting it by hand).", Category.RANK_MISMATCH,
                  where=_where([m for ms in dups.values() for m in ms] + outside),
                  duplicates={str(r): [m.get("host") for m in ms] for r, ms in dups.items()},
                  outside=[{"rank": m.get("rank"), "host": m.get("host")} for m in outside])


def check_local_ranks(job: Gathered) -> CheckResult:
    seen: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for m in job.members:
        if m.get("local_rank") is not None:
            seen.setdefault((m.get("host"), m["local_rank"]), []).append(m)
    clashes = {k: ms for k, ms in seen.items() if len(ms) > 1}
    if not clashes:
        return passed("cluster.local_ranks", "every host's local ranks are distinct",
                      hosts=len({h for h, _ in seen}))
    text = "; ".join(f"{host}: LOCAL_RANK {lr} is used by {ranks_phrase(m.get('rank') for m in ms if isinstance(m.get('rank'), int))}"
                     for (host, lr), ms in sorted(clashes.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])))
    return failed("cluster.local_ranks", f"two processes on one host share a LOCAL_RANK (and so a "
                  f"GPU): {text}",
                  "Give each process on a node its own LOCAL_RANK 0..processes per node-1 (torchrun "
                  "--nproc-per-node, srun --ntasks-per-node set it); never export LOCAL_RANK in "
                  "a script shared by all processes.", Category.RANK_MISMATCH,
                  where=_where([m for ms in clashes.values() for m in ms]),
                  clashes=[{"host": h, "local_rank": lr, "ranks": [m.get("rank") for m in ms]}
                           for (h, lr), ms in clashes.items()])


def check_hosts(job: Gathered) -> CheckResult:
    counts: dict[str, int] = Counter(m.get("host") or "unknown host" for m in job.members)
    layout = ", ".join(f"{h}: {n}" for h, n in sorted(counts.items()))
    if len(set(counts.values())) <= 1:
        n = next(iter(counts.values()), 0)
        shape = (f"{len(counts)} hosts, {n} rank{'s' if n != 1 else ''} each" if len(counts) > 1
                 else f"1 host with {n} rank{'s' if n != 1 else ''}")
        return passed("cluster.hosts", shape, ranks_per_host=dict(counts))
    usual = Counter(counts.values()).most_common(1)[0][0]
    odd = {h: n for h, n in counts.items() if n != usual}
    return failed("cluster.hosts",
                  "hosts run different numbers of ranks: " + ", ".join(
                      f"{h} runs {n}" for h, n in sorted(odd.items())) + f", the others {usual}",
                  f"Start the same number of processes on every node ({usual}: torchrun "
                  f"--nproc-per-node {usual}, srun --ntasks-per-node={usual}, "
                  f"Trainer(devices={usual})).", Category.RANK_MISMATCH,
                  ranks_per_host=dict(counts), layout=layout, where=", ".join(sorted(odd)))


# -- settings and versions ---------------------------------------------------------------------
def check_settings(job: Gathered) -> CheckResult:
    """WORLD_SIZE (and the launcher's own world-size variable), MASTER_*, NCCL_* and GLOO_*
    must read the same on every rank (rank 0 is the reference: the job report is its view)."""
    ref = job.reference
    if ref is None:
        return warned("cluster.settings", "settings not compared: rank 0's identity is missing",
                      "Make sure exactly one process runs as RANK=0.", Category.RANK_MISMATCH)
    ref_settings = ref.get("settings") or {}
    names = sorted(set(ref_settings).union(*(set(m.get("settings") or {}) for m in job.members)))
    differences = []
    for name in names:
        want = ref_settings.get(name)
        odd: dict[Any, list[dict[str, Any]]] = {}
        for m in job.members:
            value = (m.get("settings") or {}).get(name)
            if value != want:
                odd.setdefault(value, []).append(m)
        for value, ms in odd.items():
            differences.append({"name": name, "reference": want, "value": value,
                                "where": _where(ms), "hosts": sorted({m.get("host") for m in ms}),
                                "ranks": sorted(m.get("rank") for m in ms if isinstance(m.get("rank"), int))})
    if not differences:
        return passed("cluster.settings", f"{len(names)} setting(s) (WORLD_SIZE, MASTER_*, NCCL_*, "
                      "GLOO_*) identical on every rank", compared=names)
    def show(v: Any) -> str:
        return "unset" if v is None else repr(v)
    text = "; ".join(f"{d['name']}={show(d['value'])} on {d['where']} but {show(d['reference'])} "
                     f"on rank 0 ({ref.get('host')})" for d in differences[:6])
    fixes = []
    for d in differences:
        action = f"unset {d['name']}" if d["reference"] is None else f"{d['name']}={d['reference']}"
        if action not in fixes:
            fixes.append(action)
    sizes = {"WORLD_SIZE"} | {m.get("world_size_from") for m in job.members}
    category = (Category.RANK_MISMATCH if any(d["name"] in sizes for d in differences)
                else Category.CONFIGURATION)
    return failed("cluster.settings", f"settings differ between ranks: {text}",
                  "Set the same value on every node (in the job script, not per node): "
                  + ", ".join(fixes[:6]) + f" — or change rank 0 ({ref.get('host')}) if its "
                  "value is the wrong one.", category, differences=differences,
                  where="; ".join(dict.fromkeys(d["where"] for d in differences)))


def check_versions(job: Gathered) -> CheckResult:
    """Library versions compared between hosts; the odd host out is the one in the minority
    (ties: the hosts that differ from rank 0's)."""
    per_host: dict[str, dict[str, Any]] = {}
    for m in job.members:
        per_host.setdefault(m.get("host") or "unknown host", dict(m.get("versions") or {}))
    for host, version in job.nccl_by_host.items():
        per_host.setdefault(host, {})["nccl"] = version
    ref_host = (job.reference or {}).get("host")
    mismatches = []
    for name, title in VERSION_NAMES.items():
        values = {h: v.get(name) for h, v in per_host.items()}
        if len(set(values.values())) <= 1:
            continue
        tally = Counter(values.values())
        top = max(tally.values())
        leaders = [v for v, n in tally.items() if n == top]
        usual = values.get(ref_host) if ref_host in values and values[ref_host] in leaders else leaders[0]
        odd = {h: v for h, v in values.items() if v != usual}
        mismatches.append({"name": name, "title": title, "usual": usual, "odd": odd})
    if not mismatches:
        sample = next(iter(per_host.values()), {})
        hosts = f"all {len(per_host)} hosts" if len(per_host) > 1 else "the one host"
        return passed("cluster.versions", f"same versions on {hosts}: "
                      + ", ".join(f"{VERSION_NAMES[k]} {v}" for k, v in sample.items() if v),
                      versions=sample)
    text = "; ".join(f"{m['title']} " + ", ".join(f"{v} on {h}" for h, v in sorted(m["odd"].items()))
                     + f" but {m['usual']} elsewhere" for m in mismatches)
    odd_hosts = sorted({h for m in mismatches for h in m["odd"]})
    return failed("cluster.versions", f"versions differ between nodes: {text}",
                  f"Install the same software on every node (one container image or environment): "
                  f"fix {', '.join(odd_hosts)} to match "
                  + ", ".join(f"{m['title']} {m['usual']}" for m in mismatches) + ".",
                  Category.VERSION_MISMATCH, mismatches=mismatches, odd_hosts=odd_hosts,
                  where=", ".join(odd_hosts))


# -- declarations: the job-wide checks above, for the registry (``ncclcheck checks``) ----------
def _declarations():
    from ncclcheck.registry import CheckSpec

    return (
        CheckSpec("cluster.reported", "every rank delivered its report to rank 0",
                  (Category.RANK_CRASHED, Category.TIMEOUT),
                  fails_when="a rank never reported: connected and then stopped (rank_crashed), "
                             "or never connected (timeout); each is named with its host or the "
                             "node it was expected on",
                  doc="Cluster mode only, as every cluster.* check: rank 0 gathers every rank's "
                      "report within --timeout."),
        CheckSpec("cluster.rank_ids", "global ranks are unique and in range",
                  (Category.RANK_MISMATCH,),
                  fails_when="two processes claim one RANK, or a RANK is outside "
                             "0..WORLD_SIZE-1 (WORLD_SIZE as rank 0 sees it)"),
        CheckSpec("cluster.local_ranks", "local ranks are distinct on each host",
                  (Category.RANK_MISMATCH,),
                  fails_when="two processes on one host share a LOCAL_RANK (and so a GPU)"),
        CheckSpec("cluster.hosts", "every host runs the same number of ranks",
                  (Category.RANK_MISMATCH,),
                  fails_when="hosts run different numbers of ranks (the odd hosts are named)"),
        CheckSpec("cluster.settings", "job settings are identical on every rank",
                  (Category.RANK_MISMATCH, Category.CONFIGURATION),
                  fails_when="WORLD_SIZE (or the launcher's own world-size variable; "
                             "rank_mismatch), MASTER_*, NCCL_* or GLOO_* differ from rank 0's "
                             "(configuration)",
                  warns_when="rank 0's identity is missing, so nothing could be compared"),
        CheckSpec("cluster.versions", "library versions are the same on every node",
                  (Category.VERSION_MISMATCH,),
                  fails_when="Python, torch, torch's CUDA, NCCL (as each node's library reports "
                             "it) or the NVIDIA driver differ between hosts; the odd host out is "
                             "the one in the minority"),
    )


CHECKS = _declarations()
