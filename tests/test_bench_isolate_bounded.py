"""``bench --isolate`` within the deadline: the time-bounded pair test (pair_budget.py), each
round's share of the time left, and a pair that cannot finish as the slowest result there is.

Pure: the planner is fed modelled all-reduce times (a latency plus size / bandwidth), the
rounds modelled pair tests; the real pairs over shaped links run in
test_bench_isolate_netns.py.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ncclcheck.bench.isolate import (CONFIRM_ALLOWANCE, PairTest, Round, isolate, judge, pair)
from ncclcheck.bench.isolate_report import isolate_details
from ncclcheck.bench.pair_budget import MIN_TIMED, START_BYTES, BoundedPair
from ncclcheck.bench.pairs import PairSetup, pair_budget
from ncclcheck.model import Category, Status
from ncclcheck.probes.bench.isolate import isolate_check

MIB = 1 << 20
HOSTS = [f"gpu{i:02d}" for i in range(8)]


def run_pair(bounded: BoundedPair, latency: float, gbps: float) -> list[tuple[int, bool]]:
    """Feed ``bounded`` the times of a link of ``gbps`` GB/s with ``latency`` s; its steps."""
    steps = []
    step = bounded.next_step()
    while step is not None:
        steps.append((step.nbytes, step.timed))
        bounded.record(latency + step.nbytes / (gbps * 1e9))
        step = bounded.next_step()
    return steps


# -- the time-bounded pair test ------------------------------------------------------------------
def test_a_healthy_pair_ramps_to_the_whole_message_and_times_every_iteration():
    bounded = BoundedPair(4 * MIB, 4, iters=5, warmup=2, budget_s=10.0)
    steps = run_pair(bounded, 1e-4, 0.6)
    assert steps[0] == (START_BYTES, False)
    assert [n for n, timed in steps if not timed] == [START_BYTES, 256 << 10, MIB, 4 * MIB,
                                                      4 * MIB]  # the ramp, one more warm-up
    assert [n for n, timed in steps if timed] == [4 * MIB] * 5
    m = bounded.result()
    assert m.nbytes == 4 * MIB and m.iters == 5 and not m.reduced
    assert m.time_s == pytest.approx(1e-4 + 4 * MIB / 0.6e9)


def test_a_link_a_thousand_times_slower_is_measured_at_a_smaller_message_within_budget():
    bounded = BoundedPair(4 * MIB, 4, iters=5, warmup=2, budget_s=7.0)
    run_pair(bounded, 2e-4, 0.6e-3)  # 4.8 Mbit/s: one 4 MiB all-reduce alone takes 7 s
    m = bounded.result()
    assert m.reduced and m.nbytes < 4 * MIB and m.iters >= MIN_TIMED
    assert m.spent_s <= 7.0
    assert m.nbytes / m.time_s / 1e9 == pytest.approx(0.6e-3, rel=0.05)  # still the link's rate


def test_fewer_iterations_when_only_the_whole_message_fits_a_few_times():
    bounded = BoundedPair(4 * MIB, 4, iters=5, warmup=1, budget_s=0.8)
    run_pair(bounded, 0.0, 4 * MIB / 0.15 / 1e9)  # 0.15 s per whole message, 0.2 s the ramp
    m = bounded.result()
    assert m.nbytes == 4 * MIB and m.iters == 4 and m.reduced and m.spent_s <= 0.8


def test_a_first_step_longer_than_the_budget_still_gives_one_figure_and_nothing_none():
    bounded = BoundedPair(4 * MIB, 4, iters=5, warmup=1, budget_s=0.5)
    assert run_pair(bounded, 0.0, 1e-4) == [(START_BYTES, False)]  # 0.66 s: no second step
    m = bounded.result()
    assert (m.nbytes, m.iters, m.reduced) == (START_BYTES, 1, True)
    assert BoundedPair(4 * MIB, 4, 5, 1, 1.0).result() is None
    with pytest.raises(RuntimeError):
        BoundedPair(4 * MIB, 4, 5, 1, 1.0).record(0.1)


def test_a_message_smaller_than_the_first_step_is_measured_whole():
    bounded = BoundedPair(4096, 2, iters=3, warmup=1, budget_s=1.0)
    steps = run_pair(bounded, 1e-5, 1.0)
    assert {n for n, _ in steps} == {4096} and bounded.result().iters == 3


@settings(max_examples=200, deadline=None)
@given(target=st.integers(1, 1 << 31), latency=st.floats(0, 0.05),
       gbps=st.floats(1e-5, 500), budget=st.floats(0.01, 60), iters=st.integers(1, 20),
       warmup=st.integers(0, 5))
def test_a_pair_never_spends_more_than_its_budget_and_one_first_step(target, latency, gbps,
                                                                    budget, iters, warmup):
    bounded = BoundedPair(target, 4, iters, warmup, budget)
    steps = run_pair(bounded, latency, gbps)
    first = latency + steps[0][0] / (gbps * 1e9)
    assert bounded.spent_s <= budget + first + 1e-9
    m = bounded.result()
    assert m is not None and m.nbytes % 4 == 0 and 1 <= m.iters <= iters
    assert sum(1 for _, timed in steps if timed) == (m.iters if any(t for _, t in steps) else 0)


def test_the_budget_is_the_share_less_set_up_never_below_a_fair_healthy_test():
    setup = PairSetup([[0], [1]], ["a", "b"], 4 * MIB, "float32", 5, 2, timeout=40.0,
                      healthy_s=0.1)
    assert pair_budget(setup, 12.0, 1.0) == 11.0
    assert pair_budget(setup, 100.0, 1.0) == 40.0               # the collective timeout
    assert pair_budget(setup, 1.0, 1.0) == pytest.approx(3.0 * 9 * 0.1)  # fair to healthy
    assert pair_budget(PairSetup([[0], [1]], ["a", "b"], 4, "float32", 5, 2, 40.0), 0.1,
                       1.0) == 0.5


# -- the rounds' shares ---------------------------------------------------------------------------
def modelled(slow_links=(), failed_links=(), fast=40.0, slow=0.04):
    shares: list[float] = []

    def measure(index: int, rnd: Round, share: float):
        shares.append(share)
        tests = []
        for a, b in rnd.pairs:
            if pair(a, b) in failed_links:
                tests.append(PairTest(a, b, 0.0, index, rnd.reference, 0.0,
                                      "could not finish an all-reduce within its 9 s"))
            else:
                busbw = slow if pair(a, b) in slow_links else fast
                tests.append(PairTest(a, b, busbw, index, rnd.reference, 0.01,
                                      reduced=busbw == slow, nbytes=1 << 16, iters=2))
        return tests, 1.0
    measure.shares = shares
    return measure


def test_each_round_gets_its_share_of_the_time_left():
    measure = modelled(slow_links={(1, 4)})
    iso = isolate("links", 6, measure, time_left=lambda: 60.0)
    # 5 tournament rounds then a confirmation: the first gets 60 / (5 + the allowance)
    assert measure.shares[0] == pytest.approx(60.0 / (5 + CONFIRM_ALLOWANCE))
    assert measure.shares[-1] == pytest.approx(60.0 / (1 + CONFIRM_ALLOWANCE))
    assert iso.verdict.slow_links == [(1, 4)]


# -- a pair that cannot finish -----------------------------------------------------------------
def test_a_pair_that_never_finished_is_named_when_no_round_can_retest_it():
    left = iter([100.0] * 5 + [0.5])  # the deadline leaves no confirmation round
    iso = isolate("links", 6, modelled(failed_links={(1, 4)}), time_left=lambda: next(left))
    assert iso.stopped.startswith("the deadline")
    assert iso.verdict.slow_links == [(1, 4)] and iso.verdict.slow_nodes == []
    check = isolate_check(iso, HOSTS, 4 * MIB)
    assert check.status is Status.FAIL and check.category is Category.DEGRADED
    assert "gpu01-gpu04 (its pair could not finish: could not finish an all-reduce" in \
        check.summary
    assert check.details["unfinished"] == [["gpu01", "gpu04"]]


def test_a_failed_pair_is_retested_when_there_is_time_and_named_again():
    iso = isolate("links", 6, modelled(failed_links={(1, 4)}))
    assert [r.kind for r in iso.rounds][-1] == "confirm"
    assert iso.verdict.slow_links == [(1, 4)]


def test_nodes_mode_names_a_link_whose_pair_failed_but_not_one_merely_slow():
    failed = isolate("nodes", 6, modelled(failed_links={(1, 2)}))
    assert failed.verdict.slow_links == [(1, 2)] and failed.verdict.slow_nodes == []
    slow = isolate("nodes", 6, modelled(slow_links={(1, 2)}))
    assert slow.verdict.slow_links == [] and isolate_check(slow, HOSTS, 1).status is Status.PASS


def test_a_link_slow_once_and_never_retested_warns_and_never_passes():
    left = iter([100.0] * 5 + [0.5])
    iso = isolate("links", 6, modelled(slow_links={(0, 3)}), time_left=lambda: next(left))
    assert iso.verdict.suspect_links == [(0, 3)] and iso.verdict.slow_links == []
    check = isolate_check(iso, HOSTS, 4 * MIB)
    assert check.status is Status.WARN and "link gpu00-gpu03" in check.summary
    assert check.details["suspect_links"] == [["gpu00", "gpu03"]]


def test_a_node_whose_pairs_all_failed_with_two_good_partners_is_named_at_the_end():
    tests = [PairTest(0, 1, 40, 0), PairTest(2, 3, 0, 0, error="timed out"),
             PairTest(4, 5, 40, 0), PairTest(1, 2, 40, 1), PairTest(3, 4, 0, 1, error="timed out"),
             PairTest(0, 5, 40, 1)]
    assert judge(6, tests, links=False).suspects == [3]
    final = judge(6, tests, links=False, final=True)
    assert final.slow_nodes == [3] and final.slow_links == []
    one = judge(6, tests[:3], links=False, final=True)  # one failed pair: the node or the link?
    assert 3 not in one.slow_nodes


def test_reduced_pairs_are_reported_as_such():
    iso = isolate("links", 6, modelled(slow_links={(1, 4)}))
    details = isolate_details(iso, HOSTS, 4 * MIB)
    cut = [p for p in details["pairs"] if p.get("reduced")]
    assert cut and all(p["bytes"] == 1 << 16 and p["iters"] == 2 for p in cut)
    assert details["reduced"] == len(cut)
    summary = isolate_check(iso, HOSTS, 4 * MIB).summary
    assert f"{len(cut)} pairs measured a smaller message or fewer iterations" in summary
