"""Tables follow the terminal: $COLUMNS or the tty's width, long cells wrapped, every word
kept; not on a terminal they are the same byte for byte as the fixed layout always drew."""

from __future__ import annotations

import io
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ncclcheck.report.table import render_table
from ncclcheck.report.width import MIN_WIDTH, output_width

sys.path.insert(0, str(Path(__file__).parent))
from widthsample import sample_report  # noqa: E402

EXPECTED = Path(__file__).parent / "data" / "report" / "table_not_a_tty.txt"
# nccl-tests' column headers and rows keep their 86 characters whatever the width
NCCL_COLUMNS = re.compile(r"^( +\d+ +\d+ |#\s+(in-place|size|\(B\)))")


@pytest.mark.parametrize("env, width", [({"COLUMNS": "80"}, 80), ({"COLUMNS": " 200 "}, 200),
                                        ({"COLUMNS": "20"}, MIN_WIDTH),
                                        ({"COLUMNS": "abc"}, None), ({"COLUMNS": "-5"}, None),
                                        ({"COLUMNS": "0"}, None), ({"COLUMNS": ""}, None),
                                        ({}, None)])
def test_the_width_is_columns_else_none_off_a_terminal(env, width):
    assert output_width(env, io.StringIO()) == width


def _cells(text: str) -> list[dict[str, str]]:
    """The checks table read back: each row's cells, their wrapped lines joined without
    whitespace (the columns are where the dashes under the header are)."""
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("--------  "))
    spans = [m.span() for m in re.finditer(r"-+", lines[rule])]
    names = lines[rule - 1].split()
    rows: list[dict[str, str]] = []
    for line in lines[rule + 1:]:
        if not line.strip():
            break
        cells = [line[a:b if i < len(spans) - 1 else None].strip()
                 for i, (a, b) in enumerate(spans)]
        if cells[0]:
            rows.append(dict.fromkeys(names, ""))
        for name, cell in zip(names, cells):
            rows[-1][name] += re.sub(r"\s+", "", cell)
    return rows


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


@pytest.mark.parametrize("columns", ["80", "200", "60"])
def test_no_line_is_wider_than_columns_and_every_word_is_kept(monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    report = sample_report()
    text = render_table(report)
    lines = text.splitlines()
    assert all(len(line) <= int(columns) for line in lines if not NCCL_COLUMNS.match(line)), \
        [line for line in lines if len(line) > int(columns)]
    rows = _cells(text)
    assert [r["check"] for r in rows] == [c.id for c in report.checks]
    for row, check in zip(rows, report.checks):
        assert row["summary"] == _squeezed(check.summary)
        assert row["where"] == _squeezed(f"{check.host or ''} "
                                         f"{'' if check.rank is None else f'rank {check.rank}'}")
    fixes = _squeezed(text.split("How to fix:")[1])
    assert all(_squeezed(c.fix) in fixes for c in report.checks if c.fix)
    for node in report.bench.isolate["per_node"]:
        # the sweep's comment lines wrap onto lines that start with # too
        assert _squeezed(" ".join(node["partners"])) in _squeezed(text.replace("#", ""))
    assert "Result: FAIL" in text
    if columns == "200":
        assert max(len(line) for line in lines) > 120  # the room is used, not fixed at ~100


def test_not_a_tty_without_columns_is_byte_identical_to_the_fixed_layout(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert render_table(sample_report()) + "\n" == EXPECTED.read_text(encoding="utf-8")


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run([sys.executable, "-m", "ncclcheck", *args], capture_output=True,
                          text=True, env={**base, **env}, timeout=60)


@pytest.mark.parametrize("args", [("checks",), ("checks", "bench.allreduce")])
def test_the_command_line_follows_columns_and_ignores_a_malformed_one(args):
    fixed = _cli(*args)
    assert fixed.returncode == 0, fixed.stderr
    assert _cli(*args, COLUMNS="wide").stdout == fixed.stdout  # ignored, not a crash
    narrow = _cli(*args, COLUMNS="70")
    assert narrow.returncode == 0 and max(map(len, narrow.stdout.splitlines())) <= 70
    assert _squeezed(narrow.stdout) == _squeezed(fixed.stdout)  # the same words, rewrapped
    wide = _cli(*args, COLUMNS="180")
    assert max(map(len, wide.stdout.splitlines())) > 100


def test_a_real_terminal_s_width_is_followed():
    """`ncclcheck checks` on a pseudo-terminal 72 columns wide, no COLUMNS: the tty decides."""
    import fcntl
    import pty
    import struct
    import termios
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 72, 0, 0))
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.Popen([sys.executable, "-m", "ncclcheck", "checks"], stdin=slave,
                            stdout=slave, stderr=subprocess.PIPE, env=env, close_fds=True)
    os.close(slave)
    chunks, deadline = [], time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
    assert proc.returncode == 0, proc.stderr.read()
    lines = b"".join(chunks).decode().replace("\r\n", "\n").splitlines()
    assert len(lines) > 20 and max(map(len, lines)) <= 72
    assert max(map(len, lines)) > 60  # wrapped to the terminal, not to the fixed 100
