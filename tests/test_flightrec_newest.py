"""Large dumps read by their newest entries: the cut equals the whole dump's tail, every layout
it cannot cut is read whole, and the verdict is the one whole dumps give.

A real dump is written by torch's own recorder over Gloo (a subprocess, one rank); jobs of many
ranks are built from the format's schema (tests/frdumps.py), as NCCL's states need a GPU.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from frdumps import Hostile, entry, mutated, write
from ncclcheck.explain import hangs
from ncclcheck.explain.engine import explain
from ncclcheck.explain.findings import Findings
from ncclcheck.explain.reader import Source
from ncclcheck.flightrec.load import KEPT_NEWEST, DumpError, read_dump

WINDOW = hangs.FIRST_WINDOW


@pytest.fixture
def real_dump(cycling_real_dump) -> bytes:
    """300 collectives (all_reduce and broadcast) in a 200-entry buffer: the ring wrapped. (conftest's, made once a session)"""
    return cycling_real_dump


def _both(path: Path):
    return read_dump(str(path), newest=WINDOW), read_dump(str(path))


def test_the_newest_entries_of_a_real_dump_are_the_last_of_the_whole(tmp_path, real_dump):
    path = tmp_path / "nccl_trace_rank_0"
    path.write_bytes(real_dump)
    cut, whole = _both(path)
    assert len(whole.entries) == 200 and whole.complete
    assert not cut.complete and cut.entries == whole.entries[-WINDOW:]
    assert cut.oldest == whole.entries[0] and cut.buffer_wrapped is True
    assert [e.seq for e in cut.entries] == list(range(237, 301))
    assert cut.entries[-1].frames == whole.entries[-1].frames
    assert (cut.version, cut.rank, cut.completed_upto) == (whole.version, whole.rank,
                                                           whole.completed_upto)


@pytest.mark.parametrize("protocol", [2, 3])
def test_python_pickles_of_torchs_layout_are_cut_too(tmp_path, protocol):
    path = write(tmp_path, 0, [entry(s, record_id=s - 1) for s in range(1, 301)],
                 protocol=protocol)
    cut, whole = _both(path)
    assert not cut.complete and cut.entries == whole.entries[-WINDOW:]
    assert cut.buffer_wrapped is False          # record ids count from 0: nothing dropped


@pytest.mark.parametrize("layout", ["protocol 4", "protocol 5", "json", "entries first",
                                    "few entries", "string first written in the middle"])
def test_what_cannot_be_cut_is_read_whole(tmp_path, layout):
    entries = [entry(s) for s in range(1, 301)]
    if layout == "few entries":
        entries = entries[:WINDOW]
    if layout == "string first written in the middle":
        # the op's name is pickled once, in the middle the cut skips; the tail refers to it
        entries = [entry(s, op="all_gather" if s in (150, 299) else "all_reduce")
                   for s in range(1, 301)]
    if layout == "entries first":
        path = tmp_path / "nccl_trace_rank_0"
        path.write_bytes(pickle.dumps({"entries": entries, "version": "2.10"}, protocol=2))
    else:
        protocol = int(layout.split()[1]) if layout.startswith("protocol") else 2
        path = write(tmp_path, 0, entries, fmt="json" if layout == "json" else "pickle",
                     protocol=protocol)
    cut, whole = _both(path)
    assert cut.complete and cut.entries == whole.entries and len(whole.entries) == len(entries)


@pytest.mark.parametrize("where", [150, 295])
def test_a_hostile_entry_runs_nothing_in_the_skipped_middle_or_the_tail(tmp_path, where):
    marker = tmp_path / "owned"
    entries = [entry(s) for s in range(1, 301)]
    entries[where] = {**entries[where], "state": Hostile(str(marker))}
    path = write(tmp_path, 0, entries)
    if where >= 300 - WINDOW:
        with pytest.raises(DumpError, match="refers to code"):
            read_dump(str(path), newest=WINDOW)
    else:
        assert not read_dump(str(path), newest=WINDOW).complete
    with pytest.raises(DumpError, match="refers to code"):
        read_dump(str(path))
    assert not marker.exists()


def test_mutated_large_real_dumps_never_raise_anything_but_a_dump_error(tmp_path, real_dump):
    path = tmp_path / "nccl_trace_rank_0"
    outcomes = {"cut": 0, "whole": 0, "refused": 0}
    for data in mutated(real_dump, 300, seed=7):
        path.write_bytes(data)
        try:
            dump = read_dump(str(path), newest=WINDOW)
            outcomes["whole" if dump.complete else "cut"] += 1
        except DumpError as exc:
            assert "\n" not in str(exc)
            outcomes["refused"] += 1
    assert outcomes["refused"] and outcomes["cut"], outcomes


def _job(folder: Path, ranks: int, count: int, stops: dict[int, int] | None = None,
         change=None, dropped: int = 0, subgroup=None) -> Path:
    """``ranks`` dumps of ``count`` collectives; rank r of ``stops`` entered only its first
    ``stops[r]``; ``change(rank, seq)`` gives an entry's keyword changes (another op, sizes).
    ``subgroup``: (members, every) puts every ``every``-th collective in a group of members;
    ``dropped``: the ring buffer lost that many of the oldest."""
    folder.mkdir(exist_ok=True)
    for rank in range(ranks):
        entries, sub_seq, main_seq = [], 0, 0
        for i in range(1, count + 1):
            in_sub = subgroup is not None and rank in subgroup[0] and i % subgroup[1] != 0
            if in_sub:
                sub_seq += 1
                seq, group, pg = sub_seq, ("1", "sub"), 1
            else:
                main_seq += 1
                seq, group, pg = main_seq, ("0", "default_pg"), 0
            if rank in (stops or {}) and ((not in_sub and subgroup is None) or in_sub) \
                    and seq > stops[rank]:
                continue
            kw = change(rank, seq) if change and not in_sub else {}
            entries.append(entry(seq, group=group, pg_id=pg, record_id=i - 1, **kw))
        write(folder, rank, entries[dropped:])
    return folder


SCENARIOS = {
    "one rank misses the last collective": dict(stops={5: 299}),
    "one rank far behind (a larger window)": dict(stops={2: 150}),
    "one rank very far behind (whole dumps, bounded)": dict(stops={7: 40}),
    "a different dtype near the end": dict(change=lambda r, s: {"dtypes": ("Half",)}
                                           if r == 3 and s == 290 else {}),
    "a desync in a subgroup whose collectives dominate the tail": dict(
        stops={3: 200}, subgroup=((2, 3), 20)),
    "a wrapped ring buffer": dict(stops={1: 299}, dropped=100),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_verdict_from_newest_entries_is_the_verdict_from_whole_dumps(tmp_path, name,
                                                                        monkeypatch):
    folder = _job(tmp_path / "job", 8, 300, **SCENARIOS[name])
    windowed = hangs.read_dumps([_source(p) for p in sorted(folder.iterdir())])
    first = [d.complete for d in windowed.dumps]
    fast = explain([str(folder)]).to_dict()
    monkeypatch.setattr(hangs, "FIRST_WINDOW", None)
    slow = explain([str(folder)]).to_dict()
    assert sum(first) <= 1                      # the cut was taken (a short dump is whole)
    assert fast["findings"][0]["id"] == slow["findings"][0]["id"]
    assert fast["findings"][0]["facts"] == slow["findings"][0]["facts"]
    assert fast["findings"][0]["facts"]["ranks"]


def test_a_rank_far_behind_is_read_again_keeping_only_what_the_verdict_needs(tmp_path):
    folder = _job(tmp_path / "job", 4, 1200, stops={2: 100})
    job = hangs.read_dumps([_source(p) for p in sorted(folder.iterdir())])
    hits = Findings()
    analysis, _ = hangs.add_hang(hits, job)
    verdict = analysis.first_failure()
    assert (verdict.culprits, verdict.seq) == ((2,), 101)
    assert job.window is None or job.window > 1000   # read back to rank 2's last collective
    for dump in job.dumps:
        assert len(dump.entries) <= KEPT_NEWEST + 2 * 8 + 1


def test_a_disagreement_the_job_ran_past_is_not_the_hang(tmp_path):
    """Rank 4 called a different dtype at #20 and the job went on for 280 collectives: the
    newest entries show the hang (rank 6 never entered #300), which is what explain names."""
    folder = _job(tmp_path / "job", 8, 300, stops={6: 299},
                  change=lambda r, s: {"dtypes": ("Half",)} if r == 4 and s == 20 else {})
    root = explain([str(folder)]).to_dict()["findings"][0]
    assert (root["id"], root["facts"]["ranks"], root["facts"]["seq"]) == (
        "fr.rank_never_arrived", [6], 300)


def _source(path: Path) -> Source:
    return Source(str(path), str(path))
