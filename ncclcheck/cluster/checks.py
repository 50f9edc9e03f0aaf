"""The checks only the gather can see: who is missing, who is duplicated, what differs.

Input is what each process announced when it connected (``identity``), plus which of them
later delivered a report. Every function is pure, so the cases are tested directly as well as
through real processes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ncclcheck.model import Category, CheckResult, failed, passed, warned
from ncclcheck.registry import CheckSpec

from .ranges import by_host, ranks_phrase
from .membership import (Gathered, check_rank_ids, check_reported, check_world_size,
                         expected_host, processes)
from .membership import CHECKS as MEMBERSHIP_CHECKS

__all__ = ["Gathered", "cluster_checks", "expected_host", "processes", "CHECKS"]

VERSION_NAMES = {"python": "Python", "torch": "torch", "cuda": "CUDA (torch build)",
                 "nccl": "NCCL", "driver": "NVIDIA driver"}


def cluster_checks(job: Gathered) -> list[CheckResult]:
    return [check_reported(job), check_rank_ids(job), check_world_size(job),
            check_local_ranks(job), check_hosts(job), check_settings(job), check_versions(job)]


def _where(members: list[dict[str, Any]]) -> str:
    return by_host((m.get("host"), m.get("rank")) for m in members)


def check_local_ranks(job: Gathered) -> CheckResult:
    seen: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for m in job.members:
        if m.get("local_rank") is not None:
            seen.setdefault((m.get("host"), m["local_rank"]), []).append(m)
    clashes = {k: ms for k, ms in seen.items() if len(ms) > 1}
    if not clashes:
        return passed(LOCAL_RANKS, "every host's local ranks are distinct",
                      hosts=len({h for h, _ in seen}))
    text = "; ".join(f"{host}: LOCAL_RANK {lr} is used by {ranks_phrase(m.get('rank') for m in ms if isinstance(m.get('rank'), int))}"
                     for (host, lr), ms in sorted(clashes.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])))
    return failed(LOCAL_RANKS, f"two processes on one host share a LOCAL_RANK (and so a "
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
        return passed(HOSTS, shape, ranks_per_host=dict(counts))
    tally = Counter(counts.values())  # a tie goes to the larger count, whoever came first
    usual = max(tally, key=lambda n: (tally[n], n))
    odd = {h: n for h, n in counts.items() if n != usual}
    return failed(HOSTS,
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
        return warned(SETTINGS, "settings not compared: rank 0's identity is missing",
                      "Make sure exactly one process runs as RANK=0.", Category.RANK_MISMATCH)
    ref_settings = job.facts(ref).get("settings") or {}
    groups = job.by_variant()  # one comparison per distinct set of settings, not per rank
    names = sorted(set(ref_settings).union(*(set(f.get("settings") or {}) for f, _ in groups)))
    differences = []
    for name in names:
        want = ref_settings.get(name)
        odd: dict[Any, list[dict[str, Any]]] = {}
        for facts, ms in groups:
            value = (facts.get("settings") or {}).get(name)
            if value != want:
                odd.setdefault(value, []).extend(ms)
        for value, ms in odd.items():
            differences.append({"name": name, "reference": want, "value": value,
                                "where": _where(ms), "hosts": sorted({m.get("host") for m in ms}),
                                "ranks": sorted(m.get("rank") for m in ms if isinstance(m.get("rank"), int))})
    if not differences:
        return passed(SETTINGS, f"{len(names)} setting(s) (WORLD_SIZE, MASTER_*, NCCL_*, "
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
    sizes = {"WORLD_SIZE"} | {f.get("world_size_from") for f, _ in groups}
    category = (Category.RANK_MISMATCH if any(d["name"] in sizes for d in differences)
                else Category.CONFIGURATION)
    return failed(SETTINGS, f"settings differ between ranks: {text}",
                  "Set the same value on every node (in the job script, not per node): "
                  + ", ".join(fixes[:6]) + f" — or change rank 0 ({ref.get('host')}) if its "
                  "value is the wrong one.", category, differences=differences,
                  where="; ".join(dict.fromkeys(d["where"] for d in differences)))


def check_versions(job: Gathered) -> CheckResult:
    """Library versions compared between hosts; the odd host out is the one in the minority
    (ties: the hosts that differ from rank 0's)."""
    per_host: dict[str, dict[str, Any]] = {}
    for m in job.members:
        if (m.get("host") or "unknown host") not in per_host:
            per_host[m.get("host") or "unknown host"] = dict(job.facts(m).get("versions") or {})
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
        return passed(VERSIONS, f"same versions on {hosts}: "
                      + ", ".join(f"{VERSION_NAMES[k]} {v}" for k, v in sample.items() if v),
                      versions=sample)
    text = "; ".join(f"{m['title']} " + ", ".join(f"{v} on {h}" for h, v in sorted(m["odd"].items()))
                     + f" but {m['usual']} elsewhere" for m in mismatches)
    odd_hosts = sorted({h for m in mismatches for h in m["odd"]})
    return failed(VERSIONS, f"versions differ between nodes: {text}",
                  f"Install the same software on every node (one container image or environment): "
                  f"fix {', '.join(odd_hosts)} to match "
                  + ", ".join(f"{m['title']} {m['usual']}" for m in mismatches) + ".",
                  Category.VERSION_MISMATCH, mismatches=mismatches, odd_hosts=odd_hosts,
                  where=", ".join(odd_hosts))


# -- declarations: the job-wide checks above, for the registry (``ncclcheck checks``) ----------
LOCAL_RANKS = CheckSpec(
    "cluster.local_ranks", "local ranks are distinct on each host",
    (Category.RANK_MISMATCH,),
    fails_when="two processes on one host share a LOCAL_RANK (and so a GPU)")
HOSTS = CheckSpec(
    "cluster.hosts", "every host runs the same number of ranks",
    (Category.RANK_MISMATCH,),
    fails_when="hosts run different numbers of ranks (the odd hosts are named)")
SETTINGS = CheckSpec(
    "cluster.settings", "job settings are identical on every rank",
    (Category.RANK_MISMATCH, Category.CONFIGURATION),
    fails_when="WORLD_SIZE (or the launcher's own world-size variable; "
               "rank_mismatch), MASTER_*, NCCL_* or GLOO_* differ from rank 0's "
               "(configuration)",
    warns_when="rank 0's identity is missing, so nothing could be compared")
VERSIONS = CheckSpec(
    "cluster.versions", "library versions are the same on every node",
    (Category.VERSION_MISMATCH,),
    fails_when="Python, torch, torch's CUDA, NCCL (as each node's library reports "
               "it) or the NVIDIA driver differ between hosts; the odd host out is "
               "the one in the minority")


CHECKS: tuple[CheckSpec, ...] = MEMBERSHIP_CHECKS + (LOCAL_RANKS, HOSTS, SETTINGS, VERSIONS)
