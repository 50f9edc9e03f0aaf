"""The verdict over snapshots: groups, culprits, the outcomes that are no failure, and the facts
explain reports. Stacks are py-spy's own output (tests/data/hang/, captured from a real hung
Gloo job) or frames shaped like it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ncclcheck.hang.facts import notes, state
from ncclcheck.hang.frames import deciding_thread, where
from ncclcheck.hang.model import Frame, GoneRank, ProcessSnapshot, ProcState, Sample, ThreadStack
from ncclcheck.hang.pyspy import parse_dump
from ncclcheck.hang.verdict import (DESYNC, GONE, INCOMPLETE, MOVING, OTHER_COLLECTIVE, OUTSIDE,
                                    TIMEOUT, judge)

DATA = Path(__file__).parent / "data" / "hang"
TRAIN = "/home/alice/job/train.py"
C10D = "/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
THREADING = "/usr/local/lib/python3.11/threading.py"


def captured(name: str) -> list[ThreadStack]:
    text = (DATA / name).read_text()
    return parse_dump(text, json.loads(text)[0]["pid"])


WAITING = captured("pyspy_waiting_all_reduce.json")
STUCK = captured("pyspy_stuck_load_batch.json")


def thread(*frames: tuple[str, str, int], name: str = "MainThread", main: bool = True
           ) -> ThreadStack:
    return ThreadStack(1, None, name, [Frame(*f) for f in frames], main=main)


def proc(rank: int, threads: list[ThreadStack], samples: int = 3, wakeups: int = 0,
         world: int | None = 4, host: str = "node0", exited: bool = False) -> ProcessSnapshot:
    record = ProcessSnapshot(1000 + rank, host, rank, rank % 4, world, 4, "torchrun",
                             "python train.py")
    record.samples = [Sample(n * 1.0, ProcState("S", 1.0, 4, "futex_do_wait", 1.0,
                                                 10 + wakeups * n // max(1, samples - 1)), threads)
                      for n in range(samples)]
    record.exited = exited
    return record


def test_the_captured_stacks_read_as_people_read_them():
    waiting, stuck = where(WAITING[0]), where(STUCK[0])
    assert waiting.collective == "all_reduce" and waiting.user.file == TRAIN
    assert waiting.user.function == "main"
    assert stuck.collective is None and stuck.user.function == "load_batch"
    assert stuck.describe() == "load_batch (job/train.py:29)"


def test_a_rank_stuck_outside_the_collective_is_the_culprit():
    verdict = judge([proc(r, STUCK if r == 2 else WAITING, world=8) for r in range(8)])
    assert verdict.outcome == DESYNC and verdict.kind == OUTSIDE
    assert [c.rank for c in verdict.culprits] == [2]
    assert verdict.culprits[0].where.user == Frame("load_batch", TRAIN, 29)
    assert [(g.ranks, g.state, g.culprit) for g in verdict.groups] == [
        ([2], "stuck", True), ([0, 1, 3, 4, 5, 6, 7], "waiting", False)]
    stated = state(verdict)
    facts = stated.facts
    assert stated.rule == "hang_outside_collective" and facts["ranks"] == [2]
    assert facts["where"] == {"function": "load_batch", "file": TRAIN, "line": 29,
                              "collective": None}
    assert [(g["ranks"], g["count"]) for g in facts["groups"]] == [("2", 1), ("0-1, 3-7", 7)]
    assert facts["groups"][1]["where"].startswith("all_reduce <- main (job/train.py:")
    assert stated.text.startswith("rank 2 (node0, pid 1002) is stuck in load_batch "
                                  "(job/train.py:29); 7 other rank(s) wait in all_reduce")


def test_a_rank_in_a_different_collective_is_the_culprit():
    other = [thread(("broadcast", C10D, 2800), ("main", TRAIN, 60), ("<module>", TRAIN, 90))]
    verdict = judge([proc(r, other if r == 3 else WAITING) for r in range(4)])
    assert verdict.kind == OTHER_COLLECTIVE and [c.rank for c in verdict.culprits] == [3]
    assert verdict.culprits[0].where.collective == "broadcast"
    assert state(verdict).rule == "hang_other_collective"
    assert verdict.reference.ranks == [0, 1, 2]


def test_a_gone_rank_is_the_culprit_and_the_others_wait():
    gone = GoneRank(1, 1, "node0", "no process for local rank 1 of 3 on node0")
    verdict = judge([proc(r, WAITING, world=3) for r in (0, 2)], [gone])
    assert verdict.kind == GONE and [c.rank for c in verdict.culprits] == [1]
    assert state(verdict).facts["where"] is None
    assert verdict.groups[0].state == "gone" and verdict.groups[0].culprit


def test_a_rank_that_exits_during_the_snapshot_is_gone_with_its_last_place():
    verdict = judge([proc(0, WAITING, world=2), proc(1, STUCK, world=2, exited=True)])
    assert verdict.kind == GONE and verdict.culprits[0].where.user.function == "load_batch"
    assert "exited while it was being looked at" in verdict.culprits[0].detail


def test_every_rank_in_one_collective_is_a_timeout():
    verdict = judge([proc(r, WAITING) for r in range(4)])
    assert verdict.outcome == TIMEOUT and not verdict.culprits
    stated = state(verdict)
    assert stated.rule == "hang_collective_stuck" and stated.facts["ranks"] == []
    assert stated.facts["where"]["collective"] == "all_reduce"


def test_ranks_that_keep_waking_up_pass_through_and_are_no_hang():
    verdict = judge([proc(r, WAITING, wakeups=200) for r in range(4)])
    assert verdict.outcome == MOVING and state(verdict) is None
    assert notes(verdict)[0][0] == "hang.moving"


def test_a_stack_that_changes_between_samples_is_not_stuck():
    moving = proc(1, STUCK)
    moving.samples[0].threads = [thread(("compute", TRAIN, 10), ("main", TRAIN, 70))]
    verdict = judge([proc(0, WAITING, world=2), moving])
    assert verdict.kind == OUTSIDE and "running in" in verdict.culprits[0].detail


def test_idle_framework_threads_never_speak_for_the_process():
    pin = thread(("get", "/usr/local/lib/python3.11/queue.py", 180),
                 ("_pin_memory_loop",
                  "/opt/venv/lib/python3.11/site-packages/torch/utils/data/_utils/pin_memory.py",
                  52), ("run", THREADING, 982), ("_bootstrap_inner", THREADING, 1045),
                 ("_bootstrap", THREADING, 1002), name="Thread-2 (_pin_memory_loop)", main=False)
    pool = thread(("_worker", "/usr/local/lib/python3.11/concurrent/futures/thread.py", 81),
                  ("run", THREADING, 982), ("_bootstrap", THREADING, 1002),
                  name="checkpoint_0", main=False)
    chosen = deciding_thread([pin, pool, *WAITING])
    assert chosen.name == "MainThread" and where(chosen).collective == "all_reduce"
    # a main thread that only joins the thread that trains: the training thread speaks
    parked = thread(("_wait_for_tstate_lock", THREADING, 1132), ("join", THREADING, 1112),
                    ("<module>", TRAIN, 99))
    trainer = thread(("all_reduce", C10D, 3252), ("train", TRAIN, 40), ("run", THREADING, 982),
                     ("_bootstrap", THREADING, 1002), name="trainer", main=False)
    assert deciding_thread([parked, pin, trainer]).name == "trainer"


def test_ranks_without_a_snapshot_or_unreadable_leave_it_incomplete():
    verdict = judge([proc(r, WAITING, world=8) for r in range(4)])
    assert verdict.outcome == INCOMPLETE and verdict.missing == [4, 5, 6, 7]
    assert "ranks 4-7 have no snapshot" in notes(verdict)[0][1]
    unread = proc(3, [])
    unread.samples = []
    verdict = judge([*(proc(r, WAITING) for r in range(3)), unread])
    assert verdict.outcome == INCOMPLETE and verdict.unread == [unread]


def test_a_rank_nccl_ras_reports_missing_is_gone():
    verdict = judge([proc(r, WAITING) for r in range(3)], [], [(3, "missing from NCCL's "
                                                                  "communicator (NCCL RAS)")])
    assert verdict.kind == GONE and verdict.culprits[0].rank == 3


def test_no_process_and_every_rank_stuck_elsewhere_are_notes():
    assert notes(judge([]))[0][0] == "hang.no_process"
    verdict = judge([proc(r, STUCK) for r in range(2)])
    assert verdict.outcome == MOVING and notes(verdict)[0][0] == "hang.stuck_elsewhere"


@pytest.mark.parametrize("culprits", [1, 3])
def test_the_culprit_groups_come_first_then_the_largest(culprits):
    procs = [proc(r, STUCK if r < culprits else WAITING, world=16) for r in range(16)]
    verdict = judge(procs)
    assert verdict.groups[0].culprit and verdict.groups[0].ranks == list(range(culprits))
    assert len(verdict.groups[1].members) == 16 - culprits
