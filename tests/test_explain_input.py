"""explain on input that is no log: binary files, empty files and folders, one huge line."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LOGS = Path(__file__).resolve().parent / "data" / "logs"
MOTIVATING = LOGS / "written" / "lightning-motivating-case-6of4.log"


def explain(*args: str, stdin: bytes | None = None):
    return subprocess.run([sys.executable, "-m", "ncclcheck", "explain", *args], input=stdin,
                          capture_output=True, timeout=120)


def _notes(done) -> list[str]:
    return done.stderr.decode().strip().splitlines()


def test_a_binary_file_alone_is_unusable_input(tmp_path):
    binary = tmp_path / "libfake.so"
    # a library holds NCCL's message formats; read as text it would "match"
    binary.write_bytes(b"\x7fELF\x00\x00" + b"NCCL WARN Invalid rank requested : 6/4\n" * 3)
    done = explain("--format", "json", str(binary))
    assert done.returncode == 2 and done.stdout == b""
    assert len(_notes(done)) == 1 and "binary, not a log" in _notes(done)[0]
    assert str(binary) in _notes(done)[0]


def test_a_real_executable_says_binary():
    done = explain(shutil.which("ls") or "/bin/ls")
    assert done.returncode == 2 and b"Traceback" not in done.stderr
    assert "binary" in done.stderr.decode()


def test_binary_files_in_a_folder_are_skipped_and_logs_still_read(tmp_path):
    (tmp_path / "core.1234").write_bytes(b"\x00" * 100 + b"NCCL WARN Invalid rank requested : 6/4")
    shutil.copy(MOTIVATING, tmp_path / "rank6.log")
    done = explain("--format", "json", str(tmp_path))
    data = json.loads(done.stdout)
    assert data["findings"][0]["id"] == "nccl.invalid_rank"
    assert data["files"] == [str(tmp_path / "rank6.log")]
    assert _notes(done) == [f"ncclcheck explain: skipped 1 binary file(s), not logs: "
                            f"{tmp_path / 'core.1234'}"]


def test_empty_file_folder_and_stdin_say_no_lines_were_read(tmp_path):
    (tmp_path / "empty.log").write_bytes(b"")
    (tmp_path / "folder").mkdir()
    for args, stdin in (((str(tmp_path / "empty.log"),), None), ((str(tmp_path / "folder"),), None),
                        (("-",), b"")):
        done = explain(*args, stdin=stdin)
        assert done.returncode == 0
        assert any("no lines were read" in n for n in _notes(done)), (args, done.stderr)


def test_a_log_with_lines_gets_no_note():
    done = explain(str(MOTIVATING))
    assert done.returncode == 0 and done.stderr == b""


def test_process_substitution_is_refused_and_a_pipe_into_dash_is_read():
    """``<(cmd)`` is a pipe under /dev/fd: refused at once, with the way that works."""
    proc = subprocess.run(["bash", "-c", f'"{sys.executable}" -m ncclcheck explain --format json '
                           f'<(cat "{MOTIVATING}")'], capture_output=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == b""
    [line] = _notes(proc)
    assert re.fullmatch(r"ncclcheck explain: /dev/fd/\d+: refused, a named pipe is not a log "
                        r"file \(.*cmd \| ncclcheck explain -\)", line), line
    piped = subprocess.run(["bash", "-c", f'cat "{MOTIVATING}" | "{sys.executable}" -m ncclcheck '
                            f'explain --format json -'], capture_output=True, timeout=60)
    assert json.loads(piped.stdout)["findings"][0]["id"] == "nccl.invalid_rank"


@pytest.mark.slow  # seconds: the full suite runs it, the quick loop leaves it out
def test_a_huge_single_line_shows_the_text_around_the_match(tmp_path):
    huge = tmp_path / "one-line.log"
    with open(huge, "wb") as out:
        out.write(b"x" * (10 << 20))
        out.write(b" NCCL WARN Invalid rank requested : 6/4 ")
        out.write(b"y" * (10 << 20) + b"\n")
    done = explain("--format", "json", str(huge))
    root = json.loads(done.stdout)["findings"][0]
    assert root["id"] == "nccl.invalid_rank"
    assert "Invalid rank requested : 6/4" in root["text"][:300]  # the table shows 300 chars
    assert root["text"].startswith("…") and len(root["text"]) <= 2002
    table = explain(str(huge)).stdout.decode()
    line_part = table.split("  line:", 1)[1].split("  what:", 1)[0]
    assert "Invalid rank" in line_part
