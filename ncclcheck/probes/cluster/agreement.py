"""What must be the same on every rank and node: the job's settings (WORLD_SIZE, MASTER_*,
NCCL_*, GLOO_*) and the library versions."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ncclcheck.cluster.membership import Gathered, claims_where
from ncclcheck.model import Category, CheckResult, failed, passed, warned
from ncclcheck.probes.spec import CheckSpec, judge

VERSION_NAMES = {"python": "Python", "torch": "torch", "cuda": "CUDA (torch build)",
                 "nccl": "NCCL", "driver": "NVIDIA driver"}


SETTINGS = CheckSpec(
    "cluster.settings", "job settings are identical on every rank",
    (Category.RANK_MISMATCH, Category.CONFIGURATION),
    fails_when="WORLD_SIZE (or the launcher's own world-size variable; "
               "rank_mismatch), MASTER_*, NCCL_* or GLOO_* differ from rank 0's "
               "(configuration)",
    warns_when="rank 0's identity is missing, so nothing could be compared",
    order=60)


VERSIONS = CheckSpec(
    "cluster.versions", "library versions are the same on every node",
    (Category.VERSION_MISMATCH,),
    fails_when="Python, torch, torch's CUDA, NCCL (as each node's library reports "
               "it) or the NVIDIA driver differ between hosts; the odd host out is "
               "the one in the minority",
    order=70)


@judge(SETTINGS)
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
                                "where": claims_where(ms), "hosts": sorted({m.get("host") for m in ms}),
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


@judge(VERSIONS)
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
