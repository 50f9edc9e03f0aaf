"""What the gather sees of each host: local ranks distinct on each, and the same number of
ranks on every host."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ncclcheck.cluster.membership import Gathered, claims_where
from ncclcheck.cluster.ranges import ranks_phrase
from ncclcheck.model import Category, CheckResult, failed, passed
from ncclcheck.probes.spec import CheckSpec, judge


LOCAL_RANKS = CheckSpec(
    "cluster.local_ranks", "local ranks are distinct on each host",
    (Category.RANK_MISMATCH,),
    fails_when="two processes on one host share a LOCAL_RANK (and so a GPU)",
    order=40)


HOSTS = CheckSpec(
    "cluster.hosts", "every host runs the same number of ranks",
    (Category.RANK_MISMATCH,),
    fails_when="hosts run different numbers of ranks (the odd hosts are named)",
    order=50)


@judge(LOCAL_RANKS)
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
                  where=claims_where([m for ms in clashes.values() for m in ms]),
                  clashes=[{"host": h, "local_rank": lr, "ranks": [m.get("rank") for m in ms]}
                           for (h, lr), ms in clashes.items()])


@judge(HOSTS)
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
