"""bench.allreduce: did every rank complete every size, and was every element of every result
right? When not, which rank to look at: the one that raised, stopped answering, died, never
joined, or fed a wrong input."""

from __future__ import annotations

from typing import Any

from ncclcheck.bench.analysis import SweepResult, fault_note, named_ranks
from ncclcheck.bench.cut_short import not_measured, still_starting, suggest_timeout
from ncclcheck.bench.faults import FAULT_VARIABLE
from ncclcheck.bench.metrics import SizeRow
from ncclcheck.bench.sizes import format_size
from ncclcheck.model import Category, CheckResult, errored, failed, passed, warned
from ncclcheck.probes.bench.measure import BenchFacts
from ncclcheck.probes.spec import CheckSpec, judge


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
               "nccl without a visible GPU; an error when the deadline ended the sweep "
               "before it measured any size (nothing to pass on: a longer --timeout is named)",
    warns_when="the deadline stopped the sweep after some sizes, before its largest one "
               "(the sizes left out and the --timeout that would fit them are named)",
    doc="Every element of every all-reduce is checked against the exact expected "
        "value, as nccl-tests' #wrong column.",
    order=10)


@judge(ALLREDUCE)
def judge_allreduce(facts: BenchFacts) -> CheckResult:
    return allreduce_check(facts.result, facts.rows, timeout=facts.ctx.timeout,
                           quick=facts.options.quick)


def bad_fault_setting(message: str) -> CheckResult:
    """The row when the test-only fault variable cannot be read: nothing was measured."""
    return failed(ALLREDUCE, message, f"Unset {FAULT_VARIABLE}: it is for ncclcheck's own tests "
                  "only.", Category.CONFIGURATION)


def no_gpu_for_nccl() -> CheckResult:
    """The row when --backend nccl is asked of a process that sees no GPU."""
    return failed(ALLREDUCE, "--backend nccl needs CUDA GPUs, but this process sees none",
                  "Run on a GPU node (check CUDA_VISIBLE_DEVICES and nvidia-smi), or use "
                  "--backend gloo for a CPU check.", Category.CUDA, backend="nccl")


def allreduce_check(result: SweepResult, rows: list[SizeRow], *, timeout: float | None = None,
                    quick: bool = False) -> CheckResult:
    """Did every rank complete every size, and was every element of every result right?
    ``timeout`` (the command's --timeout) sizes the one suggested when the deadline cut the
    sweep short; ``quick`` is `run`'s sweep, whose sizes no option changes."""
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
                      "--gpus-per-node)." + fault_note(result),
                      Category.DUPLICATE_GPU, ranks=duplicate, **details)

    if still_starting(result):
        return _nothing_measured(result, timeout, quick, details)
    if result.missing:
        return _missing_check(result, errors, details)

    if errors:
        return _error_check(result, errors, details)
    wrong_check = _wrong_values_check(result, rows, details)
    if wrong_check is not None:
        return wrong_check

    planned = len(result.sizes)
    if not rows and planned:
        return _nothing_measured(result, timeout, quick, details)
    if len(rows) < planned:
        left_out = not_measured(result, rows)
        details["not_measured"] = left_out
        raise_to = "Raise --timeout"
        if timeout is not None:
            details["suggested_timeout_s"] = suggest_timeout(result, rows, timeout)
            raise_to += (f" to about {details['suggested_timeout_s']} (this run had "
                         f"{timeout:g}; predicted from the sizes measured)")
        return warned(ALLREDUCE,
                      f"all-reduce correct on {len(rows)} of {planned} sizes; the deadline "
                      f"stopped the sweep after {format_size(rows[-1].bytes)}, so "
                      f"{', '.join(format_size(b) for b in left_out)} "
                      f"{'was' if len(left_out) == 1 else 'were'} not measured",
                      raise_to + ("." if quick else " or lower --max-bytes (now "
                                  f"{format_size(result.sizes[-1])})."),
                      Category.TIMEOUT, **details)
    span = f"{format_size(rows[0].bytes)}-{format_size(rows[-1].bytes)}" if rows else "no sizes"
    return passed(ALLREDUCE,
                  f"all-reduce over {result.backend} on {result.world_size} ranks correct at "
                  f"{len(rows)} sizes ({span}, {result.dtype}): 0 wrong values", **details)


def _nothing_measured(result: SweepResult, timeout: float | None, quick: bool,
                      details: dict[str, Any]) -> CheckResult:
    """The deadline ended the sweep before its first size: an error, never a pass or a
    warning, since a gate that measured nothing has nothing to pass on."""
    had = f" in the {result.budget_s:g} s it had" if result.budget_s is not None else ""
    of = f" of --timeout {timeout:g}" if timeout is not None else ""
    if result.missing:
        why = (f"{named_ranks(result.missing)} {_agree(result.missing, 'was', 'were')} still "
               f"starting (importing torch, forming the process group){had}{of} and "
               f"{_agree(result.missing, 'was', 'were')} torn down at the deadline")
    else:
        why = f"the deadline came before its first size ({format_size(result.sizes[0])}){had}{of}"
    details.update(not_measured=list(result.sizes), torn_down=sorted(result.torn_down),
                   silent=sorted(result.silent), budget_s=result.budget_s)
    fix = "Give the benchmark more time: "
    if timeout is not None:
        details["suggested_timeout_s"] = suggest_timeout(result, [], timeout)
        fix += f"--timeout {details['suggested_timeout_s']} (this run had {timeout:g})"
    else:
        fix += "a longer --timeout"
    fix += ("; or leave the sweep out of `run` with --no-bench." if quick else ".")
    if result.missing:
        fix += (" If the ranks still do not start with more time, one is stuck forming the "
                "process group: check MASTER_ADDR/MASTER_PORT and GLOO_SOCKET_IFNAME / "
                "NCCL_SOCKET_IFNAME (`ncclcheck net`).")
    return errored(ALLREDUCE,
                   f"nothing measured: the all-reduce sweep completed 0 of {len(result.sizes)} "
                   f"sizes: {why}", fix + fault_note(result), Category.TIMEOUT, **details)


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
                  f"all-reduce failed on {named_ranks(sorted(errors), result.hosts)}{where}: "
                  f"{error['message'].splitlines()[0][:200]}",
                  fix.format(timeout=result.collective_timeout) + fault_note(result), category,
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
        source = (f"; {named_ranks(bad_inputs, result.hosts)} fed an input that differed from "
                  "what it wrote, before the all-reduce")
        target = bad_inputs
    else:
        source = f"; wrong values seen on {named_ranks(saw, result.hosts)}"
        target = saw
    return failed(ALLREDUCE,
                  f"all-reduce returned {wrong} wrong values at {sizes} of {len(rows)} sizes"
                  f"{source}",
                  f"Take {named_ranks(target, result.hosts)} out of the job and test "
                  + ("its GPU memory and links (nvidia-smi -q -d ECC; dcgmi diag -r 3)"
                     if result.backend == "nccl" else "its memory (memtester) and network")
                  + "; a corrupting node must not train." + fault_note(result),
                  Category.OTHER, ranks=target, **details)


def _agree(ranks: list[int], singular: str, plural: str) -> str:
    """The verb form that agrees with ``named_ranks(ranks)``: one rank "was", several "were"."""
    return singular if len(ranks) == 1 else plural


def _hung_check(result: SweepResult, hung: list[int], waited: list[int], at: str,
                details: dict[str, Any]) -> CheckResult:
    """Ranks that stopped answering: where to look depends on what they ran on (a Gloo run on
    CPU has no GPU to inspect)."""
    them = _agree(hung, "it", "them")
    others = f"; {named_ranks(waited, result.hosts)} waited for {them} in vain" if waited else ""
    torn = (f" and {_agree(hung, 'was', 'were')} torn down"
            if set(hung) <= set(result.torn_down) else "")
    on_gpu = result.backend == "nccl"
    device = f", {_agree(hung, 'its GPU', 'their GPUs')} in nvidia-smi" if on_gpu else ""
    debug = "NCCL_DEBUG=INFO" if on_gpu else "TORCH_DISTRIBUTED_DEBUG=DETAIL"
    return failed(ALLREDUCE,
                  f"all-reduce{at} did not complete within {result.collective_timeout:.0f} s: "
                  f"{named_ranks(hung)} stopped answering{torn}{others}",
                  f"Find what {named_ranks(hung)} {_agree(hung, 'was', 'were')} doing (py-spy dump "
                  f"--pid PID{device}, {_agree(hung, 'its network', 'their network')} with "
                  f"`ncclcheck net`); re-run with {debug}. "
                  "If the sizes are simply too big for the link, raise --timeout."
                  + fault_note(result), Category.TIMEOUT, ranks=hung, **details)


def _missing_check(result: SweepResult, errors: dict[int, dict[str, Any]],
                   details: dict[str, Any]) -> CheckResult:
    """Ranks that gave no outcome: stopped answering (torn down / silent) or died."""
    if result.not_joined:
        details["not_joined"] = sorted(result.not_joined)
        return failed(ALLREDUCE,
                      f"{named_ranks(result.not_joined)} never joined the benchmark within "
                      f"{result.collective_timeout:.0f} s, so no all-reduce was run",
                      f"Find out why {named_ranks(result.not_joined)} "
                      f"{_agree(sorted(result.not_joined), 'is', 'are')} missing (the cluster.* checks "
                      "say whether it reported at all); a rank stuck in an earlier probe or a dead "
                      "process looks the same from here." + fault_note(result),
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
                  f"{named_ranks(sorted(result.exited))} died{at} before reporting ({codes})",
                  "Read the rank's stderr (details.stderr_tail): a crash, the OOM killer "
                  "(dmesg) or a signal ended it." + fault_note(result),
                  Category.RANK_CRASHED, ranks=sorted(result.exited), **details)
