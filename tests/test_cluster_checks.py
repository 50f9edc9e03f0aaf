"""The gather-only checks and the per-check aggregation, on identities and results as ranks
announce them. Pure functions: versions that differ between nodes cannot be produced on one
machine with one environment, so those cases are given as data."""

from __future__ import annotations

from ncclcheck.cluster.aggregate import aggregate, by_host, rank_ranges
from ncclcheck.cluster.membership import Gathered, processes
from ncclcheck.probes.cluster import job_checks as cluster_checks
from ncclcheck.cluster.expect import Expectation, claimed_rank, expectation
from ncclcheck.launchers import read_layout
from ncclcheck.model import Category, CheckResult, Status, failed, passed

VERSIONS = {"python": "3.11.7", "torch": "2.4.0+cu121", "cuda": "12.1", "nccl": "2.20.5",
            "driver": "550.54.15"}


def member(rank: int, host: str, local_rank: int, slot: int | None = None, **over) -> dict:
    data = {"rank": rank, "host": host, "local_rank": local_rank, "node_rank": int(host[-1]),
            "world_size": 8, "settings": {"WORLD_SIZE": "8", "MASTER_ADDR": "node0",
                                           "MASTER_PORT": "29500"},
            "versions": dict(VERSIONS), "slot": slot if slot is not None else rank + 1}
    data.update(over)
    return data


def job(members: list[dict], reported: set[int] | None = None) -> Gathered:
    slots = {m["slot"] for m in members} if reported is None else reported
    return Gathered(8, members, slots, local_world_size=4)


def healthy() -> list[dict]:
    return [member(r, f"node{r // 4}", r % 4) for r in range(8)]


def by_id(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.id: r for r in results}


def test_rank_ranges_and_host_grouping():
    assert rank_ranges([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"
    assert rank_ranges([3]) == "3"
    assert by_host([("node3", r) for r in range(24, 32)]) == "node3: ranks 24-31"
    assert by_host([("b", 5), ("a", 1), ("a", 2)]) == "a: ranks 1-2; b: rank 5"
    assert by_host([("node1", 4), ("node2", 8)], scope="node") == "node1, node2"
    many = by_host([(f"n{i}", i) for i in range(10)], limit=3)
    assert many == "n0: rank 0; n1: rank 1; n2: rank 2 and 7 more hosts"


def test_healthy_job_passes_every_cluster_check():
    results = cluster_checks(job(healthy()))
    assert [r.status for r in results] == [Status.PASS] * 7
    assert by_id(results)["cluster.hosts"].summary == "2 hosts, 4 ranks each"


def test_versions_name_the_odd_node_out():
    members = [member(r, f"node{r // 4}", r % 4) for r in range(12)]
    for m in members:
        if m["host"] == "node1":
            m["versions"]["nccl"] = "2.18.1"
    gathered = Gathered(12, members, {m["slot"] for m in members}, 4)
    result = by_id(cluster_checks(gathered))["cluster.versions"]
    assert result.status == Status.FAIL and result.category == Category.VERSION_MISMATCH
    assert result.summary == ("versions differ between nodes: NCCL 2.18.1 on node1 but 2.20.5 "
                              "elsewhere")
    assert result.details["odd_hosts"] == ["node1"]
    assert "NCCL 2.20.5" in result.fix


def test_the_library_reported_nccl_version_wins_over_what_ranks_announced():
    """Every rank announced NCCL 2.20.5 (torch's view when it joined), but node2's libnccl
    itself answered 2.18.1 in its nccl.version check: that node is named."""
    members = [member(r, f"node{r // 4}", r % 4) for r in range(12)]
    gathered = Gathered(12, members, {m["slot"] for m in members}, 4,
                        nccl_by_host={"node0": "2.20.5", "node1": "2.20.5", "node2": "2.18.1"})
    result = by_id(cluster_checks(gathered))["cluster.versions"]
    assert result.status == Status.FAIL and result.details["odd_hosts"] == ["node2"]
    assert members[8]["versions"]["nccl"] == "2.20.5"  # the announcements are left as they were


def test_two_nodes_tie_takes_rank_0s_node_as_the_reference():
    members = healthy()
    for m in members[4:]:
        m["versions"]["torch"] = "2.3.1+cu121"
    result = by_id(cluster_checks(job(members)))["cluster.versions"]
    assert result.details["odd_hosts"] == ["node1"]


def test_duplicate_and_out_of_range_ranks():
    members = healthy()
    members[5]["rank"] = 4  # node1 local 1 claims rank 4 too; rank 5 is then missing
    members.append(member(9, "node1", 3, slot=20))
    results = by_id(cluster_checks(job(members)))
    ids = results["cluster.rank_ids"]
    assert ids.status == Status.FAIL and ids.category == Category.RANK_MISMATCH
    assert "rank 4 is claimed by 2 processes (node1 local rank 0, node1 local rank 1)" in ids.summary
    assert "node1: rank 9 outside 0..7" in ids.summary
    assert results["cluster.reported"].details["missing_ranks"] == [5]


def test_missing_rank_is_placed_on_the_node_it_should_be_on():
    members = [m for m in healthy() if m["rank"] != 6]
    result = by_id(cluster_checks(job(members)))["cluster.reported"]
    assert result.category == Category.TIMEOUT
    assert "rank 6 never connected (expected on node1 (node 1))" in result.summary
    whole_node = [m for m in healthy() if m["rank"] < 4]
    result = by_id(cluster_checks(job(whole_node)))["cluster.reported"]
    assert "ranks 4-7 never connected (expected on node 1, from which no rank connected)" \
        in result.summary


def test_settings_differ_names_the_ranks_and_the_fix():
    members = healthy()
    for m in members[4:]:
        m["settings"]["NCCL_IB_HCA"] = "mlx5_0"
    result = by_id(cluster_checks(job(members)))["cluster.settings"]
    assert result.status == Status.FAIL and result.category == Category.CONFIGURATION
    assert result.summary == ("settings differ between ranks: NCCL_IB_HCA='mlx5_0' on node1: "
                              "ranks 4-7 but unset on rank 0 (node0)")
    assert "unset NCCL_IB_HCA" in result.fix


def test_uneven_hosts():
    members = [m for m in healthy() if m["rank"] != 7] + [member(7, "node2", 0)]
    result = by_id(cluster_checks(job(members)))["cluster.hosts"]
    assert result.status == Status.FAIL
    assert result.summary == ("hosts run different numbers of ranks: node1 runs 3, node2 runs 1, "
                              "the others 4")
    assert result.details["ranks_per_host"] == {"node0": 4, "node1": 3, "node2": 1}


def test_aggregate_one_row_per_check_with_failing_ranks_by_host():
    results = []
    for r in range(32):
        host = f"node{r // 8}"
        if host == "node3":
            res = failed("ranks.rank", f"rank {r} bad", "fix it", Category.RANK_MISMATCH)
        else:
            res = passed("ranks.rank", f"rank {r} ok")
        res.host, res.rank = host, r
        results.append(res)
    for n in range(4):
        res = passed("net.interfaces", "eth0 up")
        res.host, res.rank = f"node{n}", n * 8
        results.append(res)
    rows = by_id(aggregate(results, {"ranks": "rank", "net": "node"}))
    row = rows["ranks.rank"]
    assert row.status == Status.FAIL
    assert row.host == "node3: ranks 24-31"
    assert "[fail on 8 of 32 ranks (node3: ranks 24-31)]" in row.summary
    assert row.details["counts"] == [{"status": "fail", "count": 8}, {"status": "pass", "count": 24}]
    net = rows["net.interfaces"]
    assert net.summary == "eth0 up [pass on all 4 nodes]"
    assert net.to_dict()["details"]["counts"] == [{"status": "pass", "count": 4}]


def motivating(order: list[int]) -> Gathered:
    """2 nodes x 4 processes, every one told WORLD_SIZE=4, run with --nodes 2 --gpus-per-node 4."""
    members = [member(r, f"node{r // 4}", r % 4, slot=i + 1, world_size=4,
                      member=f"node{r // 4}/{100 + r}/n") for i, r in enumerate(order)]
    expect = Expectation(4, "WORLD_SIZE", 8, "--nodes 2 x --gpus-per-node 4", 2, 4)
    return Gathered(4, members, {m["slot"] for m in members}, 4, expect=expect)


def test_motivating_launch_names_ranks_4_to_7_and_proposes_8_whatever_the_order():
    verdicts = []
    for order in (list(range(8)), list(range(7, -1, -1))):
        results = by_id(cluster_checks(motivating(order)))
        ids, world = results["cluster.rank_ids"], results["cluster.world_size"]
        assert "node1: ranks 4-7 outside 0..3 (WORLD_SIZE=4 on rank 0)" in ids.summary
        assert ids.details["outside_ranks"] == [4, 5, 6, 7]
        assert world.status == Status.FAIL and world.category == Category.RANK_MISMATCH
        assert world.summary == ("8 processes on 2 hosts joined a job declared as WORLD_SIZE=4 "
                                 "(--nodes 2 x --gpus-per-node 4 = 8): the world size must be 8")
        assert "WORLD_SIZE=8" in world.fix and "Trainer(num_nodes=2, devices=4)" in world.fix
        assert "world_size()" in world.fix
        assert results["cluster.reported"].status == Status.PASS  # nobody ran and is missing
        verdicts.append({r.id: (r.status, r.summary) for r in results.values()})
    assert verdicts[0] == verdicts[1]


def test_every_process_is_listed_once_with_what_is_wrong_with_its_rank():
    members = [member(0, "node0", 0, slot=1), member(1, "node0", 1, slot=2),
               member(1, "node0", 2, slot=3), member(-1, "node1", 0, slot=4),
               member(9, "node1", 1, slot=5), member(3, "node1", 2, slot=6)]
    gathered = Gathered(4, members, {1, 2, 3, 4, 5}, 2)
    listed = processes(gathered)
    assert sorted(p["slot"] for p in listed) == [1, 2, 3, 4, 5, 6]
    problems = {p["slot"]: p["problems"] for p in listed}
    assert problems == {1: [], 2: ["duplicate"], 3: ["duplicate"], 4: ["negative"],
                        5: ["outside"], 6: ["not_reported"]}
    results = by_id(cluster_checks(gathered))
    ids = results["cluster.rank_ids"]
    assert "rank 1 is claimed by 2 processes" in ids.summary
    assert "node1: rank -1 negative" in ids.summary and "node1: rank 9 outside 0..3" in ids.summary
    reported = results["cluster.reported"]
    assert reported.category == Category.RANK_CRASHED
    assert reported.details["missing_ranks"] == [2, 3]  # 2 never claimed, 3 never reported
    assert "rank 2 never connected" in reported.summary


def test_expectation_reads_the_launch_not_just_world_size():
    plain = {"RANK": "-1", "WORLD_SIZE": "4", "MASTER_ADDR": "h", "MASTER_PORT": "1"}
    layout, _ = read_layout(plain)
    assert claimed_rank(layout, plain) == -1  # rejected by the reader, still claimed
    assert expectation(layout, plain, 2, 4).slots == 8
    assert expectation(layout, plain).slots == 4
    slurm = {"SLURM_PROCID": "5", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "8", "WORLD_SIZE": "4"}
    layout, _ = read_layout(slurm)
    got = expectation(layout, slurm)
    assert (got.declared, got.declared_from, got.launch, got.launch_from) == (
        4, "WORLD_SIZE", 8, "SLURM_NTASKS")
    torchrun = {"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "WORLD_SIZE": "4",
                "LOCAL_WORLD_SIZE": "4", "GROUP_WORLD_SIZE": "2"}
    layout, _ = read_layout(torchrun)
    assert expectation(layout, torchrun).launch == 8
    mpi = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "6"}
    layout, _ = read_layout(mpi)
    assert expectation(layout, mpi).launch == 6


def test_the_job_checks_do_not_depend_on_arrival_order():
    """The same processes reaching the store in another order (other slots) get the same
    job-wide verdict, word for word: duplicates are named by where they run, not by who came
    first."""
    placed = [(0, "node0", 0), (1, "node0", 2), (1, "node0", 1), (5, "node1", 0), (-1, "node1", 1),
              (2, "node1", 0)]

    def verdict(order: list[int]) -> list[tuple]:
        members = [member(*placed[i], slot=slot, pid=100 + i)
                   for slot, i in enumerate(order, start=1)]
        gathered = Gathered(4, members, {m["slot"] for m in members}, 2)
        return [(c.id, c.status, c.summary, c.details.get("where")) for c in cluster_checks(gathered)]

    assert verdict([0, 1, 2, 3, 4]) == verdict([4, 3, 2, 1, 0])
