"""The all-reduce sweep as nccl-tests prints it, so people can compare numbers directly.

Columns, widths and footer labels follow nccl-tests (src/util.cu): size, count, type, redop,
root, then time (us), algbw and busbw (GB/s) and #wrong; every non-data line starts with `#`;
the footer labels `# Out of bounds values : N OK|FAILED` and `# Avg bus bandwidth    : X` are
byte for byte the ones other tools parse. torch's all-reduce is in place, so there is one set of
timing columns, labelled in-place. Fitted to a terminal's width, only the comment lines wrap
(onto `#` lines of their own): the columns stay nccl-tests' 86 characters, for those parsers.
"""

from __future__ import annotations

from typing import Any

from .width import wrap

# nccl-tests' names for the `type` column
_TYPE_NAMES = {"float32": "float", "bfloat16": "bfloat16", "float16": "half"}


def format_time_us(time_us: float) -> str:
    """nccl-tests' time column: %7.0f from 10 ms, %7.1f from 100 us, else %7.2f."""
    if time_us >= 10000.0:
        return f"{time_us:7.0f}"
    if time_us >= 100.0:
        return f"{time_us:7.1f}"
    return f"{time_us:7.2f}"


def bench_row(row: dict[str, Any]) -> str:
    type_name = _TYPE_NAMES.get(row["dtype"], row["dtype"])
    return (f"{row['bytes']:12d}  {row['count']:12d}  {type_name:>8}  {'sum':>6}  {-1:6d}  "
            f"{format_time_us(row['time_us'])}  {row['algbw_gbps']:6.2f}  "
            f"{row['busbw_gbps']:6.2f}  {row['wrong']:6d}")


_COLUMN_LINES = (
    "#                                                              in-place",
    "#       size         count      type   redop    root     time   algbw   busbw  #wrong",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)",
)


def bench_table(bench: dict[str, Any], width: int | None = None) -> str:
    """nccl-tests' table; with a ``width``, comment lines longer than it wrap."""
    lines = _bench_lines(bench)
    if width is None:
        return "\n".join(lines)
    fitted: list[str] = []
    for line in lines:
        if len(line) <= width or not line.startswith("#") or line in _COLUMN_LINES:
            fitted.append(line)
        else:
            body = line[1:]
            lead = "#" + body[:len(body) - len(body.lstrip())]
            fitted += wrap(body.strip(), width, indent=lead, subsequent=lead + "    ")
    return "\n".join(fitted)


def _bench_lines(bench: dict[str, Any]) -> list[str]:
    rows = bench.get("rows", [])
    hosts = bench.get("hosts") or []
    where = f" on {len(hosts)} host{'s' if len(hosts) != 1 else ''}" if hosts else ""
    lines = [
        f"# all_reduce over {bench.get('backend')} with {bench.get('world_size')} ranks{where}"
        + (f", {bench['gpu']}" if bench.get("gpu") else "")
        + (f", NCCL {bench['nccl_version']}" if bench.get("nccl_version") else ""),
        f"#  iters: {bench.get('iters', '-')}  warmup: {bench.get('warmup', '-')}  "
        "time: slowest rank, mean per iteration",
        "#",
        *_COLUMN_LINES,
    ]
    lines += [bench_row(row) for row in rows]
    wrong = sum(r["wrong"] for r in rows)
    lines.append(f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}")
    lines.append(f"# Avg bus bandwidth    : {bench.get('avg_busbw_gbps', 0.0):g}")
    if rows and bench.get("world_size", 2) > 1:  # one rank: busbw is 0 at every size
        peak = max(rows, key=lambda r: r["busbw_gbps"])
        lines.append(f"# Peak bus bandwidth   : {peak['busbw_gbps']:g} at {peak['bytes']} bytes")
    reference = bench.get("reference")
    if reference:
        size = f" at {reference['bytes']} bytes" if reference.get("bytes") else ""
        share = (f"; this run {reference['share']:.0%} of it" if reference.get("share") is not None
                 else "")
        lines.append(f"# Expected busbw       : {reference['busbw_gbps']:g} "
                     f"({reference['title']}{size}){share}")
    lines.append("#")
    if bench.get("isolate"):
        lines += isolate_lines(bench["isolate"])
    return lines


def isolate_lines(isolate: dict[str, Any]) -> list[str]:
    """--isolate: the slow nodes and links first, then one compact line per node."""
    per_node = isolate.get("per_node", [])
    lines = [f"# isolate {isolate.get('mode')}: {len(per_node)} nodes, {isolate.get('pairs')} "
             f"pair tests of {isolate.get('bytes')} bytes in {isolate.get('rounds')} rounds; "
             f"median pair busbw {isolate.get('median_busbw_gbps', 0):g} GB/s, slow below "
             f"{isolate.get('slow_below_gbps', 0):g}"]
    lines += [f"# SLOW node    {host}" for host in isolate.get("slow_nodes", [])]
    lines += [f"# SLOW link    {a} - {b}" for a, b in isolate.get("slow_links", [])]
    lines += [f"# suspect      {host} (not confirmed)" for host in isolate.get("suspects", [])]
    lines += [f"# suspect link {a} - {b} (slow once, not retested)"
              for a, b in isolate.get("suspect_links", [])]
    if not any(isolate.get(k) for k in ("slow_nodes", "slow_links", "suspects", "suspect_links")):
        lines.append("# nothing slow")
    width = max([len(line["host"]) for line in per_node] + [4])
    lines.append(f"#   {'host':<{width}}  pairs  slow   median    worst  partners")
    for line in per_node:
        median = line.get("median_busbw_gbps")
        worst = line.get("min_busbw_gbps")
        lines.append(f"#   {line['host']:<{width}}  {line['pairs']:5d}  {line['slow_pairs']:4d}  "
                     f"{'-' if median is None else f'{median:7.3g}':>7}  "
                     f"{'-' if worst is None else f'{worst:7.3g}':>7}  "
                     f"{' '.join(line.get('partners', []))}")
    lines.append("#")
    return lines
