"""bench.busbw: the peak bus bandwidth, against --min-busbw (the figure expected of the
hardware is bench.expected_busbw's)."""

from __future__ import annotations

from typing import Any

from ncclcheck.bench.analysis import SweepResult
from ncclcheck.bench.metrics import SizeRow, average_busbw, significant
from ncclcheck.bench.sizes import format_size
from ncclcheck.model import Category, CheckResult, failed, passed, skipped
from ncclcheck.probes.bench.measure import BenchFacts
from ncclcheck.probes.spec import CheckSpec, judge


BUSBW = CheckSpec(
    "bench.busbw", "the peak bus bandwidth", (Category.P2P, Category.NET_PLUGIN, Category.OTHER),
    fails_when="the peak busbw is below --min-busbw",
    doc="busbw = algbw x 2(n-1)/n, as nccl-tests computes it. The category points "
        "at the likely cause: p2p on one node, net_plugin across nodes, other for "
        "Gloo. Skipped on one rank, where busbw is 0 by definition. The figure expected "
        "of the hardware is bench.expected_busbw's.",
    order=20)


@judge(BUSBW)
def judge_busbw(facts: BenchFacts) -> CheckResult | None:
    return busbw_check(facts.result, facts.rows, facts.options.min_busbw, facts.hardware.nodes)


def busbw_check(result: SweepResult, rows: list[SizeRow], min_busbw: float | None,
                nodes: int) -> CheckResult | None:
    """--min-busbw against the peak busbw (the expected figure is bench.expected_busbw's)."""
    if not rows:
        return None
    peak = max(rows, key=lambda r: r.busbw_gbps)
    details: dict[str, Any] = {"peak_busbw_gbps": significant(peak.busbw_gbps),
                               "peak_bytes": peak.bytes,
                               "largest_bytes": rows[-1].bytes,
                               "largest_busbw_gbps": significant(rows[-1].busbw_gbps),
                               "avg_busbw_gbps": significant(average_busbw(rows))}
    at = f"{peak.busbw_gbps:.3g} GB/s busbw (peak, at {format_size(peak.bytes)})"
    if result.world_size < 2:
        fastest = max(rows, key=lambda r: r.algbw_gbps)
        floor = f"; --min-busbw {min_busbw:g} needs 2 ranks or more" if min_busbw else ""
        return skipped(BUSBW, "one rank: an all-reduce moves nothing between ranks, so busbw is "
                       f"0 by definition (algbw {fastest.algbw_gbps:.3g} GB/s at "
                       f"{format_size(fastest.bytes)} is a local copy){floor}", **details)
    if result.backend == "nccl":
        category = Category.P2P if nodes <= 1 else Category.NET_PLUGIN
        cause = ("Check GPU peer-to-peer: NCCL_P2P_DISABLE and NCCL_P2P_LEVEL unset, "
                 "`nvidia-smi topo -m` shows NV# links, IOMMU/ACS off"
                 if nodes <= 1 else
                 "Check that NCCL uses the fast network: NCCL_DEBUG=INFO should show NET/IB "
                 "(not NET/Socket), the net plugin (NCCL_NET_PLUGIN) loads, NCCL_IB_HCA and "
                 "NCCL_SOCKET_IFNAME name the right devices")
    else:
        category = Category.OTHER
        cause = ("Gloo runs on the CPU: check GLOO_SOCKET_IFNAME names the fast interface and "
                 "that no other process saturates the link or the CPUs")
    if min_busbw is not None:
        details["min_busbw_gbps"] = min_busbw
        if peak.busbw_gbps < min_busbw:
            return failed(BUSBW, f"{at} is below --min-busbw {min_busbw:g} GB/s",
                          cause + ".", category, **details)
        return passed(BUSBW, f"{at} meets --min-busbw {min_busbw:g} GB/s", **details)
    return passed(BUSBW, f"{at} (set --min-busbw to enforce a floor of your own; "
                  "bench.expected_busbw compares it with the figure expected of this hardware)",
                  **details)
