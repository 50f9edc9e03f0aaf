"""--on-fail drain: which nodes, with what reason, and a real drain through Slurm."""

from __future__ import annotations


import pytest

from ncclcheck.cluster.drain import drain_failing_nodes, drain_reason, plan_drain
from ncclcheck.model import Category, CheckResult, Status, errored, failed, passed


def _fail(check_id: str, summary: str, host: str | None = None, rank: int | None = None,
          **details) -> CheckResult:
    result = failed(check_id, summary, "fix it", Category.INTERFACE, **details)
    result.host, result.rank = host, rank
    return result


IFNAME = "NCCL_SOCKET_IFNAME=eth9 names nothing"


def test_reason_names_the_check_and_its_summary():
    assert drain_reason([_fail("net.nccl_interface", IFNAME)]) == \
        f"ncclcheck: net.nccl_interface: {IFNAME}"


def test_reason_counts_the_other_checks_and_stays_within_the_limit():
    long = _fail("nccl.settings", "word " * 100)
    reason = drain_reason([long, _fail("net.mesh", "x"), _fail("net.mesh", "y")], limit=120)
    assert len(reason) <= 120
    assert reason.startswith("ncclcheck: nccl.settings: word word")
    assert reason.endswith("... (+2 more: net.mesh)")
    assert "\n" not in drain_reason([_fail("a.b", "two\nlines")])


def test_only_the_nodes_the_failing_checks_name_are_drained():
    checks = [
        _fail("net.nccl_interface", IFNAME, host="node3", rank=12),
        passed("ranks.world_size", "ok"),
        _fail("ranks.rank", "rank 6 of 4", rank=6),                  # no host: via the rank map
        _fail("cluster.versions", "NCCL differs", odd_hosts=["node5"]),  # job-wide, names a host
        _fail("cluster.ranks", "ranks 9 never reported", ranks=[9]),    # job-wide, names a rank
        _fail("cluster.hosts", "uneven layout"),                      # job-wide, names nothing
        errored("nccl.library", "probe crashed"),                      # could not run: no drain
    ]
    checks[-1].host = "node7"
    plans, unplaced = plan_drain(checks=checks, rank_hosts={6: "node2", 9: "node4", 12: "node3"})
    assert {p.node: p.checks for p in plans} == {
        "node3": ("net.nccl_interface",), "node2": ("ranks.rank",),
        "node5": ("cluster.versions",), "node4": ("cluster.ranks",)}
    assert unplaced == ["cluster.hosts"]


def test_host_names_map_to_slurm_node_names():
    plans, _ = plan_drain(checks=[_fail("net.x", "bad", host="gpu01.cluster.example")],
                          node_names={"gpu01.cluster.example": "gpu01"})
    assert [p.node for p in plans] == ["gpu01"]


def test_nothing_is_drained_without_scontrol(tmp_path):
    result = drain_failing_nodes(checks=[_fail("net.x", "bad", host="n1")],
                                 env={"PATH": str(tmp_path)})
    assert result.drained_nodes == [] and not result.ok
    assert result.note == "scontrol is not installed: no node drained"
    assert result.to_dict()["actions"][0]["node"] == "n1"


@pytest.mark.slurm
def test_a_failing_check_drains_this_node_with_its_reason(slurm_cluster):
    node = slurm_cluster.hostname
    checks = [_fail("net.nccl_interface", IFNAME, host=node),
              CheckResult("ranks.world_size", Status.PASS, "ok", host="other")]
    try:
        result = drain_failing_nodes(checks=checks, env=slurm_cluster.env, timeout=20)
        assert result.ok and result.drained_nodes == [node], result
        shown = slurm_cluster.run(["sinfo", "-R", "-h", "-o", "%N|%E"], timeout=10).stdout
        assert f"{node}|ncclcheck: net.nccl_interface: {IFNAME}" in shown.splitlines()
        assert slurm_cluster.node_state() in ("drained", "draining")
    finally:
        slurm_cluster.resume(node)
    assert slurm_cluster.node_state() == "idle"
    assert slurm_cluster.run(["sinfo", "-R", "-h"], timeout=10).stdout.strip() == ""
