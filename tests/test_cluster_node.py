"""A node's ranks report through their leader: real TCPStores (rank 0's, and the leader's own
on another port, as it would sit on another host), each rank a thread with its own client
connection and its own results from the real ranks family. tests/test_cluster_netns.py runs
the same road across network namespaces with real torchrun.
"""

from __future__ import annotations

import socket
import time

import pytest

from ncclcheck.cluster.clock import JobClock
from ncclcheck.cluster.expect import expectation
from ncclcheck.cluster.gather import findings_of, read_gathered
from ncclcheck.cluster.identity import identity, versions
from ncclcheck.cluster.node import NODE_MARK, join_hub, open_hub, relays
from ncclcheck.cluster.alone import await_verdict
from ncclcheck.cluster.ranges import parse_ranges
from ncclcheck.cluster.session import ClusterSession, key, open_store
from ncclcheck.cluster.state import Findings, Job, Verdict
from ncclcheck.context import ProbeContext, ProbeOptions, RanksOptions
from ncclcheck.launchers import read_layout
from ncclcheck.model import CheckResult, FamilyOutput
from ncclcheck.probes.ranks import probe

PER_NODE, WORLD = 4, 8


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def job_of(rank: int, master: str = "127.0.0.1", families=("ranks",), gpus: int = PER_NODE,
           timeout: float = 20.0) -> Job:
    env = {"TORCHELASTIC_RUN_ID": "t", "RANK": str(rank), "WORLD_SIZE": str(WORLD),
           "LOCAL_RANK": str(rank % PER_NODE), "LOCAL_WORLD_SIZE": str(PER_NODE),
           "GROUP_RANK": str(rank // PER_NODE), "GROUP_WORLD_SIZE": str(WORLD // PER_NODE),
           "MASTER_ADDR": master, "MASTER_PORT": "29500"}
    layout, _ = read_layout(env)
    ctx = ProbeContext(env=env, host=f"node{rank // PER_NODE}", timeout=timeout,
                       options=ProbeOptions(ranks=RanksOptions(visible_gpus=gpus)))
    return Job(list(families), ctx, layout, JobClock(time.monotonic(), timeout), [], rank,
               expectation(layout, env))


def results_of(job: Job) -> list[dict]:
    found = probe(job.ctx)
    for result in found:
        result.host, result.rank = job.ctx.host, job.rank
    return [r.to_dict() for r in found]


def own(job: Job) -> FamilyOutput:
    return FamilyOutput([CheckResult.from_dict(d) for d in results_of(job)])


def session_on(store, job: Job, port: int, **extra) -> ClusterSession:
    return ClusterSession(store, job.rank, WORLD, job.rank % PER_NODE, job.rank // PER_NODE,
                          job.ctx.host, "127.0.0.1", port, **extra)


@pytest.mark.slow  # seconds: the full suite runs it, the quick loop leaves it out
def test_a_node_relays_and_rank_0_names_every_rank_once():
    """Node 0 reports directly; node 1's leader relays ranks 5-6, rank 6 failing a check, and
    rank 7, which joined and stopped before reporting."""
    known = versions()
    server = open_store("127.0.0.1", 0, True, 10)
    port = server.port
    rank0 = session_on(server, job_of(0), port, reporting=True)
    for r in range(PER_NODE):
        job = job_of(r)
        s = rank0 if r == 0 else session_on(open_store("127.0.0.1", port, False, 10), job, port)
        s.announce(identity(job.layout, job.ctx.host, job.ctx.env, known_versions=known))
        s.deliver(results_of(job))

    leader_job = job_of(4)
    hub = open_hub(leader_job, dict(rank=4, world_size=WORLD, local_rank=0, node_rank=1,
                                    host="node1"), free_port())
    assert hub is not None and hub.expected == PER_NODE - 1
    hub_port = hub.session.port
    members = {}
    for r in (5, 6, 7):
        job = job_of(r, gpus=1 if r == 6 else PER_NODE)  # rank 6 sees 1 GPU: local rank 2 fails
        store = join_hub(hub_port, time.monotonic() + 5)
        assert store is not None
        members[r] = (job, session_on(store, job, hub_port, relayed=True))
        members[r][1].announce(identity(job.layout, job.ctx.host, job.ctx.env,
                                        known_versions=known))
        assert not members[r][1].is_node_leader
    for r in (5, 6):
        members[r][1].deliver(results_of(members[r][0]))
    began = time.monotonic()
    summary, included = hub.collect(time.monotonic() + 1.5, False, results_of(leader_job))
    assert time.monotonic() - began >= 1.4  # rank 7 joined and never reported: the deadline
    assert [m["rank"] for m in summary["members"]] == [5, 6, 7]
    assert [m["reported"] for m in summary["members"]] == [True, True, False]
    assert len(summary["variants"]) == 1  # the node's settings and versions, once
    leader = session_on(open_store("127.0.0.1", port, False, 10), leader_job, port)
    leader.announce(identity(leader_job.layout, "node1", leader_job.ctx.env, known_versions=known))
    leader.deliver([], summary, [5, 6])

    read = read_gathered(rank0, WORLD, PER_NODE, time.monotonic() + 0.5, job_of(0).expect)
    assert len(read.gathered.members) == 8 and len(read.gathered.reported_slots) == 7
    assert read.included == [1, 2, 3, 4, 5]  # rank 0's store: node 0's four, node 1's leader
    assert read.relayed == ["node1"]
    found = findings_of(rank0, job_of(0), read, FamilyOutput())
    checks = found.checks
    local = [c for c in checks if c.id == "ranks.local_rank"]
    assert [(c.status.value, c.ranks, c.hosts, c.host, c.rank) for c in local] == [
        ("pass", "0-5", 2, None, None), ("fail", None, None, "node1", 6)]
    reported = next(c for c in checks if c.id == "cluster.reported")
    assert reported.status.value == "fail" and reported.category.value == "rank_crashed"
    assert reported.details["missing_ranks"] == [7]
    assert "node1: rank 7 connected, then stopped" in reported.summary
    row = next(r for r in found.rows if r.id == "ranks.local_rank")
    assert "fail on 1 of 7 ranks (node1: rank 6)" in row.summary
    assert parse_ranges(found.cluster["ranks_by_host"]["node1"]) == [4, 5, 6, 7]

    # rank 0's verdict, passed on by the leader to the ranks in its summary
    hub.pass_on(Findings(verdict=Verdict(1, "", "fail")), included)
    verdict = await_verdict(members[5][1], members[5][0], FamilyOutput())
    assert verdict.verdict is not None and verdict.verdict.code == 1
    assert "job status fail" in verdict.verdict.note
    late = await_verdict(members[7][1], members[7][0], own(members[7][0]))
    assert late.verdict is None and "after the job report had been closed" in late.alone


@pytest.mark.slow  # seconds: the full suite runs it, the quick loop leaves it out
def test_a_leader_without_a_job_report_tells_its_node_why():
    hub = open_hub(job_of(4), dict(rank=4, world_size=WORLD, local_rank=0, node_rank=1,
                                   host="node1"), free_port())
    job = job_of(5)
    member = session_on(join_hub(hub.session.port, time.monotonic() + 5), job, hub.session.port,
                        relayed=True)
    member.announce({"rank": 5, "host": "node1", "member": "m5"})
    member.deliver(results_of(job))
    _, included = hub.collect(time.monotonic() + 5, False, [])
    alone = Findings(alone="no store")
    alone.checks = [c for c in probe(job_of(4).ctx)][:1]
    hub.pass_on(alone, included)
    found = await_verdict(member, job, own(job))
    assert found.verdict is None
    store_row = next(c for c in found.checks if c.id == "cluster.store")
    assert "its node leader (LOCAL_RANK 0 on this host) is not in a job report" in store_row.summary


def test_a_rank_finds_no_leader_quickly_and_goes_direct():
    began = time.monotonic()
    assert join_hub(free_port(), time.monotonic() + 0.5) is None  # nothing listens
    server = open_store("127.0.0.1", 0, True, 10)  # a store that is not a node's
    assert join_hub(server.port, time.monotonic() + 2) is None
    assert not server.check([NODE_MARK]) and time.monotonic() - began < 6
    assert server.add(key("slots"), 0) == 0  # it announced nothing there


@pytest.mark.parametrize("master,families,relayed", [
    ("127.0.0.1", ("ranks",), False),  # rank 0's host: its ranks join rank 0's store
    ("192.0.2.1", ("ranks",), True),  # another host
    ("192.0.2.1", ("ranks", "bench"), False),  # bench's process group needs rank 0's store
])
def test_which_jobs_relay(master, families, relayed):
    assert relays(job_of(5, master, families)) is relayed
