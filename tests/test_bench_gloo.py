"""`ncclcheck bench` end to end on real processes: Gloo over loopback, 2 and 4 ranks, the
test-only faults (a corrupting rank, a rank that stops answering, a rank that dies, a
straggler), `run` with its quick sweep, and cluster mode under real torchrun.

Nothing is faked: real torch.distributed Gloo process groups in real worker processes. The
faults come from NCCLCHECK_BENCH_FAULT, the documented test-only hook (ncclcheck/bench/faults.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import jsonschema
import pytest

pytestmark = pytest.mark.slow

SCHEMA = json.loads((Path(__file__).parents[1] / "docs" / "report.schema.json").read_text())
LAUNCHER_PREFIXES = ("RANK", "WORLD_SIZE", "LOCAL_", "NODE_RANK", "GROUP_", "MASTER_", "SLURM",
                     "OMPI_", "PMI_", "MPI_LOCAL", "PET_", "JSM_", "LSB_", "TORCHELASTIC", "ROLE_",
                     "NCCLCHECK_BENCH_FAULT")
SMALL = ("--max-bytes", "64K", "--factor", "8", "--iters", "5", "--warmup", "1")


def ncclcheck(*args: str, fault: str | None = None, timeout: float = 90,
              launcher: list[str] | None = None) -> tuple[subprocess.CompletedProcess, str]:
    tag = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_PREFIXES)}
    env["NCCLCHECK_TEST_TAG"] = tag
    if fault:
        env["NCCLCHECK_BENCH_FAULT"] = fault
    argv = (launcher or [sys.executable]) + ["-m", "ncclcheck", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout), tag


def processes_tagged(tag: str) -> list[int]:
    """Live processes (other than zombies) that inherited this test's tag."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if f"NCCLCHECK_TEST_TAG={tag}".encode() not in f.read():
                    continue
            with open(f"/proc/{entry}/stat") as f:
                if f.read().split(")")[-1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        found.append(int(entry))
    return found


def checks_of(report: dict) -> dict[str, dict]:
    return {c["id"]: c for c in report["checks"]}


def test_two_ranks_json_report_progress_on_stderr_only():
    proc, _ = ncclcheck("bench", "--format", "json", *SMALL)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)  # exactly one document: no progress line on stdout
    jsonschema.validate(report, SCHEMA)
    bench = report["bench"]
    assert (bench["backend"], bench["world_size"], bench["dtype"]) == ("gloo", 2, "float32")
    assert [r["bytes"] for r in bench["rows"]] == [1024, 8192, 65536]
    for row in bench["rows"]:
        assert row["wrong"] == 0 and row["count"] == row["bytes"] // 4
        assert row["algbw_gbps"] == pytest.approx(row["bytes"] / (row["time_us"] * 1e-6) / 1e9,
                                                  rel=1e-3)
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"], rel=1e-6)  # 2(n-1)/n = 1
    assert checks_of(report)["bench.allreduce"]["status"] == "pass"
    assert "bench: 3/3 sizes done (64 KB, gloo, 2 ranks)" in proc.stderr
    assert "bench:" not in proc.stdout


def test_four_ranks_table_and_min_busbw():
    proc, _ = ncclcheck("bench", "--nproc", "4", "--dtype", "bfloat16", "--min-busbw", "1000",
                        *SMALL)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # 1000 GB/s is not reachable
    out = proc.stdout
    assert "# all_reduce over gloo with 4 ranks on 1 host" in out
    assert "# Out of bounds values : 0 OK" in out
    assert "# Avg bus bandwidth    : " in out
    data = [line.split() for line in out.splitlines() if line[:12].strip().isdigit()]
    assert [int(d[0]) for d in data] == [1024, 8192, 65536]
    for size, count, dtype, redop, root, _t, algbw, busbw, wrong in data:
        assert (int(count), dtype, redop, root, wrong) == (int(size) // 2, "bfloat16", "sum", "-1", "0")
        assert float(busbw) == pytest.approx(float(algbw) * 1.5, abs=0.011)
    assert "bench.busbw" in out and "below --min-busbw 1000" in out


def test_one_rank_has_no_busbw_to_judge():
    """One rank moves nothing between ranks: busbw is 0 by definition, so the floor is not
    judged (a one-GPU node's report once called 0 GB/s at 1 KB its "peak")."""
    proc, _ = ncclcheck("bench", "--nproc", "1", "--min-busbw", "1", *SMALL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(x for x in proc.stdout.splitlines() if "bench.busbw" in x)
    assert line.split()[0] == "skip" and "one rank" in line
    assert "needs 2 ranks" in proc.stdout and "# Peak bus bandwidth" not in proc.stdout


def test_a_rank_that_corrupts_its_input_is_named():
    proc, _ = ncclcheck("bench", "--format", "json", *SMALL, fault="corrupt:1")
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    check = checks_of(report)["bench.allreduce"]
    assert check["status"] == "fail" and check["details"]["ranks"] == [1]
    assert "rank 1" in check["summary"] and "wrong values" in check["summary"]
    assert "NCCLCHECK_BENCH_FAULT=corrupt:1" in check["fix"]
    assert all(r["wrong"] > 0 and r["input_wrong_ranks"] == [1] for r in report["bench"]["rows"])
    assert "# Out of bounds values : 6 FAILED" in _table(report)


def _table(report: dict) -> str:
    from ncclcheck.report.bench import bench_table
    return bench_table(report["bench"])


def test_a_rank_that_stops_answering_is_named_within_the_deadline_and_torn_down():
    started = time.monotonic()
    proc, tag = ncclcheck("bench", "--format", "json", "--timeout", "12", *SMALL,
                          fault="hang:1@1")
    elapsed = time.monotonic() - started
    assert proc.returncode == 1
    assert elapsed < 12 + 3, elapsed
    check = checks_of(json.loads(proc.stdout))["bench.allreduce"]
    assert check["category"] == "timeout" and check["details"]["ranks"] == [1]
    assert "rank 1 stopped answering and was torn down" in check["summary"]
    assert "8 KB" in check["summary"]
    assert processes_tagged(tag) == []


def test_a_rank_that_dies_is_rank_crashed():
    proc, tag = ncclcheck("bench", "--format", "json", "--timeout", "20", *SMALL,
                          fault="crash:1@1")
    check = checks_of(json.loads(proc.stdout))["bench.allreduce"]
    assert check["category"] == "rank_crashed" and "exit status 3" in check["summary"]
    assert processes_tagged(tag) == []


def test_a_straggler_among_four_ranks_is_named():
    proc, _ = ncclcheck("bench", "--format", "json", "--nproc", "4", "--max-bytes", "4K",
                        "--factor", "4", "--iters", "4", "--warmup", "1", fault="slow:2")
    report = json.loads(proc.stdout)
    checks = checks_of(report)
    assert checks["bench.allreduce"]["status"] == "pass"
    straggler = checks["bench.straggler"]
    assert straggler["status"] == "warn" and straggler["details"]["stragglers"] == [2]
    assert "rank 2" in straggler["summary"]


def test_run_includes_the_quick_bench_and_no_bench_leaves_it_out():
    started = time.monotonic()
    proc, _ = ncclcheck("run", "--checks", "ranks,bench", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert time.monotonic() - started < 60
    assert len(report["bench"]["rows"]) in (3, 4, 5) and report["bench"]["iters"] <= 10
    assert checks_of(report)["bench.allreduce"]["status"] == "pass"
    proc, _ = ncclcheck("run", "--checks", "ranks,bench", "--no-bench", "--format", "json")
    report = json.loads(proc.stdout)
    assert "bench" not in report and not any(c["id"].startswith("bench.") for c in report["checks"])


def test_cluster_mode_under_torchrun_reports_from_rank_zero():
    torchrun = [os.path.join(os.path.dirname(sys.executable), "torchrun"), "--standalone",
                "--nproc-per-node", "2"]
    proc, _ = ncclcheck("bench", "--format", "json", "--timeout", "40", *SMALL,
                        launcher=torchrun)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["bench"]["world_size"] == 2 and len(report["bench"]["rows"]) == 3
    check = checks_of(report)["bench.allreduce"]  # rank 0 reports the sweep: grouped, passing
    assert check["status"] == "pass" and check["ranks"] == "0" and check["hosts"] == 1


@pytest.mark.parametrize("args,needle", [
    (("--min-bytes", "lots"), "is not a size"),
    (("--min-bytes", "2M", "--max-bytes", "1M"), "--min-bytes"),
    (("--factor", "1"), "--factor"),
    (("--dtype", "int8"), "--dtype"),
    (("--plot", "sweep.txt"), ".png"),
])
def test_bad_options_are_one_line_and_exit_2(args, needle):
    proc, _ = ncclcheck("bench", *args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and needle in proc.stderr
    assert proc.stdout == ""


def test_plot_without_matplotlib_says_how_to_get_it():
    pytest.importorskip("ncclcheck")
    try:
        import matplotlib  # noqa: F401
        pytest.skip("matplotlib is installed; test_plot_is_drawn covers --plot")
    except ImportError:
        pass
    proc, _ = ncclcheck("bench", "--plot", "sweep.png")
    assert proc.returncode == 2 and "ncclcheck[plot]" in proc.stderr


def test_plot_is_drawn(tmp_path):
    pytest.importorskip("matplotlib")
    target = tmp_path / "sweep.svg"
    proc, _ = ncclcheck("bench", "--format", "json", "--plot", str(target), *SMALL)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["bench"]["plot"] == str(target)
    assert target.read_text().lstrip().startswith(("<?xml", "<svg"))


def test_nccl_without_gpus_and_a_malformed_fault_fail_clearly():
    proc, _ = ncclcheck("bench", "--backend", "nccl", "--format", "json")
    check = checks_of(json.loads(proc.stdout))["bench.allreduce"]
    if check["status"] != "fail":
        pytest.skip("this machine has a GPU; tests/gpu covers NCCL")
    assert check["category"] == "cuda" and "--backend gloo" in check["fix"]
    proc, _ = ncclcheck("bench", "--format", "json", fault="melt:1")
    check = checks_of(json.loads(proc.stdout))["bench.allreduce"]
    assert proc.returncode == 1 and check["category"] == "configuration"


def test_a_hung_rank_under_torchrun_is_named_by_rank_zero_within_the_deadline():
    torchrun = [os.path.join(os.path.dirname(sys.executable), "torchrun"), "--standalone",
                "--nproc-per-node", "2"]
    started = time.monotonic()
    proc, tag = ncclcheck("bench", "--format", "json", "--timeout", "14", *SMALL,
                          launcher=torchrun, fault="hang:1@1")
    assert time.monotonic() - started < 14 + 10  # torchrun's own start and stop included
    report = json.loads(proc.stdout)
    check = next(c for c in report["checks"] if c["id"] == "bench.allreduce" and c["rank"] == 0)
    assert check["category"] == "timeout" and check["details"]["ranks"] == [1]
    assert "rank 1 stopped answering" in check["summary"]
    assert processes_tagged(tag) == []


def test_a_rank_that_never_joins_is_named_without_running_the_sweep():
    """Rank 0 alone on a real TCPStore of a 2-rank job: rank 1 never arrives."""
    from types import SimpleNamespace

    import torch.distributed as dist

    from ncclcheck.probes.bench.allreduce import allreduce_check
    from ncclcheck.bench.sweep import absent_result, join_cluster
    from ncclcheck.bench.worker import SweepConfig

    store = dist.TCPStore("127.0.0.1", 0, None, True, wait_for_workers=False)
    session = SimpleNamespace(store=store, rank=0, world_size=2, local_rank=0, host="h")
    started = time.monotonic()
    backend, missing = join_cluster(session, "auto", 0, 1.0)
    assert time.monotonic() - started < 5
    assert (backend, missing) == ("gloo", [1])
    result = absent_result(SweepConfig("gloo", [1024]), 2, missing)
    check = allreduce_check(result, [])
    assert check.status.value == "fail" and "rank 1 never joined" in check.summary


def test_duplicate_gpu_detection_over_a_real_store():
    """The NCCL path's duplicate check, run by three ranks (threads) on a real TCPStore with
    the GPU identities a GPU would give (no GPU here): ranks 0 and 2 share one."""
    import threading

    import torch.distributed as dist

    from ncclcheck.bench.worker import DuplicateGpu, RankSweep, SweepConfig

    store = dist.TCPStore("127.0.0.1", 0, None, True, wait_for_workers=False)
    gpus = {0: "GPU-aaaa", 1: "GPU-bbbb", 2: "GPU-aaaa"}
    raised: dict[int, str] = {}

    class SlowToRecordItsGpu:
        """Rank 0's store: it records its GPU a second late, after the others have counted
        themselves (the interleaving that once let rank 2 miss the duplicate)."""

        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def add(self, key, value):
            if key.startswith("gpu/") and value == 1:
                time.sleep(1.0)
            return self.inner.add(key, value)

    def rank_main(rank: int) -> None:
        client = dist.PrefixStore("bench", dist.TCPStore("127.0.0.1", store.port, None, False))
        if rank == 0:
            client = SlowToRecordItsGpu(client)
        sweep = RankSweep(SweepConfig("nccl", [1024], collective_timeout=10), client, rank, 3,
                          rank, "node0", lambda e: None)
        sweep.outcome.gpu_uuid, sweep.outcome.device = gpus[rank], f"cuda:{rank}"
        try:
            sweep._check_duplicate_gpus()
        except DuplicateGpu as exc:
            raised[rank] = str(exc)

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert sorted(raised) == [0, 2]
    assert raised[0].startswith("ranks 0, 2 on node0 all use GPU GPU-aaaa")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("nranks", [1, 2, 3, 8, 64])
def test_patterns_sum_exactly_to_the_expected_values(dtype, nranks):
    """The correctness check's inputs and expected sums, in real torch tensors."""
    import torch

    from ncclcheck.bench.worker import _expected, _pattern, _tolerance

    count = 1001
    inputs = [_pattern(torch, r, count, getattr(torch, dtype), "cpu") for r in range(nranks)]
    total = inputs[0].clone()
    for tensor in inputs[1:]:
        total += tensor  # accumulated in the dtype itself, as a ring all-reduce does
    diff = (total.float() - _expected(torch, nranks, count, "cpu")).abs()
    assert int((diff > _tolerance(dtype, nranks)).sum()) == 0
    assert _tolerance(dtype, nranks) == 0.0  # every case here is exact
