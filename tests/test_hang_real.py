"""Real hangs, caught live: torchrun starts a Gloo job (tests/hang/hang_job.py) that hangs in one
shape, and `ncclcheck hang` — finding the processes by itself, among the jobs of this shared
machine the one under the test's torchrun (--job) — names the culprit rank, its function and
file:line, and the groups; a healthy job raises nothing."""

from __future__ import annotations

import time

import pytest

from hangjobs import explain_json, groups_of, hang_json, hung_job, line_of

pytestmark = pytest.mark.slow


def root_of(doc: dict) -> dict:
    root = doc["findings"][0]
    assert root["root_cause"], doc["findings"]
    return root


def test_a_rank_stuck_in_its_data_loading(tmp_path):
    with hung_job(tmp_path / "job", "outside", 4, HANG_CULPRIT="2") as (launcher, pids):
        doc = hang_json("--job", str(launcher), "--out", str(tmp_path / "snap"))
        joined = explain_json(str(tmp_path / "snap"), str(tmp_path / "job" / "torchrun.log"))
    root = root_of(doc)
    facts = root["facts"]
    assert (root["id"], root["category"]) == ("hang.outside_collective", "desync")
    assert facts["ranks"] == [2] and root["rank"] == 2
    assert facts["where"]["function"] == "load_batch"
    assert facts["where"]["file"].endswith("hang/hang_job.py")
    assert facts["where"]["line"] == line_of("load-batch-line")
    assert groups_of(doc) == [("2", 1, "stuck"), ("0-1, 3", 3, "waiting")]
    assert facts["groups"][1]["collective"] == "all_reduce"
    assert facts["groups"][1]["line"] == line_of("all-reduce-line")
    assert sorted(p["pid"] for p in doc["hang"]["processes"]) == sorted(pids)
    assert {p["source"] for p in doc["hang"]["processes"]} == {"py-spy"}
    # the heartbeat thread (the script's own code) and the idle pool never speak for a rank
    assert {p["thread"] for p in doc["hang"]["processes"]} == {"MainThread"}
    # the folder --out wrote, explained with the job's log, says the same
    again = root_of(joined)
    assert (again["id"], again["facts"]["ranks"], again["facts"]["where"]) == (
        root["id"], [2], facts["where"])


def test_a_rank_in_a_different_collective(tmp_path):
    with hung_job(tmp_path / "job", "other_collective", 3, HANG_CULPRIT="1") as (launcher, _):
        doc = hang_json("--job", str(launcher))
    root = root_of(doc)
    facts = root["facts"]
    assert root["id"] == "hang.other_collective" and facts["ranks"] == [1]
    assert facts["where"] == {"function": "main", "file": facts["where"]["file"],
                              "line": line_of("broadcast-line"), "collective": "broadcast"}
    assert groups_of(doc) == [("1", 1, "waiting"), ("0, 2", 2, "waiting")]
    assert doc["hang"]["groups"][0]["culprit"] and not doc["hang"]["groups"][1]["culprit"]


def test_a_rank_that_exited_while_the_others_wait(tmp_path):
    with hung_job(tmp_path / "job", "gone", 3, HANG_CULPRIT="1") as (launcher, pids):
        doc = hang_json("--job", str(launcher))
    root = root_of(doc)
    assert root["id"] == "hang.rank_gone" and root["facts"]["ranks"] == [1]
    assert root["facts"]["where"] is None
    assert groups_of(doc) == [("1", 1, "gone"), ("0, 2", 2, "waiting")]
    assert sorted(p["pid"] for p in doc["hang"]["processes"]) == [pids[0], pids[2]]
    assert doc["hang"]["gone"][0]["local_rank"] == 1


def test_every_rank_in_the_same_collective_is_a_timeout(tmp_path):
    with hung_job(tmp_path / "job", "same", 4) as (launcher, _):
        doc = hang_json("--job", str(launcher))
    root = root_of(doc)
    assert (root["id"], root["category"]) == ("hang.collective_stuck", "timeout")
    assert root["facts"]["ranks"] == []
    assert root["facts"]["where"]["line"] == line_of("all-reduce-line")
    assert groups_of(doc) == [("0-3", 4, "waiting")]
    assert "bench --isolate" in root["fix"]


def test_a_healthy_job_raises_nothing(tmp_path):
    with hung_job(tmp_path / "job", "healthy", 2) as (launcher, _):
        doc = hang_json("--job", str(launcher))
    assert not [f for f in doc["findings"] if f["category"]]
    assert doc["hang"]["outcome"] == "moving"
    assert "hang.moving" in {n["id"] for n in doc["notes"]}


def test_eight_processes_in_under_five_seconds(tmp_path):
    with hung_job(tmp_path / "job", "outside", 8, HANG_CULPRIT="5") as (launcher, _):
        started = time.monotonic()
        doc = hang_json("--job", str(launcher))
        wall = time.monotonic() - started
    print(f"snapshot of 8 processes: {doc['hang']['duration_s']:.2f} s, command {wall:.2f} s")
    assert len(doc["hang"]["processes"]) == 8
    assert doc["hang"]["duration_s"] < 5.0
    assert root_of(doc)["facts"]["ranks"] == [5]


def test_torch_s_debug_server_gives_stacks_and_the_flight_recorder(tmp_path):
    """Without py-spy (NCCLCHECK_PYSPY=none): each rank's own worker server answers with its
    stacks and its flight recorder (Gloo's), written beside the snapshot; explain reads both.
    With py-spy, the stacks are py-spy's and the flight recorder still the server's."""
    with hung_job(tmp_path / "job", "outside", 3, HANG_CULPRIT="1", HANG_DEBUG_SERVER="1",
                  TORCH_FR_BUFFER_SIZE="200") as (launcher, _):
        doc = hang_json("--job", str(launcher), "--out", str(tmp_path / "snap"),
                        env={"NCCLCHECK_PYSPY": "none"})
        with_pyspy = hang_json("--job", str(launcher), "--out", str(tmp_path / "snap2"))
    assert {p["source"] for p in doc["hang"]["processes"]} == {"debug-server"}
    root = root_of(doc)
    assert root["id"] == "hang.outside_collective" and root["facts"]["ranks"] == [1]
    assert root["facts"]["where"]["line"] == line_of("load-batch-line")
    dumps = sorted(p.name for p in (tmp_path / "snap").glob("fr-*.json"))
    assert len(dumps) == 3, dumps
    fr = [f for f in doc["findings"] if f["id"].startswith("fr.")]
    assert fr and fr[0]["facts"]["ranks"] == [1]
    # where py-spy reads the stacks, the debug server still gives the flight recorder
    assert {p["source"] for p in with_pyspy["hang"]["processes"]} == {"py-spy"}
    assert len(list((tmp_path / "snap2").glob("fr-*.json"))) == 3
