"""Watchdog lines of several ranks read together: the rank(s) behind are the culprits."""

from __future__ import annotations

from ncclcheck.explain.engine import explain

TIMED_OUT = ("[rank{r}]:[E906 12:16:32.611 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught "
             "collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=8, "
             "NumelOut=8, Timeout(ms)=600000) ran for 600083 milliseconds before timing out.")
ENQUEUED = ("[rank{r}]:[E820 11:47:24.070 ProcessGroupNCCL.cpp:1664] [PG 1 Rank {r}] Exception "
            "(either an error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL "
            "work: {seq}, last completed NCCL work: {done}.")


def _explain(tmp_path, lines):
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    return explain([str(log)]).to_dict()["findings"]


def test_the_rank_behind_is_named_as_a_desync(tmp_path):
    lines = [TIMED_OUT.format(r=r, seq=4190) for r in (0, 2, 3)] + [TIMED_OUT.format(r=1, seq=4188)]
    root = _explain(tmp_path, lines)[0]
    assert root["id"] == "torch.watchdog_lag" and root["category"] == "desync"
    assert root["facts"]["ranks"] == [1] and root["rank"] == 1
    assert "4188" in root["explanation"] and "0, 2, 3" in root["explanation"]


def test_last_enqueued_work_reads_the_same(tmp_path):
    lines = [ENQUEUED.format(r=0, seq=3, done=2), ENQUEUED.format(r=1, seq=2, done=1),
             ENQUEUED.format(r=2, seq=3, done=2)]
    root = _explain(tmp_path, lines)[0]
    assert root["id"] == "torch.watchdog_lag" and root["facts"]["ranks"] == [1]


def test_every_rank_in_the_same_collective_is_a_timeout(tmp_path):
    lines = [TIMED_OUT.format(r=r, seq=77) for r in range(4)]
    root = _explain(tmp_path, lines)[0]
    assert root["id"] == "torch.watchdog_timeout" and root["category"] == "timeout"


def test_one_rank_alone_says_nothing_of_the_others(tmp_path):
    root = _explain(tmp_path, [TIMED_OUT.format(r=3, seq=5)])[0]
    assert root["category"] == "timeout"
