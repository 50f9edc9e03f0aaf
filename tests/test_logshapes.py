"""The log shapes (logshapes.py, logtails.py) are the collectors' own: prefix shapes as the
real tools print them, the wrap width, Ray's fold text, the cut markers, the tails' agreement
with the log. A wrong shape would measure the instrument instead of explain."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import logshapes
import logtails
from logshapes import (CONSEQUENCES, PREFIXES, RAY_NOTE, cut_middle, fold_repeats, interleave,
                       last_stamp, named_host, named_rank, prefixed, split, wrap)

LOG = "first line\n\nNCCL WARN something failed\nlast line\n"


# -- (b) prefixes --------------------------------------------------------------------------------
@pytest.mark.parametrize("style, first, blank", [
    ("srun-l", "0: first line", "0: "),
    ("torchrun-tee", "[default0]:first line", "[default0]:"),
    ("torch-rank", "[rank0]: first line", ""),
    ("ray", "(RayTrainWorker pid=12345, ip=10.0.0.1) first line",
     "(RayTrainWorker pid=12345, ip=10.0.0.1) "),
    ("kubectl", "[pod/train-0/main] first line", "[pod/train-0/main] "),
    ("compose", "train-1  | first line", "train-1  | "),
])
def test_a_prefix_is_the_collector_s_own(style, first, blank):
    lines = split(prefixed(LOG, style))
    assert lines[0] == first
    assert lines[1] == blank  # torch's excepthook leaves empty lines bare, the others do not
    assert lines[3].endswith("last line") and len(lines) == 4


@pytest.mark.parametrize("style, pattern", [
    ("journald", r"[A-Z][a-z]{2} \d\d \d\d:\d\d:\d\d node1 python3\[\d+\]: first line"),
    ("ts", r"[A-Z][a-z]{2} \d\d \d\d:\d\d:\d\d first line"),
])
def test_a_timestamping_prefix_is_syslog_time(style, pattern):
    assert re.fullmatch(pattern, split(prefixed(LOG, style))[0])
    assert split(prefixed(LOG, style))[0].startswith("Dec 07 02:55:21 ")


def test_a_prefix_names_the_rank_the_log_names():
    log = "[rank3]: RuntimeError: boom\n"
    assert prefixed(log, "srun-l").startswith("3: [rank3]")
    assert prefixed(log, "torchrun-tee").startswith("[default3]:[rank3]")
    assert prefixed(log, "kubectl").startswith("[pod/train-3/main] ")


def test_compose_pads_the_name_to_the_longest_plus_one():
    assert PREFIXES["compose"].make(9, 0) == "train-10  | "


def test_every_prefix_is_named():
    assert set(PREFIXES) == {"srun-l", "torchrun-tee", "torch-rank", "ray", "kubectl", "compose",
                             "journald", "ts"}


# -- (c) interleaved consequences -----------------------------------------------------------------
def test_interleave_keeps_the_log_and_adds_other_ranks_consequences():
    log = "".join(f"[rank2]: line {n}\n" for n in range(30)) + "NCCL version 2.27.7\n"
    out = split(interleave(log))
    assert [line for line in out if line.startswith("[rank2]: line")] == split(log)[:-1]
    added = [line for line in out if line not in split(log)]
    assert len(added) == len(CONSEQUENCES)
    assert not any(re.search(r"\[rank2\]|Rank 2\]|worker-2:", line) for line in added)
    assert any("NCCL version 2.27.7" in line for line in added)
    positions = [out.index(line) for line in added]
    assert positions[0] > 0 and positions[-1] < len(out) - 1  # between the log's lines


# -- (d) Ray's folding -----------------------------------------------------------------------------
def test_fold_prints_the_first_and_one_repeated_line_with_the_note_once():
    log = "".join(f"(pid={100 + n}) loading layer\n" for n in range(4)) + "other\n" + \
        "".join(f"rank {n} done\n" for n in range(3))
    out = split(fold_repeats(log))
    assert out[0] == "(pid=100) loading layer"
    assert out.count("(pid=103) loading layer [repeated 3x across cluster]" + RAY_NOTE) == 1
    assert "rank 2 done [repeated 2x across cluster]" in out  # the note only the first time
    assert "other" in out and len(out) == 5


def test_fold_leaves_a_single_repeat_and_number_only_lines_as_they_are():
    assert fold_repeats("a 1\na 2\n") == "a 1\na 2\n"  # count 1: the line itself, once more
    assert fold_repeats("12\n13\n14\n") == "12\n13\n14\n"  # ray-project/ray#45485


def test_fold_closes_its_window():
    log = "x 1\n" + "".join(f"filler {chr(97 + n)}\n" for n in range(25)) + "x 2\n"
    assert fold_repeats(log, window=20).count("x ") == 2  # the repeat came after the window
    assert "repeated" not in fold_repeats(log, window=20)


# -- (e) wrap ----------------------------------------------------------------------------------------
def test_wrap_cuts_at_80_columns_and_loses_nothing():
    line = "NCCL WARN " + "x" * 200
    out = split(wrap(line + "\nshort\n"))
    assert [len(piece) for piece in out] == [80, 80, 50, 5]
    assert "".join(out[:3]) == line


@pytest.mark.skipif(shutil.which("fold") is None, reason="needs coreutils fold")
def test_wrap_agrees_with_fold_w_80():
    text = ("a" * 79 + "\tb" * 30 + "\n" + "y" * 241 + "\n\n" + "z\tw " * 40 + "\n")
    done = subprocess.run(["fold", "-w", "80"], input=text, capture_output=True, text=True,
                          timeout=10)
    assert wrap(text, 80) == done.stdout


# -- (f) cut -----------------------------------------------------------------------------------------
def test_cut_keeps_head_tail_and_the_root_cause_line():
    log = "".join(f"line {n}\n" for n in range(1, 41))
    out = split(cut_middle(log, keep={21}))
    assert out[0] == "line 1" and out[-1] == "line 40" and "line 21" in out
    assert out.count("...") == 1
    counted = split(cut_middle(log, keep={21}, count=True))
    marker = next(line for line in counted if line.startswith("... "))
    omitted = int(re.fullmatch(r"\.\.\. (\d+) lines omitted \.\.\.", marker).group(1))
    assert len(counted) == 40 - omitted + 1


def test_cut_leaves_a_log_too_short_to_cut():
    assert cut_middle("a\nb\n") == "a\nb\n"
    assert cut_middle("a\nb\nc\n", keep={2}) == "a\nb\nc\n"


# -- what the log names ------------------------------------------------------------------------------
def test_the_rank_and_host_come_from_an_error_line_first():
    log = "[rank0]: starting\nnode7:12:34 [1] NCCL WARN Net failed\n[rank5]: RuntimeError: x\n"
    assert named_rank(log) == 5
    assert named_host(log) == "node7"
    assert named_rank("nothing here\n") is None


def test_the_latest_stamp_reads_full_and_glog_times():
    log = "2024-03-01 10:00:00 start\n[E301 10:05:07.1234 x.cpp:1] failed\n"
    assert last_stamp(log) == datetime(2024, 3, 1, 10, 5, 7)
    assert last_stamp("no time\n") is None


# -- (a) tails ---------------------------------------------------------------------------------------
def test_every_tail_is_listed_with_how_it_was_made():
    index = tomllib.loads((logtails.FOLDER / "index.toml").read_text("utf-8"))["tail"]
    assert {e["file"] for e in index} == {f"{name}.txt" for name in logtails.load()}
    assert len(index) == 8
    for entry in index:
        assert entry["launcher"] in entry["command"] and entry["version"] and entry["made"]
        assert "/" not in entry["command"]  # no machine paths


def test_a_torchrun_tail_agrees_with_the_log():
    log = "node7:1:2 [0] NCCL WARN failed\n[rank3]: RuntimeError: x\n2024-03-01 10:00:00 end\n"
    out = logtails.append_tail(log, logtails.load()["torchrun-abort"])
    assert out.startswith(log)
    tail = out[len(log):]
    assert "rank      : 3 (local_rank: 3)" in tail and "rank      : 0 (local_rank: 0)" in tail
    assert "local_rank: 3 (pid:" in tail and "host      : node7" in tail
    assert "time      : 2024-03-01_10:00:01" in tail and "E0301 10:00:01" in tail
    assert "node1" not in tail


def test_srun_and_mpirun_tails_agree_with_the_log():
    tails = logtails.load()
    log = "[rank0]: RuntimeError: x\n"
    srun = logtails.append_tail(log, tails["srun-l-abort"])
    assert "task 0: Aborted (core dumped)" in srun and "task 1: Terminated" in srun
    assert "\n1: slurmstepd-" in srun  # the survivor's label follows its rank
    mpirun = logtails.append_tail("[rank4]: x failed\n", tails["mpirun-exit1"])
    assert "Process name: [[4242,1],4]" in mpirun
    assert logtails.append_tail("no rank\n", tails["srun-exit1"]).endswith(tails["srun-exit1"])


def test_a_log_without_a_final_newline_gets_one_before_the_tail():
    out = logtails.append_tail("last", logtails.load()["mpirun-abort"])
    assert out.startswith("last\n---")


def test_the_shapes_module_names_its_sources():
    source = Path(logshapes.__file__).read_text("utf-8")
    for tool in ("srun -l", "tail_log.py", "distributed_c10d.py", "print_worker_logs",
                 "kubectl", "docker compose", "journalctl", "moreutils ts"):
        assert tool in source, tool
