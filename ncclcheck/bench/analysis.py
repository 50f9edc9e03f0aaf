"""From every rank's outcome to the job's rows, the report's `bench` section and its checks.

Pure: it reads the outcomes (dicts, as they crossed the process or store boundary) and what the
collector saw of the ranks that never reported; nothing here runs a collective.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ncclcheck.model import BenchSection, Category, CheckResult, failed, passed, skipped, warned
from ncclcheck.registry import CheckSpec

from .faults import FAULT_VARIABLE
from .metrics import (RankRow, SizeRow, average_busbw, combine_size, find_stragglers, significant,
                      straggler_nodes)
from .reference import Reference
from .sizes import format_size


@dataclass
class SweepResult:
    backend: str
    world_size: int
    dtype: str
    iters: int
    warmup: int
    sizes: list[int]
    collective_timeout: float
    outcomes: dict[int, dict[str, Any]] = field(default_factory=dict)
    torn_down: list[int] = field(default_factory=list)      # stopped answering, killed
    silent: list[int] = field(default_factory=list)         # never reported (cluster mode)
    not_joined: list[int] = field(default_factory=list)     # never reached the sweep at all
    exited: dict[int, int] = field(default_factory=dict)    # died without reporting
    stderr_tail: dict[int, str] = field(default_factory=dict)
    progress: dict[int, int] = field(default_factory=dict)  # launcher.progress_mark()
    fault: str | None = None

    @property
    def hosts(self) -> dict[int, str | None]:
        return {r: o.get("host") for r, o in self.outcomes.items()}

    @property
    def missing(self) -> list[int]:
        return sorted(set(self.torn_down) | set(self.silent) | set(self.exited)
                      | set(self.not_joined))


def job_rows(result: SweepResult) -> list[SizeRow]:
    """One row per size that every rank completed (a size some rank never finished has no time)."""
    if result.missing:
        return []
    rows: list[SizeRow] = []
    for step in range(len(result.sizes)):
        per_rank: dict[int, RankRow] = {}
        for rank, outcome in result.outcomes.items():
            data = outcome.get("rows", [])
            if step < len(data):
                per_rank[rank] = RankRow.from_dict(data[step])
        if len(per_rank) < result.world_size:
            break
        rows.append(combine_size(per_rank, result.dtype, result.world_size))
    return rows


def bench_section(result: SweepResult, rows: list[SizeRow],
                  reference: Reference | None) -> BenchSection:
    """The report's `bench` object (docs/report.schema.json), nccl-tests' numbers per size."""
    peak = max(rows, key=lambda r: r.busbw_gbps) if rows else None
    first = next(iter(result.outcomes.values()), {})
    return BenchSection(
        backend=result.backend,
        world_size=result.world_size,
        dtype=result.dtype,
        iters=result.iters,
        warmup=result.warmup,
        rows=[r.to_dict() for r in rows],
        avg_busbw_gbps=significant(average_busbw(rows)),
        peak_busbw_gbps=significant(peak.busbw_gbps) if peak else 0.0,
        peak_bytes=peak.bytes if peak else None,
        hosts=sorted({h for h in result.hosts.values() if h}),
        gpu=first.get("gpu_name"),
        nccl_version=first.get("nccl_version"),
        reference=None if reference is None else {
            "key": reference.key, "title": reference.title, "busbw_gbps": reference.busbw_gbps,
            "warn_below_gbps": reference.warn_below_gbps},
    )


def _ranks(ranks: list[int], hosts: dict[int, str | None] | None = None) -> str:
    hosts = hosts or {}
    named = [f"{r} ({hosts[r]})" if hosts.get(r) else str(r) for r in sorted(ranks)]
    word = "rank" if len(named) == 1 else "ranks"
    return f"{word} {', '.join(named)}"


def _fault_note(result: SweepResult) -> str:
    return (f" {FAULT_VARIABLE}={result.fault} is set: this failure was injected on purpose; "
            f"unset {FAULT_VARIABLE}." if result.fault else "")


def allreduce_check(result: SweepResult, rows: list[SizeRow]) -> CheckResult:
    """Did every rank complete every size, and was every element of every result right?"""
    details: dict[str, Any] = {"backend": result.backend, "world_size": result.world_size,
                               "dtype": result.dtype, "sizes_planned": len(result.sizes),
                               "sizes_completed": len(rows)}
    if result.fault:
        details["fault_injection"] = result.fault
    errors = {r: o["error"] for r, o in result.outcomes.items() if o.get("error")}
    if errors:
        details["errors"] = {str(r): e for r, e in errors.items()}
    if result.stderr_tail:
        details["stderr_tail"] = {str(r): t[-1500:] for r, t in result.stderr_tail.items()}

    duplicate = sorted(r for r, e in errors.items() if e["kind"] == "duplicate_gpu")
    if duplicate:
        message = errors[duplicate[0]]["message"]
        return failed(ALLREDUCE, f"two ranks share one GPU: {message}",
                      "Give each rank its own GPU: torch.cuda.set_device(LOCAL_RANK) with "
                      "CUDA_VISIBLE_DEVICES listing every GPU of the node (or exactly one per "
                      "rank), and no more processes per node than GPUs (--nproc-per-node / "
                      "--gpus-per-node)." + _fault_note(result),
                      Category.DUPLICATE_GPU, ranks=duplicate, **details)

    if result.missing:
        return _missing_check(result, errors, details)

    if errors:
        return _error_check(result, errors, details)
    wrong_check = _wrong_values_check(result, rows, details)
    if wrong_check is not None:
        return wrong_check

    planned = len(result.sizes)
    if len(rows) < planned:
        last = format_size(rows[-1].bytes) if rows else "none"
        return warned(ALLREDUCE,
                      f"all-reduce correct on {len(rows)} of {planned} sizes; the deadline "
                      f"stopped the sweep after {last}",
                      f"Raise --timeout or lower --max-bytes (now {format_size(result.sizes[-1])}).",
                      Category.TIMEOUT, **details)
    span = f"{format_size(rows[0].bytes)}-{format_size(rows[-1].bytes)}" if rows else "no sizes"
    return passed(ALLREDUCE,
                  f"all-reduce over {result.backend} on {result.world_size} ranks correct at "
                  f"{len(rows)} sizes ({span}, {result.dtype}): 0 wrong values", **details)


_ERROR_FIXES = {
    Category.TIMEOUT: "The collective exceeded {timeout:.0f} s. Raise --timeout, lower "
                      "--max-bytes, or look for a stuck rank (py-spy dump --pid PID; "
                      "NCCL_DEBUG=INFO).",
    Category.CONNECTION: "Ranks could not reach each other: check MASTER_ADDR/MASTER_PORT, "
                         "GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME and the firewall "
                         "(`ncclcheck net`).",
    Category.CUDA: "Check the GPUs with nvidia-smi and the CUDA/driver versions (`ncclcheck nccl`).",
    Category.OUT_OF_MEMORY: "Lower --max-bytes or free GPU memory.",
    Category.RANK_MISMATCH: "Start no more ranks per node than it has GPUs (--nproc-per-node / "
                            "--gpus-per-node), and let CUDA_VISIBLE_DEVICES show every rank its "
                            "GPU.",
}
_ERROR_CATEGORIES = {"timeout": Category.TIMEOUT, "connection": Category.CONNECTION,
                     "rank_mismatch": Category.RANK_MISMATCH, "cuda": Category.CUDA,
                     "out_of_memory": Category.OUT_OF_MEMORY}


def _error_check(result: SweepResult, errors: dict[int, dict[str, Any]],
                 details: dict[str, Any]) -> CheckResult:
    """A rank reported an error: the first one, its category and the fix for that category."""
    kinds = {e["kind"] for e in errors.values()}
    rank = min(errors)
    error = errors[rank]
    where = f" at {format_size(error['bytes'])}" if error.get("bytes") else " while setting up"
    category = _ERROR_CATEGORIES.get(error["kind"], Category.OTHER)
    fix = _ERROR_FIXES.get(category, "Re-run with NCCL_DEBUG=INFO (NCCL) or "
                           "TORCH_DISTRIBUTED_DEBUG=DETAIL and read the first error.")
    return failed(ALLREDUCE,
                  f"all-reduce failed on {_ranks(sorted(errors), result.hosts)}{where}: "
                  f"{error['message'].splitlines()[0][:200]}",
                  fix.format(timeout=result.collective_timeout) + _fault_note(result), category,
                  kinds=sorted(kinds), **details)


def _wrong_values_check(result: SweepResult, rows: list[SizeRow],
                        details: dict[str, Any]) -> CheckResult | None:
    """Wrong values in any result: name the rank whose input was already wrong, else the ranks
    that saw them. None when every value was right (``details`` then records that)."""
    wrong = sum(r.wrong for r in rows)
    details.update(wrong=wrong, rows_wrong=[r.bytes for r in rows if r.wrong])
    if not wrong:
        return None
    bad_inputs = sorted({k for r in rows for k in r.input_wrong_ranks})
    saw = sorted({k for r in rows for k in r.wrong_ranks})
    details.update(input_wrong_ranks=bad_inputs, wrong_ranks=saw)
    sizes = sum(1 for r in rows if r.wrong)
    if bad_inputs:
        source = (f"; {_ranks(bad_inputs, result.hosts)} fed an input that differed from "
                  "what it wrote, before the all-reduce")
        target = bad_inputs
    else:
        source = f"; wrong values seen on {_ranks(saw, result.hosts)}"
        target = saw
    return failed(ALLREDUCE,
                  f"all-reduce returned {wrong} wrong values at {sizes} of {len(rows)} sizes"
                  f"{source}",
                  f"Take {_ranks(target, result.hosts)} out of the job and test "
                  + ("its GPU memory and links (nvidia-smi -q -d ECC; dcgmi diag -r 3)"
                     if result.backend == "nccl" else "its memory (memtester) and network")
                  + "; a corrupting node must not train." + _fault_note(result),
                  Category.OTHER, ranks=target, **details)


def _agree(ranks: list[int], singular: str, plural: str) -> str:
    """The verb form that agrees with ``_ranks(ranks)``: one rank "was", several "were"."""
    return singular if len(ranks) == 1 else plural


def _hung_check(result: SweepResult, hung: list[int], waited: list[int], at: str,
                details: dict[str, Any]) -> CheckResult:
    """Ranks that stopped answering: where to look depends on what they ran on (a Gloo run on
    CPU has no GPU to inspect)."""
    them = _agree(hung, "it", "them")
    others = f"; {_ranks(waited, result.hosts)} waited for {them} in vain" if waited else ""
    torn = (f" and {_agree(hung, 'was', 'were')} torn down"
            if set(hung) <= set(result.torn_down) else "")
    on_gpu = result.backend == "nccl"
    device = f", {_agree(hung, 'its GPU', 'their GPUs')} in nvidia-smi" if on_gpu else ""
    debug = "NCCL_DEBUG=INFO" if on_gpu else "TORCH_DISTRIBUTED_DEBUG=DETAIL"
    return failed(ALLREDUCE,
                  f"all-reduce{at} did not complete within {result.collective_timeout:.0f} s: "
                  f"{_ranks(hung)} stopped answering{torn}{others}",
                  f"Find what {_ranks(hung)} {_agree(hung, 'was', 'were')} doing (py-spy dump "
                  f"--pid PID{device}, {_agree(hung, 'its network', 'their network')} with "
                  f"`ncclcheck net`); re-run with {debug}. "
                  "If the sizes are simply too big for the link, raise --timeout."
                  + _fault_note(result), Category.TIMEOUT, ranks=hung, **details)


def _missing_check(result: SweepResult, errors: dict[int, dict[str, Any]],
                   details: dict[str, Any]) -> CheckResult:
    """Ranks that gave no outcome: stopped answering (torn down / silent) or died."""
    if result.not_joined:
        details["not_joined"] = sorted(result.not_joined)
        return failed(ALLREDUCE,
                      f"{_ranks(result.not_joined)} never joined the benchmark within "
                      f"{result.collective_timeout:.0f} s, so no all-reduce was run",
                      f"Find out why {_ranks(result.not_joined)} "
                      f"{_agree(sorted(result.not_joined), 'is', 'are')} missing (the cluster.* checks "
                      "say whether it reported at all); a rank stuck in an earlier probe or a dead "
                      "process looks the same from here." + _fault_note(result),
                      Category.TIMEOUT, ranks=sorted(result.not_joined), **details)
    hung = sorted(set(result.torn_down) | set(result.silent))
    details.update(did_not_complete=result.missing, torn_down=sorted(result.torn_down),
                   silent=sorted(result.silent), exited={str(r): c for r, c in result.exited.items()},
                   progress={str(r): s for r, s in result.progress.items()})
    waited = sorted(r for r, e in errors.items() if e["kind"] in ("timeout", "connection"))
    # Several ranks stuck: the one that got least far is the one the others were waiting for.
    marks = {r: result.progress.get(r, -1) for r in hung}
    if len(set(marks.values())) > 1:
        least = min(marks.values())
        waited = sorted(set(waited) | {r for r, m in marks.items() if m != least})
        hung = sorted(r for r, m in marks.items() if m == least)
    steps = [result.progress[r] // 2 for r in result.missing if r in result.progress]
    at = f" at {format_size(result.sizes[max(steps)])}" if steps else ""
    if hung:
        return _hung_check(result, hung, waited, at, details)
    codes = ", ".join(f"rank {r}: exit status {c}" for r, c in sorted(result.exited.items()))
    return failed(ALLREDUCE,
                  f"{_ranks(sorted(result.exited))} died{at} before reporting ({codes})",
                  "Read the rank's stderr (details.stderr_tail): a crash, the OOM killer "
                  "(dmesg) or a signal ended it." + _fault_note(result),
                  Category.RANK_CRASHED, ranks=sorted(result.exited), **details)


def busbw_check(result: SweepResult, rows: list[SizeRow], min_busbw: float | None,
                reference: Reference | None, nodes: int) -> CheckResult | None:
    """--min-busbw, or the built-in reference for the hardware, against the peak busbw."""
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
    if reference is None:
        return passed(BUSBW, f"{at}; no built-in reference for {result.backend} on this "
                      "hardware (set --min-busbw to enforce a floor)", **details)
    details.update(reference=reference.key, reference_title=reference.title,
                   reference_busbw_gbps=reference.busbw_gbps,
                   warn_below_gbps=reference.warn_below_gbps)
    if peak.busbw_gbps < reference.warn_below_gbps:
        return warned(BUSBW,
                      f"{at} is far below the {reference.busbw_gbps:g} GB/s expected of "
                      f"{reference.title}",
                      cause + "; or set --min-busbw to the figure this system should reach.",
                      category, **details)
    return passed(BUSBW, f"{at}; expected about {reference.busbw_gbps:g} GB/s on "
                  f"{reference.title}", **details)


def straggler_check(result: SweepResult, rows: list[SizeRow]) -> CheckResult | None:
    """Name a rank (or a whole node) that made everyone else wait, from per-rank lags."""
    if not rows or result.world_size < 2:
        return None
    lags = {r: sum(row.get("lag_s", 0.0) for row in o.get("rows", [])[:len(rows)])
            for r, o in result.outcomes.items()}
    total = sum(r.time_us for r in rows) / 1e6
    per_rank = {str(r): {"host": result.hosts.get(r), "lag_us": round(lag / len(rows) * 1e6, 2),
                         "time_us": [round(row["time_s"] * 1e6, 2)
                                     for row in result.outcomes[r].get("rows", [])[:len(rows)]]}
                for r, lag in sorted(lags.items())}
    found = find_stragglers(lags, total, result.hosts)
    details: dict[str, Any] = {"per_rank": per_rank}
    if not found:
        worst = max(lags, key=lambda r: lags[r])
        return passed(STRAGGLER, f"no straggler among {result.world_size} ranks (largest "
                      f"arrival lag {lags[worst] / len(rows) * 1e6:.1f} us per all-reduce, rank "
                      f"{worst})", **details)
    nodes = straggler_nodes(found, result.hosts)
    details.update(stragglers=[s.rank for s in found], straggler_nodes=nodes)
    first = found[0]
    who = f"node {', '.join(nodes)}" if nodes else _ranks([s.rank for s in found], result.hosts)
    return warned(STRAGGLER,
                  f"{who} arrived late at every all-reduce: {first.lag_us / len(rows):.0f} us per "
                  f"iteration against a median of {first.others_median_us / len(rows):.0f} us on "
                  "the other ranks, and everyone waited",
                  f"Look at what else runs on {who}: CPU load and binding (top, numactl, "
                  "OMP_NUM_THREADS), GPU clocks and throttling (nvidia-smi -q -d PERFORMANCE)."
                  + _fault_note(result), Category.OTHER, **details)


# -- declarations: the checks above, for the registry (re-exported by ncclcheck.probes.bench) --
ALLREDUCE = CheckSpec(
    "bench.allreduce", "every rank completed every size with correct values",
    (Category.DUPLICATE_GPU, Category.TIMEOUT, Category.CONNECTION,
     Category.RANK_MISMATCH, Category.CUDA, Category.OUT_OF_MEMORY,
     Category.RANK_CRASHED, Category.CONFIGURATION, Category.OTHER),
    fails_when="a rank raised (named, with the kind of error as category: "
               "timeout, connection, cuda, out_of_memory, or rank_mismatch for a "
               "LOCAL_RANK without a GPU of its own), two ranks share one GPU, a "
               "rank never joined or stopped answering (timeout) or died "
               "(rank_crashed, with its exit status and stderr tail), any element of any "
               "result was wrong (the ranks that fed a bad input are named), or --backend "
               "nccl without a visible GPU",
    warns_when="the deadline stopped the sweep before its largest size",
    doc="Every element of every all-reduce is checked against the exact expected "
        "value, as nccl-tests' #wrong column.")
BUSBW = CheckSpec(
    "bench.busbw", "the peak bus bandwidth", (Category.P2P, Category.NET_PLUGIN, Category.OTHER),
    fails_when="the peak busbw is below --min-busbw",
    warns_when="without --min-busbw, the peak busbw is below half the built-in "
               "reference for the detected hardware",
    doc="busbw = algbw x 2(n-1)/n, as nccl-tests computes it. The category points "
        "at the likely cause: p2p on one node, net_plugin across nodes, other for "
        "Gloo. Skipped on one rank, where busbw is 0 by definition.")
STRAGGLER = CheckSpec(
    "bench.straggler", "no rank makes the others wait", (Category.OTHER,),
    warns_when="a rank (or a whole node) arrived late at every all-reduce while "
               "the others waited",
    doc="Reported for two ranks or more, from each rank's arrival lag.")


CHECKS: tuple[CheckSpec, ...] = (ALLREDUCE, BUSBW, STRAGGLER)
