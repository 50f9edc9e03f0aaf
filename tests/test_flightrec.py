"""Flight-recorder dumps: reading them safely, every format version, and the cross-rank verdict.

Dumps of NCCL jobs (started/completed states, discovery times) and of older torch releases
cannot be produced on this CPU machine: those fixtures are built from the format's schema (the
field names torch's FlightRecorder writes, version by version) and say so. One real dump,
written by torch's own recorder over Gloo in a subprocess, feeds the fuzz test;
tests/test_flightrec_real.py runs whole torchrun jobs.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from ncclcheck.explain.engine import explain
from ncclcheck.flightrec.analyze import COMPLETED, MISMATCH, NEVER_ARRIVED, STUCK, analyze
from ncclcheck.flightrec.load import DumpError, read_dump, sniff_dump
from frdumps import Hostile, entry, mutated, torch_dump, write


def verdict_of(folder: Path, job_ranks=None):
    dumps = [read_dump(str(p)) for p in sorted(folder.iterdir())]
    return analyze(dumps, job_ranks).first_failure()


def test_a_rank_that_never_arrived_is_the_culprit_with_where_everyone_was(tmp_path):
    for rank in (0, 1, 3):
        write(tmp_path, rank, [entry(1), entry(2), entry(3, state="started")])
    write(tmp_path, 2, [entry(1), entry(2)])
    v = verdict_of(tmp_path)
    assert (v.kind, v.seq, v.op, v.culprits, v.waiting) == (NEVER_ARRIVED, 3, "all_reduce", (2,),
                                                           (0, 1, 3))
    assert v.culprit_frame == "train_step (/job/train.py:42)"
    assert v.waiting_frame == "train_step (/job/train.py:43)"


@pytest.mark.parametrize("field, culprit_value, fact", [
    ("op", "all_gather", "ops"), ("sizes", ((8,),), "sizes"), ("dtypes", ("BFloat16",), "dtypes")])
def test_a_different_op_size_or_dtype_names_the_minority(tmp_path, field, culprit_value, fact):
    for rank in range(4):
        kwargs = {field: culprit_value} if rank == 1 else {}
        write(tmp_path, rank, [entry(1), entry(2, state="started", **kwargs)])
    v = verdict_of(tmp_path)
    assert (v.kind, v.seq, v.culprits) == (MISMATCH, 2, (1,))
    result = explain([str(tmp_path)]).to_dict()
    root = result["findings"][0]
    assert root["id"] == "fr.collective_mismatch" and root["category"] == "desync"
    assert root["facts"]["ranks"] == [1] and root["facts"]["seq"] == 2
    assert fact in root["facts"] and set(root["facts"][fact]) == {"0", "1", "2", "3"}


def test_every_rank_entered_and_none_completed_is_a_stuck_collective(tmp_path):
    for rank in range(4):
        write(tmp_path, rank, [entry(1), entry(2, state="started", time_ns=2_000_000 + rank)])
    v = verdict_of(tmp_path)
    assert (v.kind, v.seq, v.waiting, v.last_arrived) == (STUCK, 2, (0, 1, 2, 3), 3)


def test_all_completed_gives_no_failure_and_says_the_hang_is_elsewhere(tmp_path):
    for rank in range(4):
        write(tmp_path, rank, [entry(1), entry(2)])
    result = explain([str(tmp_path)]).to_dict()
    assert not [f for f in result["findings"] if f["category"]]
    notes = {n["id"]: n for n in result["notes"]}
    assert notes["fr.all_completed"]["category"] is None
    assert "outside the collectives" in notes["fr.all_completed"]["text"]


def test_a_wrapped_buffer_is_compared_where_every_dump_still_remembers(tmp_path):
    # rank 0 kept entries 5..9 only (a small ring buffer); the others 1..9; rank 3 is behind
    write(tmp_path, 0, [entry(s) for s in range(5, 9)] + [entry(9, state="started")])
    for rank in (1, 2):
        write(tmp_path, rank, [entry(s) for s in range(1, 9)] + [entry(9, state="started")])
    write(tmp_path, 3, [entry(s) for s in range(1, 9)])
    v = verdict_of(tmp_path)
    assert (v.kind, v.seq, v.culprits, v.wrapped) == (NEVER_ARRIVED, 9, (3,), (0,))


def test_missing_dumps_are_named_and_the_rest_analysed(tmp_path):
    config = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}}
    for rank in (0, 1, 2):
        write(tmp_path, rank, [entry(1), entry(2, state="started")], pg_config=config)
    v = verdict_of(tmp_path)  # pg_config says the default group has ranks 0-3
    assert (v.kind, v.seq, v.culprits, v.missing_dumps) == (NEVER_ARRIVED, 2, (3,), (3,))
    result = explain([str(tmp_path)]).to_dict()
    assert "rank(s) 3" in {n["id"]: n for n in result["notes"]}["fr.missing_dumps"]["text"]
    root = result["findings"][0]
    assert root["id"] == "fr.rank_never_arrived" and root["facts"]["missing_dumps"] == [3]


def test_a_desync_inside_one_subgroup_is_found_across_local_group_ids(tmp_path):
    """Ranks 2 and 3 share group "7"; its local id differs per rank (3 on rank 2, 1 on 3)."""
    sub = ("7", "tp_group")
    for rank in (0, 1):
        write(tmp_path, rank, [entry(1), entry(2)])
    write(tmp_path, 2, [entry(1), entry(2), entry(1, group=sub, pg_id=3, record_id=10),
                        entry(2, group=sub, pg_id=3, state="started", record_id=11)])
    write(tmp_path, 3, [entry(1), entry(2), entry(1, group=sub, pg_id=1, record_id=10)])
    v = verdict_of(tmp_path)
    assert (v.name, v.desc, v.kind, v.seq, v.culprits, v.ranks) == ("7", "tp_group",
                                                                  NEVER_ARRIVED, 2, (3,), (2, 3))


def test_p2p_operations_are_not_collectives_and_an_open_one_is_reported(tmp_path):
    for rank in range(2):
        write(tmp_path, rank, [entry(1), entry(1, op="send" if rank == 0 else "recv", p2p=True,
                                                state="started", record_id=5)])
    dumps = [read_dump(str(p)) for p in sorted(tmp_path.iterdir())]
    analysis = analyze(dumps)
    assert analysis.first_failure() is None
    assert analysis.p2p_waiting == {0: "send", 1: "recv"}


def test_coalesced_collectives_share_a_number_and_compare_as_one(tmp_path):
    for rank in range(2):
        write(tmp_path, rank, [entry(1, op="allreduce_coalesced", sizes=((4,), (8,)),
                                     dtypes=("Float", "Float"))])
    assert verdict_of(tmp_path) is None


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2", "2.4", "2.7", "2.10"])
@pytest.mark.parametrize("fmt", ["pickle", "json"])
def test_every_format_version_and_both_encodings_read_alike(tmp_path, version, fmt):
    """Fixtures from each version's schema (seq_id before 2.2; JSON writes pg_status numbers
    as text and missing times as 0); not produced here."""
    status = {"0": {"last_enqueued_collective": "2" if fmt == "json" else 2,
                    "last_completed_collective": "1" if fmt == "json" else 1,
                    "last_started_collective": "2" if fmt == "json" else 2}}
    for rank in (0, 1):
        write(tmp_path, rank, [entry(1, version=version),
                               entry(2, version=version, state="started")],
              fmt=fmt, version=version, pg_status=status)
    write(tmp_path, 2, [entry(1, version=version)], fmt=fmt, version=version,
          pg_status={"0": {"last_completed_collective": 1}})
    v = verdict_of(tmp_path, job_ranks=3)
    assert (v.kind, v.seq, v.culprits) == (NEVER_ARRIVED, 2, (2,))


def test_the_rank_comes_from_the_content_or_from_host_named_files(tmp_path):
    write(tmp_path, 0, [entry(1)], prefix="nccl_trace_rank_node-a1_")
    write(tmp_path, 1, [entry(1)], prefix="nccl_trace_rank_node-b7_")
    path = write(tmp_path, 9, [entry(1)], prefix="whatever-", rank=2)
    ranks = sorted((read_dump(str(p)).rank, read_dump(str(p)).rank_from)
                   for p in tmp_path.iterdir())
    assert ranks == [(0, "file name"), (1, "file name"), (2, "content")]
    assert path.name == "whatever-9"


def test_dumps_are_recognised_by_content_not_name(tmp_path):
    write(tmp_path, 0, [entry(1)])
    json_dump = write(tmp_path, 1, [entry(1)], fmt="json")
    assert sniff_dump((tmp_path / "nccl_trace_rank_0").read_bytes()[:8192])
    assert sniff_dump(json_dump.read_bytes()[:8192])
    assert not sniff_dump(b'{"event": "loss", "value": 0.1}\n')
    assert not sniff_dump(b"[rank0]: RuntimeError: NCCL error\n")


def test_a_hostile_pickle_runs_nothing_and_the_rest_is_analysed(tmp_path):
    marker = tmp_path / "owned"
    folder = tmp_path / "dumps"
    folder.mkdir()
    for rank in (0, 1):
        write(folder, rank, [entry(1), entry(2, state="started")])
    write(folder, 2, [entry(1)])
    (folder / "nccl_trace_rank_3").write_bytes(pickle.dumps(
        {"version": "2.10", "entries": [Hostile(str(marker))]}, protocol=2))
    result = explain([str(folder)]).to_dict()
    assert not marker.exists()
    notes = [n for n in result["notes"] if n["id"] == "fr.unreadable"]
    assert len(notes) == 1 and "nccl_trace_rank_3" in notes[0]["text"]
    assert "refers to code" in notes[0]["text"]
    root = result["findings"][0]
    assert root["id"] == "fr.rank_never_arrived" and root["facts"]["ranks"] == [2]


@pytest.fixture(scope="module")
def real_dump(tmp_path_factory) -> bytes:
    """A dump written by torch's own flight recorder over Gloo (one rank, a subprocess)."""
    return torch_dump(tmp_path_factory.mktemp("real"), 50,
                      "for _ in range(5): dist.all_reduce(t)\n"
                      "dist.broadcast(t, 0)\n")


def test_a_real_dump_reads_with_its_frames(tmp_path, real_dump):
    path = tmp_path / "nccl_trace_rank_0"
    path.write_bytes(real_dump)
    dump = read_dump(str(path))
    assert dump.rank == 0 and dump.version.count(".") == 1
    assert [e.op for e in dump.entries] == ["all_reduce"] * 5 + ["broadcast"]
    assert [e.seq for e in dump.entries] == [1, 2, 3, 4, 5, 6]
    assert dump.entries[0].frames and list(dump.entries[0].input_dtypes) == ["Float"]


def test_truncated_and_mutated_real_dumps_never_raise_anything_but_a_note(tmp_path, real_dump):
    path = tmp_path / "nccl_trace_rank_0"
    outcomes = {"read": 0, "refused": 0}
    for data in mutated(real_dump, 400, seed=1):
        path.write_bytes(data)
        try:
            read_dump(str(path))
            outcomes["read"] += 1
        except DumpError as exc:
            assert "\n" not in str(exc)
            outcomes["refused"] += 1
    assert outcomes["refused"] > 0
    truncated = tmp_path / "cut" / "nccl_trace_rank_1"
    truncated.parent.mkdir()
    truncated.write_bytes(real_dump[: len(real_dump) // 2])
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "explain", str(truncated.parent)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "Traceback" not in out.stderr + out.stdout
    assert "truncated or corrupt" in out.stdout


def test_a_log_folder_without_a_root_cause_says_what_to_collect(tmp_path):
    (tmp_path / "train.log").write_text("epoch 1 step 10 loss 0.5\nepoch 1 step 20 loss 0.4\n")
    result = explain([str(tmp_path)]).to_dict()
    assert result["findings"] == []
    note = next(n for n in result["notes"] if n["id"] == "explain.collect_next")
    assert note["category"] is None and "TORCH_FR_BUFFER_SIZE" in note["text"]


def test_a_log_with_a_root_cause_gets_no_collect_next_note():
    log = Path(__file__).parent / "data" / "logs" / "world" / "dev" / \
        "c1-003-torchrun-c10d-bind-errno98-29400.log"
    assert explain([str(log)]).to_dict()["notes"] == []


def test_analysis_names_completed_groups_for_the_note(tmp_path):
    for rank in range(2):
        write(tmp_path, rank, [entry(1), entry(2)])
    dumps = [read_dump(str(p)) for p in sorted(tmp_path.iterdir())]
    groups = analyze(dumps).groups
    assert [(g.name, g.kind, g.seq, g.completed) for g in groups] == [("0", COMPLETED, 2, (0, 1))]
