"""bench.isolate: after the sweep, pair tests name a node or a link far below its peers
(``bench --isolate nodes|links``)."""

from __future__ import annotations

from typing import Any

from ncclcheck.bench.isolate import Isolation, Verdict
from ncclcheck.bench.isolate_report import host_names, isolate_details
from ncclcheck.bench.sizes import format_size
from ncclcheck.context import longer_timeout
from ncclcheck.model import Category, CheckResult, errored, failed, passed, skipped, warned
from ncclcheck.probes.bench.measure import BenchFacts
from ncclcheck.probes.spec import CheckSpec, judge


ISOLATE = CheckSpec(
    "bench.isolate", "no node or link far below its peers in pair tests (--isolate)",
    (Category.DEGRADED, Category.TIMEOUT),
    fails_when="a node was slow with every partner, known-good ones included, or a link "
               "was slow twice while both its nodes were fast with others, or a pair could "
               "not finish within its share of --timeout (the slowest result there is: its "
               "link is named, or its node when all its pairs failed); named by host in "
               "details.slow_nodes and details.slow_links",
    warns_when="a suspect node or link could not be confirmed: --timeout ran out, or no "
               "node was fast enough to confirm against",
    doc="An error (category timeout) when not one pair test finished: nothing was measured, "
        "and the fix names a longer --timeout. "
        "Slow means below --isolate-threshold (default 0.7) of the median pair's busbw, or "
        "below --min-busbw. Each round gets a share of the time left and each pair measures "
        "what goes through within it (a smaller message or fewer iterations when it is "
        "slow, reported in details.pairs). Reported by `bench --isolate nodes|links` after "
        "the sweep; skipped on one node or when the sweep failed.",
    order=40)


@judge(ISOLATE)
def judge_isolate(facts: BenchFacts) -> CheckResult | None:
    """Only with --isolate: the pair tests' verdict, or why they did not run."""
    isolated = facts.isolated
    if isolated is None:
        return None
    if isolated.isolation is None:
        return not_isolated(isolated.reason, mode=facts.options.isolate)
    return isolate_check(isolated.isolation, isolated.hosts, isolated.nbytes,
                         timeout=facts.ctx.timeout)


def _why_slow(iso: Isolation, verdict: Verdict, node: int, hosts: list[str]) -> str:
    tests = [t for t in iso.tests if node in (t.a, t.b)]
    if all(t.failed for t in tests):
        return (f"{hosts[node]} (none of its {len(tests)} pairs finished, "
                f"{verdict.evidence.get(node, 0)} with nodes fast elsewhere: {tests[-1].error})")
    worst = max(t.busbw_gbps for t in tests)
    return (f"{hosts[node]} (at most {worst:.3g} GB/s in all its {len(tests)} pairs, "
            f"{verdict.evidence.get(node, 0)} with nodes fast elsewhere)")


def _why_link(iso: Isolation, link: tuple[int, int], hosts: list[str]) -> str:
    tests = [t for t in iso.tests if t.key == link]
    name = f"{hosts[link[0]]}-{hosts[link[1]]}"
    if all(t.failed for t in tests):
        return f"{name} (its pair could not finish: {tests[-1].error})"
    worst = max(t.busbw_gbps for t in tests if not t.failed)
    times = "twice" if len(tests) == 2 else f"{len(tests)} times"
    return (f"{name} (slow {times} while both nodes were fast with others; at most "
            f"{worst:.3g} GB/s)")


def _cut_short(iso: Isolation) -> str:
    reduced = [t for t in iso.tests if t.reduced]
    if not reduced:
        return ""
    word = "pair" if len(reduced) == 1 else "pairs"
    return (f"; {len(reduced)} {word} measured a smaller message or fewer iterations to fit "
            "their share of --timeout")


def isolate_check(iso: Isolation, hosts: list[str], nbytes: int, *,
                  timeout: float | None = None) -> CheckResult:
    """Pass when nothing is slow; fail naming the slow nodes and links (category degraded),
    a pair that could not finish among them; warn when suspects (nodes, or links slow once)
    could not be confirmed; an error when no pair finished (nothing to judge by)."""
    details = isolate_details(iso, hosts, nbytes)
    if iso.tests and all(t.failed for t in iso.tests):
        return _nothing_measured(iso, nbytes, timeout, details)
    verdict = iso.judged()
    tested = (f"{len(iso.tests)} pair tests of {format_size(nbytes)} in {len(iso.rounds)} "
              f"rounds over {iso.n} nodes; median pair {verdict.median_gbps:.3g} GB/s busbw"
              + _cut_short(iso))
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
            parts.append(f"slow {word} " + ", ".join(_why_link(iso, link, hosts)
                                                      for link in verdict.slow_links))
        fix = ("Take the named node(s) out of the job (--on-fail drain under Slurm) and check "
               "them: NIC link speed and errors (ethtool, ibstat / ibv_devinfo rate), the GPU's "
               "PCIe link (nvidia-smi -q: Link Width / Generation), cables and transceivers. "
               "For a slow link, check the switch ports and cables on the path between its two "
               "nodes.")
        return failed(ISOLATE, "; ".join(parts) + f", below {floor} ({tested})", fix,
                      Category.DEGRADED, **details)
    if verdict.suspects or verdict.suspect_links:
        named = host_names(verdict.suspects, hosts) + [
            f"link {hosts[a]}-{hosts[b]}" for a, b in verdict.suspect_links]
        return warned(ISOLATE,
                      f"suspected but not confirmed: {', '.join(named)}"
                      f" ({iso.stopped or 'no confirmation possible'}; {tested})",
                      "Raise --timeout so the confirmation rounds can run, or rerun with "
                      "--isolate links; with every pair slow, compare against --min-busbw.",
                      Category.DEGRADED, **details)
    return passed(ISOLATE, f"no slow node or link: every pair above {floor} ({tested})",
                  **details)


def _nothing_measured(iso: Isolation, nbytes: int, timeout: float | None,
                      details: dict[str, Any]) -> CheckResult:
    """Not one pair finished while the sweep before them completed on every rank, so the
    links work: the pairs' share of --timeout was too short, and no node can be judged."""
    word = "test" if len(iso.tests) == 1 else "tests"
    of = f" of --timeout {timeout:g}" if timeout is not None else ""
    fix = "Give the pair tests more time: "
    if timeout is not None:
        details["suggested_timeout_s"] = longer_timeout(timeout)
        fix += f"--timeout {details['suggested_timeout_s']} (this run had {timeout:g})"
    else:
        fix += "a longer --timeout"
    return errored(ISOLATE,
                   f"nothing measured: none of the {len(iso.tests)} pair {word} of "
                   f"{format_size(nbytes)} finished within its share{of} "
                   f"({iso.tests[-1].error}), so no node or link can be judged",
                   fix + "; the sweep before them completed, so the links do work.",
                   Category.TIMEOUT, **details)


def not_isolated(reason: str, **details: Any) -> CheckResult:
    """The row when the pair tests could not run (one node, the sweep failed)."""
    return skipped(ISOLATE, f"pair tests not run: {reason}", **details)
