"""Folding many ranks' results: passing ranks grouped per check, every other result kept per
rank, the same job report whatever order the nodes' folds arrive in."""

from __future__ import annotations

import json
import random

from hypothesis import given
from hypothesis import strategies as st

from ncclcheck.cluster.aggregate import rows
from ncclcheck.cluster.fold import Fold, fold, merge
from ncclcheck.cluster.ranges import parse_ranges, rank_ranges
from ncclcheck.model import Category, Report, failed, passed, skipped

PER_NODE, NODES = 4, 6


def results(rank: int) -> list:
    """What one rank reports: its own wording for ranks.rank, a failure on ranks 9 and 17."""
    made = [passed("ranks.rank", f"rank {rank} is within 0..23"),
            passed("ranks.master", "rendezvous at node0:29500")]
    if rank in (9, 17):
        made.append(failed("ranks.local_rank", f"local rank {rank % PER_NODE} has no GPU",
                           "fix it", Category.RANK_MISMATCH))
    else:
        made.append(passed("ranks.local_rank", "local rank within range"))
    if rank % PER_NODE == 0:
        made.append(skipped("net.mesh", "one node"))
    for result in made:
        result.host, result.rank = f"node{rank // PER_NODE}", rank
    return made


def node_fold(node: int, per_rank: bool = False) -> Fold:
    """A node leader's fold, sent over the store as JSON."""
    folded = fold([r for rank in range(node * PER_NODE, (node + 1) * PER_NODE)
                   for r in results(rank)], per_rank)
    return Fold.from_dict(json.loads(json.dumps(folded.to_dict())))


def test_passing_ranks_are_grouped_and_the_rest_is_listed_per_rank():
    folded = merge([node_fold(n) for n in range(NODES)])
    entries = [c.to_dict() for c in folded.entries()]
    grouped = [(c["id"], c["ranks"], c["hosts"]) for c in entries if c.get("ranks")]
    assert grouped == [("ranks.rank", "0-23", 6), ("ranks.master", "0-23", 6),
                       ("ranks.local_rank", "0-8, 10-16, 18-23", 6)]
    listed = [(c["id"], c["status"], c["host"], c["rank"]) for c in entries if not c.get("ranks")]
    assert listed == [("ranks.local_rank", "fail", "node2", 9),
                      ("ranks.local_rank", "fail", "node4", 17)] + [
        ("net.mesh", "skip", f"node{n}", n * PER_NODE) for n in range(NODES)]
    rank_entry = next(c for c in entries if c["id"] == "ranks.rank")
    assert rank_entry["summary"] == "rank 0 is within 0..23"  # the lowest rank's wording
    assert rank_entry["host"] is None and rank_entry["rank"] is None
    report = Report(folded.entries())
    assert report.status == "fail" and report.exit_code() == 1


def test_the_same_report_whatever_order_the_nodes_arrive_in():
    scopes = {"ranks": "rank", "net": "node"}
    expected = merge([node_fold(n) for n in range(NODES)])
    order = list(range(NODES))
    for seed in range(3):
        random.Random(seed).shuffle(order)
        got = merge([node_fold(n) for n in order])
        assert [c.to_dict() for c in got.entries()] == [c.to_dict() for c in expected.entries()]
        assert [r.to_dict() for r in rows(got, scopes)] == [r.to_dict() for r in rows(expected, scopes)]


def test_rows_count_every_rank_and_say_whose_wording_they_show():
    table = {r.id: r for r in rows(merge([node_fold(n) for n in range(NODES)]),
                                   {"ranks": "rank", "net": "node"})}
    assert table["ranks.local_rank"].summary.endswith(
        "[fail on 2 of 24 ranks (node2: rank 9; node4: rank 17)]")
    assert table["ranks.local_rank"].details["counts"] == [{"status": "fail", "count": 2},
                                                           {"status": "pass", "count": 22}]
    assert table["ranks.rank"].summary == ("rank 0 is within 0..23 [pass on all 24 ranks; "
                                           "as seen from node0 rank 0]")
    assert table["ranks.master"].summary == "rendezvous at node0:29500 [pass on all 24 ranks]"
    assert table["net.mesh"].summary == "one node [skip on all 6 nodes]"


def test_per_rank_keeps_every_result_in_rank_order():
    folded = merge([node_fold(n, per_rank=True) for n in reversed(range(NODES))], per_rank=True)
    entries = folded.entries()
    assert len(entries) == sum(len(results(r)) for r in range(NODES * PER_NODE))
    assert [c.rank for c in entries] == sorted(c.rank for c in entries)
    assert all(c.ranks is None for c in entries)


@given(st.lists(st.integers(-3, 60), max_size=40))
def test_ranges_read_back(ranks):
    assert parse_ranges(rank_ranges(ranks)) == sorted(set(ranks))
