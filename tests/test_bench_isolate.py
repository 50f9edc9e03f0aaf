"""``bench --isolate``'s pure parts: the rounds, the verdict, the driver, the check, the table,
the heat map's matrix, the pair set-up and draining the slow nodes.

Measurements are modelled (every pair has the busbw its nodes and link allow, times a noise
factor when a test says so); no process is started here. The real pair tests run in
test_bench_isolate_netns.py, test_bench_isolate_slurm.py and test_torchrun_e2e.py.
"""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from ncclcheck.bench.analysis import SweepResult
from ncclcheck.bench.isolate import (EVIDENCE, PairTest, Round, confirmation_round, first_rounds,
                                     isolate, judge, pair, survey_rounds, tournament_rounds)
from ncclcheck.bench.isolate_report import section
from ncclcheck.probes.bench.isolate import isolate_check, not_isolated
from ncclcheck.bench.metrics import SizeRow
from ncclcheck.bench.pairs import node_ranks, pair_bytes, plan_setup
from ncclcheck.bench.plot import pair_matrix
from ncclcheck.cluster.drain import plan_drain
from ncclcheck.model import BenchSection, Category, CheckResult, Report, Status
from ncclcheck.report.bench import bench_table

SCHEMA = json.loads((Path(__file__).parents[1] / "docs" / "report.schema.json").read_text())


def model(slow_nodes=(), slow_links=(), fast=40.0, slow=4.0, noise=0.0, seed=0):
    """A measure function: a pair reaches ``fast`` GB/s unless a node or its link is slow."""
    rng = random.Random(seed)
    calls: list[Round] = []

    def measure(index: int, rnd: Round, share: float = 0.0):
        calls.append(rnd)
        tests = []
        for a, b in rnd.pairs:
            bad = a in slow_nodes or b in slow_nodes or pair(a, b) in slow_links
            busbw = (slow if bad else fast) * (1 - rng.uniform(0, noise))
            tests.append(PairTest(a, b, busbw, index, rnd.reference, 0.01))
        return tests, 1.0
    measure.calls = calls
    return measure


# -- the rounds ---------------------------------------------------------------------------------
@pytest.mark.parametrize("n", range(2, 40))
def test_a_round_never_uses_a_node_twice(n):
    for rnd in survey_rounds(n) + tournament_rounds(n):
        nodes = [v for p in rnd.pairs for v in p]
        assert len(nodes) == len(set(nodes)) and all(0 <= v < n for v in nodes)
        assert all(a < b for a, b in rnd.pairs)


@pytest.mark.parametrize("n", range(2, 40))
def test_the_tournament_meets_every_pair_exactly_once(n):
    rounds = tournament_rounds(n)
    met = [p for rnd in rounds for p in rnd.pairs]
    assert sorted(met) == sorted(itertools.combinations(range(n), 2))
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    assert all(len(r.pairs) == n // 2 for r in rounds)


@pytest.mark.parametrize("n", range(3, 40))
def test_the_two_surveys_give_nodes_two_different_partners(n):
    first, second = survey_rounds(n)
    partners: dict[int, set[int]] = {}
    for a, b in first.pairs + second.pairs:
        partners.setdefault(a, set()).add(b)
        partners.setdefault(b, set()).add(a)
    resting = 2 if n % 2 else 0  # with n odd, one node rests in each survey
    assert sum(1 for v in range(n) if len(partners.get(v, ())) == 2) == n - resting
    assert all(len(partners.get(v, ())) >= 1 for v in range(n))
    assert set(first.pairs).isdisjoint(second.pairs)


def test_two_nodes_have_one_pair_and_modes_are_checked():
    assert [r.pairs for r in survey_rounds(2)] == [((0, 1),)]
    assert survey_rounds(1) == [] and tournament_rounds(1) == []
    with pytest.raises(ValueError, match="unknown isolate mode"):
        first_rounds("racks", 8)


# -- the verdict --------------------------------------------------------------------------------
def _tests(values: dict[tuple[int, int], float], rnd: int = 0, reference: bool = True):
    return [PairTest(a, b, v, rnd, reference) for (a, b), v in values.items()]


def test_a_node_slow_with_every_partner_is_a_suspect_until_confirmed():
    survey = _tests({(0, 1): 40, (2, 3): 4, (4, 5): 41}) + _tests(
        {(1, 2): 39, (3, 4): 4, (0, 5): 40}, 1)
    verdict = judge(6, survey)
    assert verdict.suspects == [3] and verdict.slow_nodes == []
    assert verdict.evidence[3] == 2 < EVIDENCE
    assert verdict.good == [0, 1, 2, 4, 5]
    confirm = confirmation_round(verdict, survey)
    assert confirm.kind == "confirm" and confirm.pairs == ((0, 3),)  # a good node it never met
    verdict = judge(6, survey + _tests({(0, 3): 4}, 2, reference=False))
    assert verdict.slow_nodes == [3] and verdict.settled


def test_a_suspect_fast_with_a_known_good_node_is_cleared():
    survey = _tests({(0, 1): 40, (2, 3): 4, (4, 5): 41, (1, 2): 39, (3, 4): 4, (0, 5): 40})
    verdict = judge(6, survey + _tests({(0, 3): 38}, 2, reference=False))
    assert verdict.slow_nodes == [] and verdict.suspects == [] and 3 in verdict.good
    assert judge(6, survey + _tests({(0, 3): 38}, 2, reference=False), links=False).settled
    # its two slow pairs are now pairs of good nodes: links to retest, not yet named
    assert verdict.pending_links == [(2, 3), (3, 4)]


def test_a_link_is_named_when_slow_twice_between_good_nodes():
    first = _tests({(0, 1): 40, (2, 3): 40, (1, 2): 40, (0, 3): 5})
    verdict = judge(4, first)
    assert verdict.pending_links == [(0, 3)] and verdict.slow_links == []
    assert confirmation_round(verdict, first).pairs == ((0, 3),)
    again = judge(4, first + _tests({(0, 3): 6}, 2, reference=False))
    assert again.slow_links == [(0, 3)] and again.slow_nodes == []
    cleared = judge(4, first + _tests({(0, 3): 39}, 2, reference=False))
    assert cleared.slow_links == [] and cleared.settled


def test_the_median_comes_from_the_first_rounds_only():
    tests = _tests({(0, 1): 40, (2, 3): 40, (1, 2): 40}) + _tests(
        {(0, 3): 1, (1, 3): 1, (0, 2): 1, (1, 2): 1}, 3, reference=False)
    assert judge(4, tests).median_gbps == 40


def test_min_busbw_is_an_absolute_floor_and_a_failed_test_is_slow():
    tests = _tests({(0, 1): 10, (2, 3): 10, (1, 2): 10, (0, 3): 10})
    assert judge(4, tests).settled
    floor = judge(4, tests, min_busbw=20)
    assert floor.cut_gbps == 20 and floor.good == [] and floor.suspects == [0, 1, 2, 3]
    assert confirmation_round(floor, tests) is None  # no known-good node to confirm against
    broken = tests[:3] + [PairTest(0, 3, 0.0, 0, True, 0.0, "RuntimeError: timed out")]
    assert judge(4, broken).pending_links == [(0, 3)]


def test_the_threshold_is_relative_to_the_median():
    tests = _tests({(0, 1): 10, (2, 3): 10, (4, 5): 10, (1, 2): 10, (3, 4): 10, (0, 5): 6.5})
    assert judge(6, tests, threshold=0.7).pending_links == [(0, 5)]
    assert judge(6, tests, threshold=0.6).settled


# -- the driver ---------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [4, 5, 6, 7, 8, 9, 16, 33, 64, 255, 1024])
@pytest.mark.parametrize("culprit", ["first", "middle", "last"])
def test_one_slow_node_is_named_in_three_rounds_whatever_n(n, culprit):
    slow = {"first": 0, "middle": n // 2, "last": n - 1}[culprit]
    iso = isolate("nodes", n, model({slow}, noise=0.1, seed=n))
    assert iso.verdict.slow_nodes == [slow] and iso.verdict.slow_links == []
    assert len(iso.rounds) <= 3 and not iso.stopped


@pytest.mark.parametrize("n", [6, 8, 13, 64, 200])
def test_nothing_slow_names_nothing_in_two_rounds(n):
    iso = isolate("nodes", n, model(noise=0.2, seed=n))
    assert iso.verdict.slow_nodes == [] and iso.verdict.slow_links == []
    assert len(iso.rounds) == 2


def test_several_slow_nodes_take_more_confirmation_rounds_and_all_are_named():
    for n, slow in [(16, {2, 3}), (16, {0, 15}), (64, {5, 6, 7}), (64, {1, 20, 40, 63}),
                    (256, set(range(0, 256, 16)))]:
        iso = isolate("nodes", n, model(slow, noise=0.1))
        assert iso.verdict.slow_nodes == sorted(slow), (n, slow, iso.verdict)
        assert iso.verdict.slow_links == [] and not iso.stopped


def test_links_mode_names_a_slow_link_and_no_node():
    for n in (4, 6, 7, 10):
        measure = model(slow_links={(1, 3)}, noise=0.1)
        iso = isolate("links", n, measure)
        assert iso.verdict.slow_links == [(1, 3)] and iso.verdict.slow_nodes == []
        tournament = tournament_rounds(n)
        assert iso.rounds[:len(tournament)] == tournament
        assert [r.pairs for r in iso.rounds[len(tournament):]] == [((1, 3),)]


def test_links_mode_names_a_slow_node_without_confirmation():
    iso = isolate("links", 8, model({5}, noise=0.1))
    assert iso.verdict.slow_nodes == [5] and iso.verdict.slow_links == []
    assert len(iso.rounds) == 7


def test_nodes_mode_names_no_link_even_one_its_surveys_tested():
    iso = isolate("nodes", 8, model(slow_links={(2, 3)}))
    assert iso.verdict.slow_links == [] and iso.verdict.slow_nodes == [] and iso.verdict.settled
    assert len(iso.rounds) == 2  # a slow pair of good nodes is links mode's business
    assert judge(8, iso.tests, links=True).pending_links == [(2, 3)]


def test_noise_in_the_surveys_costs_nodes_mode_no_round():
    survey = _tests({(0, 1): 40, (2, 3): 4, (4, 5): 41, (6, 7): 12}) + _tests(
        {(1, 2): 39, (3, 4): 4, (5, 6): 38, (0, 7): 40}, 1)
    verdict = judge(8, survey, links=False)
    assert verdict.suspects == [3] and verdict.pending_links == []
    assert len(confirmation_round(verdict, survey).pairs) == 1


def test_the_deadline_stops_the_rounds_and_leaves_suspects_unconfirmed():
    left = iter([100.0, 100.0, 0.5])
    iso = isolate("nodes", 8, model({3}), time_left=lambda: next(left))
    assert len(iso.rounds) == 2 and iso.stopped.startswith("the deadline")
    assert iso.verdict.suspects == [3] and iso.verdict.slow_nodes == []


def test_every_pair_below_the_floor_names_no_node():
    iso = isolate("nodes", 6, model(fast=5.0), min_busbw=10.0)
    assert iso.verdict.slow_nodes == [] and len(iso.verdict.suspects) == 6
    assert iso.stopped == "no known-good node left to confirm against"


# -- the check, the table, the plot, the set-up -------------------------------------------------
HOSTS = [f"gpu{i:02d}" for i in range(6)]


def test_the_check_fails_naming_hosts_with_category_degraded():
    iso = isolate("nodes", 6, model({3}))
    check = isolate_check(iso, HOSTS, 1 << 30)
    assert check.status is Status.FAIL and check.category is Category.DEGRADED
    details = check.details
    assert details["slow_nodes"] == ["gpu03"] and details["slow_links"] == []
    assert details["rounds"] == 3 and len(details["round_log"]) == 3
    assert details["median_busbw_gbps"] == 40 and details["threshold"] == 0.7
    assert {"a", "b", "busbw_gbps", "round", "slow"} <= set(details["pairs"][0])
    assert "gpu03" in check.summary and "drain" in check.fix


def test_the_check_passes_warns_and_skips():
    assert isolate_check(isolate("nodes", 6, model()), HOSTS, 1024).status is Status.PASS
    left = iter([100.0, 100.0, 0.0])
    stopped = isolate("nodes", 6, model({1}), time_left=lambda: next(left))
    warned = isolate_check(stopped, HOSTS, 1024)
    assert warned.status is Status.WARN and warned.details["suspects"] == ["gpu01"]
    assert warned.details["slow_nodes"] == [] and "--timeout" in warned.fix
    skip = not_isolated("every rank runs on one node (a)")
    assert skip.status is Status.SKIP and skip.id == "bench.isolate"


def test_the_table_shows_the_slow_ones_first_then_a_line_per_node():
    iso = isolate("links", 6, model({2}, slow_links={(0, 5)}))
    bench = BenchSection("nccl", 48, "float32", 5, 1, [], 0.0, 0.0, None, HOSTS, None, None,
                         None, isolate=section(iso, HOSTS, 1 << 28))
    text = bench_table(bench.to_dict())
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# isolate links"))
    assert lines[start + 1] == "# SLOW node    gpu02"
    assert lines[start + 2] == "# SLOW link    gpu00 - gpu05"
    per_node = [line for line in lines[start:] if line.startswith("#   gpu")]
    assert len(per_node) == 6 and per_node[2].split()[1:4] == ["gpu02", "5", "5"]
    assert all(line.startswith("#") for line in lines)


def test_the_report_with_isolate_fits_the_schema():
    iso = isolate("nodes", 6, model({3}))
    check = isolate_check(iso, HOSTS, 1024)
    bench = BenchSection("gloo", 6, "float32", 5, 1, [], 0.0, 0.0, None, HOSTS, None, None,
                         None, isolate=section(iso, HOSTS, 1024))
    data = Report([check], {"host": "gpu00", "launcher": "slurm", "python": "3"},
                  bench).to_dict()
    jsonschema.validate(data, SCHEMA)
    assert data["bench"]["isolate"]["slow_nodes"] == ["gpu03"]
    assert "isolate" not in BenchSection("gloo", 1, "float32", 1, 1, [], 0, 0, None, [], None,
                                         None, None).to_dict()


def test_the_heat_map_matrix_is_symmetric_and_keeps_the_lowest_test():
    iso = isolate("links", 4, model(slow_links={(1, 2)}))
    details = {**isolate_check(iso, HOSTS[:4], 1024).details,
               "per_node": section(iso, HOSTS[:4], 1024)["per_node"]}
    hosts, matrix = pair_matrix(details)
    assert hosts == HOSTS[:4]
    assert all(matrix[i][i] is None for i in range(4))
    assert all(matrix[i][j] == matrix[j][i] for i in range(4) for j in range(4))
    assert matrix[1][2] == 4.0 and matrix[0][3] == 40.0


def test_plot_draws_the_curve_and_the_pair_matrix(tmp_path):
    pytest.importorskip("matplotlib")  # the optional `plot` extra
    from ncclcheck.bench.plot import draw
    iso = isolate("nodes", 6, model({3}))
    details = {**isolate_check(iso, HOSTS, 1024).details,
               "per_node": section(iso, HOSTS, 1024)["per_node"]}
    bench = {"backend": "gloo", "world_size": 6, "dtype": "float32",
             "rows": [{"bytes": 1024, "busbw_gbps": 0.1}, {"bytes": 4096, "busbw_gbps": 0.3}]}
    both, curve = tmp_path / "both.png", tmp_path / "curve.png"
    draw(bench, str(both), details)
    draw(bench, str(curve))
    assert both.read_bytes()[:8] == curve.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert both.stat().st_size > curve.stat().st_size  # a second panel


def _sweep(hosts: dict[int, str], error: bool = False) -> SweepResult:
    result = SweepResult("gloo", len(hosts), "float32", 5, 1, [1024, 1 << 20], 10.0)
    result.outcomes = {r: {"host": h, "rows": [], **({"error": {"kind": "timeout"}}
                                                      if error and r == 1 else {})}
                       for r, h in hosts.items()}
    return result


def test_nodes_are_hosts_in_first_rank_order_with_all_their_ranks():
    hosts = {0: "b", 1: "b", 2: "a", 3: "a", 4: "c", 5: "b"}
    assert node_ranks(hosts) == (["b", "a", "c"], [[0, 1, 5], [2, 3], [4]])
    rows = [SizeRow(1024, 256, "float32", 10, 0.1, 0.1, 0), SizeRow(1 << 20, 1, "float32", 10,
                                                                     1.0, 9.5, 0),
            SizeRow(4 << 20, 1, "float32", 10, 1.0, 9.0, 0), SizeRow(16 << 20, 1, "float32",
                                                                     10, 1.0, 5.0, 0)]
    assert pair_bytes(rows) == 4 << 20  # the largest within 10% of the peak
    setup = plan_setup(_sweep(hosts), rows, iters=20, warmup=5, timeout=30)
    assert (setup.nodes, setup.nbytes, setup.iters, setup.warmup) == (
        [[0, 1, 5], [2, 3], [4]], 4 << 20, 5, 2)
    assert plan_setup(_sweep({0: "a", 1: "a"}), rows, 5, 1, 30).startswith("every rank runs")
    assert plan_setup(_sweep(hosts, error=True), rows, 5, 1, 30).startswith("the sweep did")


# -- draining exactly the slow nodes --------------------------------------------------------------
def test_drain_takes_the_slow_nodes_not_the_host_of_rank_0():
    iso = isolate("links", 6, model({4}, slow_links={(0, 1)}))
    check = isolate_check(iso, HOSTS, 1024)
    check.host, check.rank = "gpu00", 0  # as rank 0 reports it in cluster mode
    plans, unplaced = plan_drain(checks=[check])
    assert [p.node for p in plans] == ["gpu04"] and unplaced == []
    assert plans[0].reason.startswith("ncclcheck: bench.isolate: slow node gpu04")
    link_only = isolate_check(isolate("links", 6, model(slow_links={(0, 1)})), HOSTS, 1024)
    link_only.host = "gpu00"
    assert plan_drain(checks=[link_only]) == ([], ["bench.isolate"])


def test_other_checks_still_drain_their_host():
    other = CheckResult("net.mesh", Status.FAIL, "x", {}, "fix", Category.CONNECTION, "n1", 3)
    assert [p.node for p in plan_drain(checks=[other])[0]] == ["n1"]


# -- the command line -----------------------------------------------------------------------------
def ncclcheck(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ncclcheck", *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("args", [["--isolate", "racks"],
                                  ["--isolate", "nodes", "--isolate-threshold", "0"],
                                  ["--isolate", "nodes", "--isolate-threshold", "1"],
                                  ["--isolate", "nodes", "--isolate-threshold", "nan"]])
def test_isolate_options_are_checked_on_the_command_line(args):
    done = ncclcheck("bench", *args, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_standalone_isolate_is_skipped_with_the_reason(clean_env):
    done = ncclcheck("bench", "--backend", "gloo", "--nproc", "2", "--max-bytes", "4K",
                     "--iters", "2", "--warmup", "0", "--isolate", "nodes", "--format", "json",
                     "--timeout", "60")
    doc = json.loads(done.stdout)
    row = next(c for c in doc["checks"] if c["id"] == "bench.isolate")
    assert row["status"] == "skip" and "standalone" in row["summary"], row
    assert done.returncode == 0, done.stderr[-2000:]
