"""The ClusterSession interface probe families build on (publish, gather, barrier,
node_leaders), against one real TCPStore; the ranks are threads of this process, each with its
own client connection, because the interface, not the process boundary, is under test here
(tests/test_cluster.py covers real processes)."""

from __future__ import annotations

import threading
import time

import pytest

from ncclcheck.cluster.session import ClusterSession, StoreUnavailable, open_store
from ncclcheck.model import Category


@pytest.fixture
def sessions():
    """Four sessions of a 2 nodes x 2 ranks job on one store (rank 0 hosts it)."""
    server = open_store("127.0.0.1", 0, True, 10)
    port = server.port
    made = [ClusterSession(server, 0, 4, 0, 0, "nodeA", "127.0.0.1", port)]
    for rank in (1, 2, 3):
        client = open_store("127.0.0.1", port, False, 10)
        made.append(ClusterSession(client, rank, 4, rank % 2, rank // 2,
                                   "nodeA" if rank < 2 else "nodeB", "127.0.0.1", port))
    for s in made:
        s.announce({"rank": s.rank, "host": s.host})
    return made


def test_gather_returns_what_each_rank_published(sessions):
    for s in sessions:
        s.publish("ifaces", {"rank": s.rank, "names": ["eth0"]})
    got = sessions[0].gather("ifaces", timeout=5)
    assert got == {r: {"rank": r, "names": ["eth0"]} for r in range(4)}
    assert sessions[3].gather("ifaces", ranks=[1, 2], timeout=5) == {
        1: {"rank": 1, "names": ["eth0"]}, 2: {"rank": 2, "names": ["eth0"]}}


def test_gather_leaves_out_late_ranks_at_the_timeout(sessions):
    sessions[0].publish("x", 1)
    sessions[2].publish("x", 3)
    began = time.monotonic()
    assert sessions[0].gather("x", timeout=0.5) == {0: 1, 2: 3}
    assert time.monotonic() - began < 3


def test_barrier_releases_everyone_and_names_the_absent(sessions):
    missing: dict[int, list[int]] = {}

    def arrive(s: ClusterSession) -> None:
        missing[s.rank] = s.barrier("all", timeout=10)

    threads = [threading.Thread(target=arrive, args=(s,)) for s in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert missing == {0: [], 1: [], 2: [], 3: []}
    began = time.monotonic()
    assert sessions[0].barrier("partial", timeout=0.5, ranks=[0, 3]) == [3]
    assert time.monotonic() - began < 3


def test_node_leaders_are_local_rank_zero(sessions):
    assert sessions[1].node_leaders(timeout=5) == {0: "nodeA", 2: "nodeB"}
    assert all(s.is_node_leader == (s.local_rank == 0) for s in sessions)


def test_store_is_usable_for_a_gloo_process_group(sessions):
    """The interface promises a store other families can build a process group on."""
    import torch
    import torch.distributed as dist

    results: dict[int, float] = {}

    def member(s: ClusterSession) -> None:
        group = dist.ProcessGroupGloo(dist.PrefixStore("test-pg", s.store), s.rank, 4)
        tensor = torch.tensor([float(s.rank)])
        group.allreduce([tensor]).wait()
        results[s.rank] = tensor.item()

    threads = [threading.Thread(target=member, args=(s,)) for s in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == {0: 6.0, 1: 6.0, 2: 6.0, 3: 6.0}


def test_port_in_use_and_unresolvable_master_are_named():
    server = open_store("127.0.0.1", 0, True, 5)
    with pytest.raises(StoreUnavailable) as taken:
        open_store("127.0.0.1", server.port, True, 2)
    assert taken.value.category == Category.PORT_IN_USE
    assert "--store-port" in taken.value.fix
    # (An unreachable store is tested through real processes in tests/test_cluster.py: the
    # client's own retries outlive the deadline, which only process exit may cut short.)
    with pytest.raises(StoreUnavailable) as unresolved:
        open_store("no-such-host.invalid", 29500, False, 1.0)
    assert unresolved.value.category == Category.NAME_RESOLUTION
