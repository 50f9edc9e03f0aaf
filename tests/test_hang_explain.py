"""`ncclcheck explain` on a folder of snapshots: every node's files joined into one verdict,
read beside the logs in the same folder; a broken snapshot is a note; RAS's missing ranks count.
Stacks are py-spy's own (tests/data/hang/)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ncclcheck.explain.engine import explain
from ncclcheck.hang.files import write
from ncclcheck.hang.model import GoneRank, NodeSnapshot, ProcessSnapshot, ProcState, Sample
from ncclcheck.hang.pyspy import parse_dump
from ncclcheck.hang.verdict import GONE, judge_job

DATA = Path(__file__).parent / "data" / "hang"
ROOT = Path(__file__).resolve().parents[1]
TAKEN = "2026-12-07T04:00:00+00:00"
# what a waiting rank prints when the watchdog fires at last: the consequence
WATCHDOG = ("[rank0]:[E1207 04:30:00.000000000 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=4, "
            "NumelOut=4, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.")


def stacks(name: str):
    text = (DATA / name).read_text()
    return parse_dump(text, json.loads(text)[0]["pid"])


def proc(rank: int, host: str, fixture: str) -> ProcessSnapshot:
    record = ProcessSnapshot(2000 + rank, host, rank, rank % 2, 4, 2, "torchrun",
                             "python train.py", {"RANK": str(rank), "WORLD_SIZE": "4"})
    record.samples = [Sample(float(n), ProcState("S", 1.0, 4, "futex_do_wait", 1.0, 9),
                             stacks(fixture)) for n in range(3)]
    return record


def node(host: str, *procs: ProcessSnapshot, **extra) -> NodeSnapshot:
    return NodeSnapshot(host, TAKEN, 3, 1.0, 2.0, list(procs), **extra)


def test_every_node_s_snapshot_joined_with_the_logs_beside_them(tmp_path):
    write(node("node0", proc(0, "node0", "pyspy_waiting_all_reduce.json"),
               proc(1, "node0", "pyspy_waiting_all_reduce.json")), str(tmp_path))
    write(node("node1", proc(2, "node1", "pyspy_waiting_all_reduce.json"),
               proc(3, "node1", "pyspy_stuck_load_batch.json")), str(tmp_path))
    write(node("node2"), str(tmp_path))  # a node of the allocation without a training process
    (tmp_path / "rank0.log").write_text(WATCHDOG + "\n")
    (tmp_path / "hang-node9-1.json").write_text('{"ncclcheck_hang_snapshot": 1, "node": {')
    result = explain([str(tmp_path)]).to_dict()
    root = result["findings"][0]
    assert root["root_cause"] and root["id"] == "hang.outside_collective"
    assert (root["facts"]["ranks"], root["host"], root["rank"]) == ([3], "node1", 3)
    assert root["file"].endswith("hang-node1-2003.json")
    assert [(g["ranks"], g["hosts"]) for g in root["facts"]["groups"]] == [
        ("3", ["node1"]), ("0-2", ["node0", "node1"])]
    # the watchdog's timeout in the log is read too, and is not the root cause
    assert any(f["category"] == "timeout" and not f["root_cause"] for f in result["findings"])
    assert "hang.unreadable_snapshot" in {n["id"] for n in result["notes"]}
    # a rank outside the collective: the program's to fix, a requeue does the same again
    assert result["verdict"] == {"owner": "code", "retry_helps": False, "drain": []}


def test_a_node_that_lost_a_rank_and_nccl_ras_missing_ranks_are_gone():
    waiting = [proc(r, "node0", "pyspy_waiting_all_reduce.json") for r in (0, 2)]
    lost = node("node0", *waiting, gone=[GoneRank(1, 1, "node0", "no process for local rank 1")])
    verdict = judge_job(waiting, [lost])
    assert verdict.kind == GONE and [c.rank for c in verdict.culprits] == [1]
    ras = {"missing": [{"rank": 3, "why": "unresponsive", "size": 4},
                       {"rank": 1, "why": "missing", "size": 2}]}
    verdict = judge_job([proc(r, "node0", "pyspy_waiting_all_reduce.json") for r in range(3)],
                        [node("node0", ras=ras)])
    assert [c.rank for c in verdict.culprits] == [3]  # rank 1 is of a 2-rank communicator
    assert "NCCL RAS" in verdict.culprits[0].detail


def test_explain_on_the_command_line_reads_the_folder(tmp_path):
    write(node("node0", *(proc(r, "node0", "pyspy_waiting_all_reduce.json") for r in range(4))),
          str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "ncclcheck", "explain", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "hang.collective_stuck" in done.stdout and "timeout" in done.stdout
