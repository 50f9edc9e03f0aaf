"""bench.expected_busbw: the sweep's busbw as a share of the figure expected of this hardware.

nccl-tests users keep asking whether their busbw is normal; the answer is a published figure
for the same GPUs and fabric (ncclcheck/bench/expected_busbw.toml, each row with its sources).
The check shows the share of it the sweep reached and fails below --min-share, whose default
is the row's source's own pass mark. It compares like with like: at the figure's message size
when the sweep reached it. A sweep that stopped short (``run``'s quick sweep ends at 64 MB) is
compared at its peak and never fails: it warns only when the peak is below half the share
needed (broken whatever the size), and otherwise passes naming the size to rerun with. No
figure describes Gloo on the CPU, one GPU, or hardware the table does not know: then the
check is skipped and says why.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.bench.metrics import SizeRow, significant
from ncclcheck.bench.reference import Hardware, Reference, compare, expectation
from ncclcheck.bench.sizes import format_size
from ncclcheck.model import Category, CheckResult, failed, passed, skipped, warned
from ncclcheck.probes.bench.measure import BenchFacts
from ncclcheck.probes.spec import CheckSpec, judge

EXPECTED = CheckSpec(
    "bench.expected_busbw", "the busbw reaches the share of the figure expected of this hardware",
    (Category.P2P, Category.NET_PLUGIN),
    fails_when="the busbw at the expected figure's message size is below --min-share of it "
               "(default: the figure's source's pass mark, docs/bench.md)",
    warns_when="the sweep stopped below the figure's message size and its peak is below "
               "half of --min-share of the figure",
    doc="Skipped, with the reason, on Gloo (CPU), on one rank, and on hardware the table of "
        "expected figures does not know. The category points at the likely cause: p2p "
        "within a node, net_plugin across nodes.",
    order=25)


@judge(EXPECTED)
def judge_expected(facts: BenchFacts) -> CheckResult | None:
    return expected_check(facts.hardware, facts.rows, facts.result.world_size,
                          facts.options.min_share)


def expected_check(hw: Hardware, rows: list[SizeRow], world_size: int,
                   min_share: float | None) -> CheckResult | None:
    """The share of the expected busbw the sweep reached, against --min-share."""
    if not rows:
        return None
    if world_size < 2:
        return skipped(EXPECTED, "no expected figure: one rank moves nothing between ranks")
    ref = expectation(hw)
    if isinstance(ref, str):
        return skipped(EXPECTED, f"no expected figure: {ref}", hardware=_hardware(hw))
    got = compare(ref, rows)
    assert got is not None
    share = min_share if min_share is not None else ref.min_share
    details: dict[str, Any] = {
        "expected": ref.to_dict(), "measured_gbps": significant(got.measured_gbps),
        "at_bytes": got.at_bytes, "share": round(got.share, 3), "min_share": share,
        "min_share_from": "--min-share" if min_share is not None else ref.share_basis,
        "like_for_like": got.like_for_like, "hardware": _hardware(hw)}
    said = (f"{got.measured_gbps:.3g} GB/s busbw at {format_size(got.at_bytes)} is "
            f"{got.share:.0%} of the {ref.busbw_gbps:g} GB/s expected of {ref.title}"
            + (f" at {format_size(ref.nbytes)}" if ref.nbytes else ""))
    rerun = (f"the sweep stopped at {format_size(got.at_bytes)}, below the figure's message "
             f"size: run bench --max-bytes {format_size(ref.nbytes).replace(' ', '')} to "
             "compare like with like")
    if got.share >= share:
        return passed(EXPECTED, f"{said} (at least {share:g} needed)", **details)
    if not got.like_for_like and got.share >= share / 2:
        return passed(EXPECTED, f"{said}; not judged: {rerun}", **details)
    category = Category.P2P if hw.nodes <= 1 else Category.NET_PLUGIN
    cause = ("Check GPU peer-to-peer: NCCL_P2P_DISABLE and NCCL_P2P_LEVEL unset, "
             "`nvidia-smi topo -m` shows NV# links, IOMMU/ACS off; then the GPUs' clocks "
             "and NVLink errors (nvidia-smi nvlink -e)" if hw.nodes <= 1 else
             "Check that NCCL uses the fast network: NCCL_DEBUG=INFO should show NET/IB (not "
             "NET/Socket), the net plugin loads, NCCL_IB_HCA and NCCL_SOCKET_IFNAME name the "
             "right devices; then run bench --isolate nodes to find a slow node")
    source = f" Figure from {ref.sources[0]}." if ref.sources else ""
    if not got.like_for_like:
        return warned(EXPECTED, f"{said}, below half of the {share:g} needed even though "
                      f"{rerun}", f"{cause}.{source}", category, **details)
    return failed(EXPECTED, f"{said}, below --min-share {share:g}", f"{cause}.{source}",
                  category, **details)


def _hardware(hw: Hardware) -> dict[str, Any]:
    return {"backend": hw.backend, "gpu": hw.gpu_name, "gpus_per_node": hw.gpus_per_node,
            "nodes": hw.nodes, "ib_rate_gbit": hw.ib_rate_gbit,
            "eth_speed_mbit": hw.eth_speed_mbit}


def expected_line(ref: Reference) -> str:
    """How the table names a figure: '460 GB/s (8x H100 SXM, ...) at 16 GB'."""
    return f"{ref.busbw_gbps:g} GB/s ({ref.title})" + (
        f" at {format_size(ref.nbytes)}" if ref.nbytes else "")
