"""A dump's decoded values are walked within a depth cap and a budget before anything renders
them: a value the pickle memo shares is a few bytes with 2**levels leaves to ``repr``.

The real dumps are torch's own (its recorder over Gloo, a subprocess) with the newest entry's
``input_sizes`` replaced by a list nested 22 or 30 levels deep, each level holding its child
twice through the memo; explain runs in a process limited to 1 GiB of address space and 20 s
of CPU, so that a regression fails the test instead of taking the machine.
"""

from __future__ import annotations

import pickle
import time
from pathlib import Path

import pytest

from frdumps import entry, explain_limited, nest_shared, write
from ncclcheck.flightrec.analyze import analyze
from ncclcheck.flightrec.bounded import FLOOR, MAX_DEPTH, PER_BYTE, Budget, Overgrown
from ncclcheck.flightrec.load import DumpError, read_dump

CPU_SECONDS = 20
FEW_SECONDS = 8.0                  # start-up included, on a busy machine; the walk is ms


@pytest.fixture
def real_dump(cycling_real_dump) -> bytes:
    """300 collectives in a 200-entry buffer: explain first cuts the newest 64. (conftest's, made once a session)"""
    return cycling_real_dump


def _explain_limited(folder: Path) -> tuple[dict, float]:
    return explain_limited(folder, CPU_SECONDS, timeout=30)


def _nested(levels: int) -> list:
    """A list ``levels`` deep whose every level holds the same child twice."""
    value: list = [8]
    for _ in range(levels):
        value = [value, value]
    return value


@pytest.mark.parametrize("levels", [22, 30])
def test_a_real_dump_with_memo_shared_nested_sizes_is_refused_in_seconds(
        tmp_path, real_dump, levels):
    data = nest_shared(real_dump, levels)
    assert len(data) - len(real_dump) < 600           # 2**levels leaves in a few hundred bytes
    shared = pickle.loads(data)["entries"][-1]["input_sizes"]
    assert shared[0] is shared[1]
    folder = tmp_path / "dumps"
    folder.mkdir()
    (folder / "nccl_trace_rank_0").write_bytes(data)
    result, elapsed = _explain_limited(folder)
    notes = [n["text"] for n in result["notes"] if n["id"] == "fr.unreadable"]
    assert notes == [f"{folder / 'nccl_trace_rank_0'} is a corrupt dump (an entry's "
                     f"input_sizes nests more than {MAX_DEPTH} levels deep)"]
    assert elapsed < FEW_SECONDS, elapsed
    # the whole decode and the newest-entries cut both refuse it, in milliseconds
    for newest in (None, 64):
        started = time.process_time()
        with pytest.raises(DumpError, match=r"^is a corrupt dump \(an entry's input_sizes "):
            read_dump(str(folder / "nccl_trace_rank_0"), newest=newest)
        assert time.process_time() - started < 0.5


def test_the_unchanged_real_dump_reads_its_sizes_and_dtypes_as_they_are(tmp_path, real_dump):
    path = tmp_path / "nccl_trace_rank_0"
    path.write_bytes(real_dump)
    plain = pickle.loads(real_dump)["entries"]
    for newest in (None, 64):
        dump = read_dump(str(path), newest=newest)
        assert [(e.input_sizes, e.output_sizes, e.input_dtypes, e.output_dtypes, e.group,
                 e.state, len(e.frames)) for e in dump.entries] == [
            (e["input_sizes"], e["output_sizes"], e["input_dtypes"], e["output_dtypes"],
             e["process_group"][0], e["state"], len(e["frames"])) for e in plain][-len(dump.entries):]


FIELDS = {
    "input_sizes": lambda e, v: e.update(input_sizes=v),
    "output_sizes": lambda e, v: e.update(output_sizes=v),
    "input_dtypes": lambda e, v: e.update(input_dtypes=v),
    "output_dtypes": lambda e, v: e.update(output_dtypes=v),
    "profiling_name": lambda e, v: e.update(profiling_name=v),
    "state": lambda e, v: e.update(state=v),
    "group name": lambda e, v: e.update(process_group=(v, "default_pg")),
    "group desc": lambda e, v: e.update(process_group=("0", v)),
}


@pytest.mark.parametrize("field", sorted(FIELDS))
@pytest.mark.parametrize("newest", [None, 8], ids=["whole", "newest"])
def test_any_field_that_nests_30_levels_through_the_memo_is_refused_in_milliseconds(
        tmp_path, field, newest):
    entries = [entry(seq) for seq in range(1, 40)]
    FIELDS[field](entries[-1], _nested(30))
    path = write(tmp_path, 0, entries)
    assert path.stat().st_size < 40_000
    started = time.process_time()
    with pytest.raises(DumpError, match=fr"^is a corrupt dump \(.* nests more than {MAX_DEPTH} "
                                        r"levels deep\)$"):
        read_dump(str(path), newest=newest)
    assert time.process_time() - started < 0.5


@pytest.mark.parametrize("where", ["version", "pg_config desc"])
def test_the_dump_s_own_names_are_bounded_too(tmp_path, where):
    nested = _nested(30)
    if where == "version":
        path = write(tmp_path, 0, [entry(1)], version=nested)
    else:
        path = write(tmp_path, 0, [entry(1)],
                     pg_config={"0": {"name": "0", "desc": nested, "ranks": "[0]"}})
    with pytest.raises(DumpError, match="nests more than"):
        read_dump(str(path))


def test_a_wide_shallow_shared_value_exhausts_the_budget(tmp_path):
    """Seven levels of sixteen references each: within the depth cap, 16**7 leaves."""
    value: list = [8]
    for _ in range(7):
        value = [value] * 16
    entries = [entry(seq) for seq in range(1, 10)]
    entries[-1]["input_sizes"] = value
    path = write(tmp_path, 0, entries)
    limit = FLOOR + PER_BYTE * path.stat().st_size
    started = time.process_time()
    with pytest.raises(DumpError, match=fr"^is a corrupt dump \(an entry's input_sizes and the "
                                        fr"values before it hold more than {limit:,}, more than "
                                        r"a dump of [\d,]+ bytes holds"):
        read_dump(str(path))
    assert time.process_time() - started < 1.0


def test_many_entries_sharing_one_moderate_value_exhaust_the_budget_together(tmp_path):
    """Each entry's sizes alone are modest; the dump holds them a thousand times for a few
    bytes each, which one budget per dump sees."""
    shared = [[1, 2, 3, 4]] * 2000                     # 10,001 values
    entries = [entry(seq) for seq in range(1, 1001)]
    for e in entries:
        e["input_sizes"] = shared
    path = write(tmp_path, 0, entries)
    with pytest.raises(DumpError, match="hold more than"):
        read_dump(str(path))


def test_one_long_inner_list_shared_many_times_is_refused_before_it_is_walked_many_times(
        tmp_path):
    """50,000 numbers held 2,000 times: counting each inner list only after walking it would
    walk 100 million numbers."""
    inner = list(range(50_000))
    entries = [entry(1), entry(2)]
    entries[1]["input_sizes"] = [inner] * 2000
    path = write(tmp_path, 0, entries)
    started = time.process_time()
    with pytest.raises(DumpError, match="hold more than"):
        read_dump(str(path))
    assert time.process_time() - started < 1.5


def test_real_sizes_at_the_cap_and_many_tensors_read_as_they_are(tmp_path):
    deep: list = [8]
    for _ in range(MAX_DEPTH - 1):
        deep = [deep]                                   # MAX_DEPTH lists, nothing shared
    many = [[4, 1024, 3, 3] for _ in range(5000)]       # a coalesced collective's tensors
    entries = [entry(1), entry(2), entry(3)]
    entries[1]["input_sizes"], entries[2]["input_sizes"] = deep, many
    entries[2]["input_dtypes"] = ["BFloat16"] * 5000
    dump = read_dump(str(write(tmp_path, 0, entries)))
    assert dump.entries[1].input_sizes == deep and dump.entries[2].input_sizes == many
    assert dump.entries[2].input_dtypes == ["BFloat16"] * 5000
    with pytest.raises(DumpError, match=f"nests more than {MAX_DEPTH} levels deep"):
        read_dump(str(write(tmp_path, 1, [entry(1, sizes=[[deep]])])))


def test_a_frame_whose_name_is_not_text_is_skipped_like_one_that_is_not_a_dict(tmp_path):
    frames = [{"name": _nested(30), "filename": "/job/train.py", "line": 1},
              {"name": "train_step", "filename": _nested(30), "line": 2},
              "not a frame",
              {"name": "train_step", "filename": "/job/train.py", "line": 40},
              {"name": 7, "filename": None, "line": 3}]
    for rank in range(2):
        write(tmp_path, rank, [entry(1, frames=frames), entry(2, state="started")])
    write(tmp_path, 2, [entry(1, frames=frames)])
    dumps = [read_dump(str(p)) for p in sorted(tmp_path.iterdir())]
    started = time.process_time()
    assert [f.describe() for f in dumps[2].entries[0].frames] == [
        "train_step (/job/train.py:40)", "7 (None:3)"]
    verdict = analyze(dumps).first_failure()
    assert verdict.culprits == (2,) and verdict.culprit_frame == "train_step (/job/train.py:40)"
    assert time.process_time() - started < 0.5


def test_the_budget_counts_what_a_walk_visits():
    budget = Budget(left=11, size=0)
    assert budget.listed([[1, 2], "ab"], "sizes") == [[1, 2], "ab"]   # 1 + 3 + 3
    assert budget.left == 4
    assert budget.text(("a", None), "name") == "('a', None)"          # 1 + 2 + 1
    assert budget.left == 0
    with pytest.raises(Overgrown, match="^x and the values before it hold more than"):
        budget.listed([1], "x")
    assert Budget(left=5, size=0).listed({"not": "a list"}, "x") == []
    assert Budget(left=0, size=0).text(12, "x") == "12"
    with pytest.raises(Overgrown, match="nests more than 8 levels"):
        Budget.for_size(0).check({"k": _nested(9)}, "a dict")
