"""``bench --isolate``'s outcome with host names: the details of the check ``bench.isolate``
(``ncclcheck.probes.bench.isolate`` judges it) and the per-node summary that goes into the
report's ``bench.isolate`` (the table prints it).

Pure: it reads an ``Isolation`` (isolate.py) and the host of each node index.
"""

from __future__ import annotations

import statistics
from typing import Any

from .isolate import Isolation, PairTest, Verdict
from .metrics import significant


def host_names(nodes: list[int], hosts: list[str]) -> list[str]:
    return [hosts[i] for i in nodes]


def _pairs(tests: list[PairTest], verdict: Verdict, hosts: list[str]) -> list[dict[str, Any]]:
    """Every pair test; ``bytes`` and ``iters`` say what a pair cut down to fit its share of
    the deadline measured (``reduced``), ``error`` what stopped a pair that could not finish."""
    return [{"a": hosts[t.a], "b": hosts[t.b], "busbw_gbps": significant(t.busbw_gbps),
             "round": t.round + 1, "slow": verdict.is_slow(t),
             **({"bytes": t.nbytes, "iters": t.iters, "reduced": True} if t.reduced else {}),
             **({"error": t.error} if t.error else {})} for t in tests]


def node_lines(iso: Isolation, verdict: Verdict, hosts: list[str]) -> list[dict[str, Any]]:
    """One entry per node: its pairs, how many were slow, its median and worst pair busbw."""
    mine: dict[int, list[PairTest]] = {i: [] for i in range(iso.n)}
    for test in iso.tests:
        mine[test.a].append(test)
        mine[test.b].append(test)
    lines = []
    for node, tests in mine.items():
        values = [t.busbw_gbps for t in tests]
        lines.append({"host": hosts[node], "pairs": len(tests),
                      "slow_pairs": sum(1 for t in tests if verdict.is_slow(t)),
                      "median_busbw_gbps": significant(statistics.median(values)) if values else None,
                      "min_busbw_gbps": significant(min(values)) if values else None,
                      "partners": [hosts[t.other(node)] for t in tests]})
    return lines


def isolate_details(iso: Isolation, hosts: list[str], nbytes: int) -> dict[str, Any]:
    """The check's ``details`` (docs/bench.md): what was named, and every pair measured."""
    verdict = iso.judged()
    details: dict[str, Any] = {
        "mode": iso.mode, "nodes": iso.n, "bytes": nbytes,
        "slow_nodes": host_names(verdict.slow_nodes, hosts),
        "slow_links": [[hosts[a], hosts[b]] for a, b in verdict.slow_links],
        "suspects": host_names(verdict.suspects, hosts),
        "suspect_links": [[hosts[a], hosts[b]] for a, b in verdict.suspect_links],
        "unfinished": [[hosts[t.a], hosts[t.b]] for t in iso.tests if t.failed],
        "reduced": sum(1 for t in iso.tests if t.reduced),
        "rounds": len(iso.rounds),
        "round_log": [{"round": i + 1, "kind": r.kind, "pairs": len(r.pairs),
                       "seconds": round(s, 3)}
                      for i, (r, s) in enumerate(zip(iso.rounds, iso.round_seconds))],
        "pairs": _pairs(iso.tests, verdict, hosts),
        "median_busbw_gbps": significant(verdict.median_gbps),
        "threshold": iso.threshold,
        "slow_below_gbps": significant(verdict.cut_gbps),
    }
    if iso.min_busbw is not None:
        details["min_busbw_gbps"] = iso.min_busbw
    if iso.stopped:
        details["stopped"] = iso.stopped
    return details


def section(iso: Isolation, hosts: list[str], nbytes: int) -> dict[str, Any]:
    """The report's ``bench.isolate``: the verdict and one compact line per node."""
    verdict = iso.judged()
    details = isolate_details(iso, hosts, nbytes)
    keep = ("mode", "bytes", "slow_nodes", "slow_links", "suspects", "suspect_links", "rounds",
            "median_busbw_gbps", "threshold", "slow_below_gbps")
    return {**{k: details[k] for k in keep}, "pairs": len(iso.tests),
            "per_node": node_lines(iso, verdict, hosts)}
