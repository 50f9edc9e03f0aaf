"""The all-reduce sweep as nccl-tests prints it, so people can compare numbers directly."""

from __future__ import annotations

from typing import Any


def bench_table(bench: dict[str, Any]) -> str:
    lines = [
        f"# all_reduce over {bench.get('backend')} with {bench.get('world_size')} ranks",
        "#       size         count      type   redop     time   algbw   busbw  #wrong",
        "#        (B)    (elements)                        (us)  (GB/s)  (GB/s)",
    ]
    for row in bench.get("rows", []):
        lines.append(f"{row['bytes']:>12}  {row['count']:>12}  {row['dtype']:>8}  {'sum':>6}  "
                     f"{row['time_us']:>7.1f}  {row['algbw_gbps']:>6.2f}  {row['busbw_gbps']:>6.2f}  "
                     f"{row['wrong']:>6}")
    wrong = sum(r["wrong"] for r in bench.get("rows", []))
    lines.append(f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}")
    lines.append(f"# Avg bus bandwidth    : {bench.get('avg_busbw_gbps', 0):.4g}")
    return "\n".join(lines)
