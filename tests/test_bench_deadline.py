"""A gate never passes on nothing: a sweep the deadline ended before it measured any size is an
error (exit 1) that says what was not measured, why, and the --timeout to try; a sweep cut
short after some sizes warns and names the sizes left out.

The first tests run the real command (Gloo workers, real deadline); the others feed the check
outcomes of the shape the workers send.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ncclcheck.bench.analysis import SweepResult, job_rows
from ncclcheck.bench.cut_short import not_measured, still_starting, suggest_timeout
from ncclcheck.probes.bench.allreduce import allreduce_check

LAUNCHER_PREFIXES = ("RANK", "WORLD_SIZE", "LOCAL_", "NODE_RANK", "GROUP_", "MASTER_", "SLURM",
                     "OMPI_", "PMI_", "MPI_LOCAL", "PET_", "JSM_", "LSB_", "TORCHELASTIC", "ROLE_",
                     "NCCLCHECK_BENCH_FAULT")
SIZES = [1024, 16384, 262144, 4194304]


def _ncclcheck(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_PREFIXES)}
    return subprocess.run([sys.executable, "-m", "ncclcheck", *args], capture_output=True,
                          text=True, env=env, timeout=60)


def _allreduce(proc: subprocess.CompletedProcess) -> dict:
    report = json.loads(proc.stdout)
    return next(c for c in report["checks"] if c["id"] == "bench.allreduce")


@pytest.mark.slow
@pytest.mark.parametrize("argv", [("run", "--timeout", "2"), ("bench", "--timeout", "1")],
                         ids=["run", "bench"])
def test_a_sweep_that_measured_nothing_is_an_error_with_the_longer_timeout(argv):
    proc = _ncclcheck(*argv, "--format", "json")
    assert proc.returncode == 1, proc.stderr
    check = _allreduce(proc)
    assert check["status"] == "error", check
    assert check["summary"].startswith("nothing measured: the all-reduce sweep completed 0 of")
    assert f"--timeout {argv[2]}" in check["summary"]
    assert check["category"] == "timeout"
    assert "--timeout 60" in check["fix"], check["fix"]
    assert check["details"]["sizes_completed"] == 0
    assert len(check["details"]["not_measured"]) == check["details"]["sizes_planned"] > 0
    assert json.loads(proc.stdout)["status"] == "fail"


@pytest.mark.slow
def test_the_table_says_error_and_the_fix():
    proc = _ncclcheck("bench", "--timeout", "1")
    assert proc.returncode == 1, proc.stderr
    assert "ERROR     bench.allreduce" in proc.stdout
    assert "nothing measured" in proc.stdout and "--timeout 60" in proc.stdout
    assert "Result: FAIL" in proc.stdout


def _row(nbytes: int, time_s: float) -> dict:
    return {"bytes": nbytes, "count": nbytes // 4, "time_s": time_s, "lag_s": 1e-6,
            "wrong": 0, "input_wrong": 0}


def _result(rows: list[dict], *, cut_short: bool = True, **kw) -> SweepResult:
    result = SweepResult("gloo", 2, "float32", 10, 3, list(SIZES), 5.0, **kw)
    result.outcomes = {r: {"rank": r, "host": "h", "rows": rows, "error": None,
                           "cut_short": cut_short} for r in range(2)}
    return result


def test_ranks_that_reported_no_size_before_the_deadline_are_an_error():
    result = _result([], budget_s=1.4)
    check = allreduce_check(result, job_rows(result), timeout=2, quick=True)
    assert check.status.value == "error" and check.category.value == "timeout"
    assert "0 of 4 sizes" in check.summary and "before its first size (1 KB)" in check.summary
    assert "in the 1.4 s it had of --timeout 2" in check.summary
    assert "--timeout 60 (this run had 2)" in check.fix and "--no-bench" in check.fix
    assert check.details["not_measured"] == SIZES and check.details["suggested_timeout_s"] == 60


def test_ranks_torn_down_while_starting_are_a_deadline_error_not_a_hang():
    result = _result([], torn_down=[0, 1])
    result.outcomes = {}
    assert still_starting(result)
    check = allreduce_check(result, [], timeout=90)
    assert check.status.value == "error"
    assert "ranks 0, 1 were still starting" in check.summary
    assert "--timeout 180 (this run had 90)" in check.fix  # twice, rounded to a minute
    assert "stuck forming the process group" in check.fix and "--no-bench" not in check.fix


@pytest.mark.parametrize("kw", [{"progress": {0: 0, 1: 2}}, {"exited": {1: 3}},
                                {"not_joined": [1]}])
def test_a_rank_that_began_a_size_died_or_never_joined_is_still_a_failure(kw):
    result = _result([], torn_down=[0, 1] if "progress" in kw else [], **kw)
    result.outcomes = {0: result.outcomes[0]}
    assert not still_starting(result)
    assert allreduce_check(result, [], timeout=10).status.value == "fail"


def test_a_rank_error_before_the_first_size_is_still_its_failure():
    result = _result([])
    result.outcomes[1]["error"] = {"kind": "connection", "message": "Connection refused",
                                   "step": -1, "bytes": None}
    check = allreduce_check(result, [], timeout=10)
    assert check.status.value == "fail" and check.category.value == "connection"


def test_a_sweep_cut_short_after_some_sizes_warns_and_names_what_was_left_out():
    result = _result([_row(1024, 1e-3), _row(16384, 2e-3)])
    rows = job_rows(result)
    check = allreduce_check(result, rows, timeout=4)
    assert check.status.value == "warn" and check.category.value == "timeout"
    assert ("correct on 2 of 4 sizes; the deadline stopped the sweep after 16 KB, so 256 KB, "
            "4 MB were not measured") in check.summary
    assert check.details["not_measured"] == [262144, 4194304]
    suggested = check.details["suggested_timeout_s"]
    assert f"Raise --timeout to about {suggested} (this run had 4" in check.fix
    assert "--max-bytes (now 4 MB)" in check.fix
    assert "--max-bytes" not in allreduce_check(result, rows, timeout=4, quick=True).fix


def test_the_suggested_timeout_grows_with_what_the_left_out_sizes_need():
    rows_fast = job_rows(_result([_row(1024, 1e-4), _row(16384, 2e-4)]))
    rows_slow = job_rows(_result([_row(1024, 1e-3), _row(16384, 1e-1)]))
    fast = suggest_timeout(_result([]), rows_fast, 4)
    slow = suggest_timeout(_result([]), rows_slow, 4)
    assert fast == 10  # 1.5 x 4, rounded up to ten seconds
    # 100 ms at 16 KB on a ~0.16 MB/s line: 4 MB alone takes ~26 s x 15 runs
    assert slow > 300 and slow % 60 == 0
    assert not_measured(_result([]), rows_fast) == [262144, 4194304]


def test_a_sweep_that_measured_every_size_passes_and_suggests_nothing():
    result = _result([_row(s, 1e-3) for s in SIZES], cut_short=False)
    check = allreduce_check(result, job_rows(result), timeout=4)
    assert check.status.value == "pass" and "suggested_timeout_s" not in check.details


# -- the pair tests of --isolate and the node-to-node mesh ------------------------------------
def _failed_pairs(n: int):
    from ncclcheck.bench.isolate import PairTest, isolate
    error = "could not finish an all-reduce within its 0.5 s (_Cut: the pair's time ran out)"

    def measure(index, rnd, share):
        return [PairTest(a, b, 0.0, index, rnd.reference, 0.0, error) for a, b in rnd.pairs], 1.0
    return isolate("nodes", n, measure, time_left=lambda: 0.1)


def test_pair_tests_none_of_which_finished_are_an_error_not_slow_nodes():
    from ncclcheck.probes.bench.isolate import isolate_check
    hosts = ["n0", "n1", "n2", "n3"]
    iso = _failed_pairs(4)
    check = isolate_check(iso, hosts, 1 << 20, timeout=20)
    assert check.status.value == "error" and check.category.value == "timeout"
    assert check.summary.startswith(f"nothing measured: none of the {len(iso.tests)} pair tests "
                                    "of 1 MB finished within its share of --timeout 20")
    assert "--timeout 60 (this run had 20)" in check.fix
    assert check.details["suggested_timeout_s"] == 60


def test_pair_tests_of_which_some_finished_are_still_judged():
    from ncclcheck.bench.isolate import PairTest, isolate
    from ncclcheck.probes.bench.isolate import isolate_check

    def measure(index, rnd, share):
        return [PairTest(a, b, 0.0, index, rnd.reference, 0.0, "timed out") if 3 in (a, b)
                else PairTest(a, b, 40.0, index, rnd.reference, 0.01) for a, b in rnd.pairs], 1.0
    iso = isolate("nodes", 4, measure)
    check = isolate_check(iso, ["n0", "n1", "n2", "n3"], 1 << 20, timeout=20)
    assert check.status.value == "fail" and "n3" in check.summary


def test_a_mesh_that_tested_no_link_is_an_error_and_one_that_tested_some_warns():
    from ncclcheck.network.mesh import Attempt, Endpoint, MeshOutcome
    from ncclcheck.probes.net.mesh import mesh_result
    me = Endpoint(0, "node0", "10.0.0.5", 4000, "n")
    alone = MeshOutcome(me, {0: me}, {0: "node0", 4: "node1", 8: "node2"})
    check = mesh_result(alone, timeout=45)
    assert check.status.value == "error" and check.category.value == "timeout"
    assert "nothing measured: no link tested" in check.summary and "[4, 8]" in check.summary
    assert "--timeout 90 (this run had 45)" in check.fix
    other = Endpoint(4, "node1", "10.0.0.6", 4001, "n")
    some = MeshOutcome(me, {0: me, 4: other}, {0: "node0", 4: "node1", 8: "node2"})
    some.attempts = [Attempt(0, "node0", 4, "node1", "10.0.0.6", 4001, "ok", 0.01)]
    assert mesh_result(some, timeout=45).status.value == "warn"
