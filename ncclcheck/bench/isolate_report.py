"""``bench --isolate``'s verdict as the check ``bench.isolate``, with host names, and the
per-node summary that goes into the report's ``bench.isolate`` (the table prints it).

Pure: it reads an ``Isolation`` (isolate.py) and the host of each node index.
"""

from __future__ import annotations

import statistics
from typing import Any

from ncclcheck.model import Category, CheckResult, failed, passed, skipped, warned
from ncclcheck.registry import CheckSpec

from .isolate import Isolation, PairTest, Verdict
from .metrics import significant
from .sizes import format_size


def _names(nodes: list[int], hosts: list[str]) -> list[str]:
    return [hosts[i] for i in nodes]


def _pairs(tests: list[PairTest], verdict: Verdict, hosts: list[str]) -> list[dict[str, Any]]:
    return [{"a": hosts[t.a], "b": hosts[t.b], "busbw_gbps": significant(t.busbw_gbps),
             "round": t.round + 1, "slow": verdict.is_slow(t),
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
        "slow_nodes": _names(verdict.slow_nodes, hosts),
        "slow_links": [[hosts[a], hosts[b]] for a, b in verdict.slow_links],
        "suspects": _names(verdict.suspects, hosts),
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
    keep = ("mode", "bytes", "slow_nodes", "slow_links", "suspects", "rounds",
            "median_busbw_gbps", "threshold", "slow_below_gbps")
    return {**{k: details[k] for k in keep}, "pairs": len(iso.tests),
            "per_node": node_lines(iso, verdict, hosts)}


def _why_slow(iso: Isolation, verdict: Verdict, node: int, hosts: list[str]) -> str:
    tests = [t for t in iso.tests if node in (t.a, t.b)]
    worst = max(t.busbw_gbps for t in tests)
    return (f"{hosts[node]} (at most {worst:.3g} GB/s in all its {len(tests)} pairs, "
            f"{verdict.evidence.get(node, 0)} with nodes fast elsewhere)")


def isolate_check(iso: Isolation, hosts: list[str], nbytes: int) -> CheckResult:
    """Pass when nothing is slow; fail naming the slow nodes and links (category degraded);
    warn when suspects could not be confirmed."""
    verdict = iso.judged()
    details = isolate_details(iso, hosts, nbytes)
    tested = (f"{len(iso.tests)} pair tests of {format_size(nbytes)} in {len(iso.rounds)} "
              f"rounds over {iso.n} nodes; median pair {verdict.median_gbps:.3g} GB/s busbw")
    floor = (f"{iso.threshold:g} x the median" + (f" or --min-busbw {iso.min_busbw:g} GB/s"
                                                  if iso.min_busbw is not None else ""))
    if verdict.slow_nodes or verdict.slow_links:
        parts = []
        if verdict.slow_nodes:
            word = "node" if len(verdict.slow_nodes) == 1 else "nodes"
            parts.append(f"slow {word} " + ", ".join(_why_slow(iso, verdict, n, hosts)
                                                      for n in verdict.slow_nodes))
        if verdict.slow_links:
            word = "link" if len(verdict.slow_links) == 1 else "links"
            parts.append(f"slow {word} " + ", ".join(f"{hosts[a]}-{hosts[b]}"
                                                      for a, b in verdict.slow_links)
                         + " (slow twice while both nodes were fast with others)")
        fix = ("Take the named node(s) out of the job (--on-fail drain under Slurm) and check "
               "them: NIC link speed and errors (ethtool, ibstat / ibv_devinfo rate), the GPU's "
               "PCIe link (nvidia-smi -q: Link Width / Generation), cables and transceivers. "
               "For a slow link, check the switch ports and cables on the path between its two "
               "nodes.")
        return failed(ISOLATE, "; ".join(parts) + f", below {floor} ({tested})", fix,
                      Category.DEGRADED, **details)
    if verdict.suspects:
        return warned(ISOLATE,
                      f"suspected but not confirmed: {', '.join(_names(verdict.suspects, hosts))}"
                      f" ({iso.stopped or 'no confirmation possible'}; {tested})",
                      "Raise --timeout so the confirmation rounds can run, or rerun with "
                      "--isolate links; with every pair slow, compare against --min-busbw.",
                      Category.DEGRADED, **details)
    return passed(ISOLATE, f"no slow node or link: every pair above {floor} ({tested})",
                  **details)


def not_isolated(reason: str, **details: Any) -> CheckResult:
    """The row when the pair tests could not run (one node, the sweep failed)."""
    return skipped(ISOLATE, f"pair tests not run: {reason}", **details)


ISOLATE = CheckSpec(
    "bench.isolate", "no node or link far below its peers in pair tests (--isolate)",
    (Category.DEGRADED,),
    fails_when="a node was slow with every partner, known-good ones included, or a link "
               "was slow twice while both its nodes were fast with others (named by host "
               "in details.slow_nodes and details.slow_links)",
    warns_when="a suspect could not be confirmed: --timeout ran out, or no node was "
               "fast enough to confirm against",
    doc="Slow means below --isolate-threshold (default 0.7) of the median pair's busbw, or "
        "below --min-busbw. Reported by `bench --isolate nodes|links` after the sweep; "
        "skipped on one node or when the sweep failed.")

CHECKS: tuple[CheckSpec, ...] = (ISOLATE,)
