"""Reading a log as a person does: wrapped lines re-joined, exceptions read as one unit."""

from __future__ import annotations

import io
from pathlib import Path

from ncclcheck.explain.engine import explain
from ncclcheck.explain.reflow import unwrap, wrap_width

FAILURE = ("[2026-06-11 11:44:19] node2:2251:2251 [2] init.cc:1872 NCCL WARN Invalid rank "
           "requested : 6/4 (the world size reached NCCL as the per-node GPU count)")


def _wrap(text: str, width: int = 80) -> str:
    return "\n".join(text[i:i + width] for i in range(0, len(text), width))


def _findings(tmp_path: Path, text: str) -> list[dict]:
    path = tmp_path / "job.log"
    path.write_text(text, "utf-8")
    return explain([str(path)]).to_dict()["findings"]


def test_terminal_wrapped_line_is_rejoined_and_keeps_the_file_line_number(tmp_path):
    text = "start\n" + _wrap("x" * 30 + " launch " + "y" * 100) + "\n" + _wrap(FAILURE) + "\n"
    assert "Invalid rank requested" not in text  # the wrap cut the literal
    root = _findings(tmp_path, text)[0]
    assert root["id"] == "nccl.invalid_rank" and root["facts"] == {"rank": 6, "nranks": 4}
    assert root["line"] == 4  # line 1 "start", lines 2-3 the launch line, line 4 the failure
    assert root["host"] == "node2"


def test_full_width_lines_that_start_new_records_are_not_joined():
    lines = [f"[rank{r}]:[E906 12:16:32.6 ProcessGroupNCCL.cpp:607] [Rank {r}] " + "z" * 60
             for r in range(4)]
    assert wrap_width(("\n".join(lines) + "\n").encode(), complete=True) is None
    stream, physical = unwrap(io.BytesIO(("\n".join(lines) + "\n").encode()))
    assert stream.read().decode().splitlines() == lines and physical(3) == 3


def test_separator_lines_do_not_make_a_file_wrapped():
    banner = "*" * 90
    text = f"{banner}\nSetting OMP_NUM_THREADS to 1\n{banner}\nok\n".encode()
    assert wrap_width(text, complete=True) is None


def test_line_numbers_map_back_through_many_joins():
    long = "abc " * 50
    text = ("\n".join([_wrap(long, 64), "short", _wrap(long, 64), "last"]) + "\n").encode()
    stream, physical = unwrap(io.BytesIO(text))
    logical = stream.read().decode().splitlines()
    assert logical == [long, "short", long, "last"]
    assert [physical(n) for n in (1, 2, 3, 4)] == [1, 5, 6, 10]
