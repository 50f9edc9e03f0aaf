"""explain on paths that are no log file, or stop being one: devices, pipes, /proc, files that
cannot be opened or vanish while the rest is read."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from ncclcheck.cli import cli
from ncclcheck.explain import cli as explain_cli

LOGS = Path(__file__).resolve().parent / "data" / "logs"
MOTIVATING = LOGS / "written" / "lightning-motivating-case-6of4.log"
PREFIX = "ncclcheck explain: "
DEADLINE_S = 30  # refusing a path reads nothing: far below this even on a loaded host


def explain(*args: str, timeout: float = 120, user: list[str] | None = None,
            env: dict[str, str] | None = None):
    return subprocess.run([*(user or []), sys.executable, "-m", "ncclcheck", "explain", *args],
                          capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL,
                          env=env)


def lines(done) -> list[str]:
    return done.stderr.decode().splitlines()


@pytest.mark.parametrize("make", ["device", "fifo", "proc", "sys", "socket"])
def test_a_path_that_is_no_log_file_is_refused_at_once(tmp_path, make):
    """Read, /dev/zero never ends and a FIFO without a writer never starts."""
    if make == "device":
        path = "/dev/zero"
    elif make == "fifo":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)
    elif make == "proc":
        path = "/proc/self/status"
    elif make == "sys":
        path = "/sys/kernel"
    else:
        path = str(tmp_path / "sock")
        server = socket.socket(socket.AF_UNIX)
        server.bind(path)
    started = time.monotonic()
    try:
        done = explain("--format", "json", path, timeout=DEADLINE_S)
    finally:
        if make == "socket":
            server.close()
    assert time.monotonic() - started < DEADLINE_S
    assert done.returncode == 2 and done.stdout == b"", done.stderr
    [line] = lines(done)
    assert line.startswith(f"{PREFIX}{path}: refused, "), line
    assert "Traceback" not in line


def test_devices_pipes_and_kernel_files_inside_a_folder_are_skipped_with_a_note(tmp_path):
    shutil.copy(MOTIVATING, tmp_path / "rank6.log")
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "status").symlink_to("/proc/self/status")
    (tmp_path / "gone.log").symlink_to(tmp_path / "nothing-here")
    done = explain("--format", "json", str(tmp_path), timeout=DEADLINE_S * 2)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["findings"][0]["id"] == "nccl.invalid_rank"
    assert data["files"] == [str(tmp_path / "rank6.log")]
    skipped = {name: f"{tmp_path / name}: skipped, " for name in
               ("gone.log", "pipe", "status", "zero")}
    notes = [n for n in data["notes"] if n["id"] == "explain.unread"]
    assert [n["category"] for n in notes] == [None] * 4
    assert [n["text"].split(", ")[0] + ", " for n in notes] == list(skipped.values())
    assert lines(done) == [PREFIX + n["text"] for n in notes]


def test_nothing_readable_in_a_folder_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "a.log").symlink_to(tmp_path / "nothing-here")
    os.mkfifo(tmp_path / "b")
    done = explain(str(tmp_path), timeout=DEADLINE_S)
    assert done.returncode == 2 and done.stdout == b""
    assert lines(done) == [f"{PREFIX}{tmp_path / 'a.log'}: skipped, a link to nothing (and 1 "
                           "more input(s) unreadable or binary: nothing was read)"]


def test_a_file_that_cannot_be_read_mid_way_is_a_note_and_the_rest_is_read(tmp_path):
    whole = gzip.compress(MOTIVATING.read_bytes() * 50)
    (tmp_path / "cut.log.gz").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "core").write_bytes(b"\0ELF")
    shutil.copy(MOTIVATING, tmp_path / "rank6.log")
    done = explain("--format", "json", str(tmp_path))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["findings"][0]["id"] == "nccl.invalid_rank"
    assert data["files"] == [str(tmp_path / "rank6.log")]
    [cut] = [n["text"] for n in data["notes"] if n["id"] == "explain.unread"]
    assert cut.startswith(f"{tmp_path / 'cut.log.gz'}: cannot read: ")
    assert lines(done) == [PREFIX + cut, f"{PREFIX}skipped 1 binary file(s), not logs: "
                                         f"{tmp_path / 'core'}"]


def _vanishing(real, doomed: Path):
    def wrapped(*args, **kwargs):
        found = real(*args, **kwargs)
        doomed.unlink()
        return found
    return wrapped


@pytest.mark.parametrize("after", ["gather", "screen"])
def test_a_file_that_vanishes_after_listing_is_a_note(tmp_path, monkeypatch, after):
    """Deleted after the folder was listed (gather), or after it was looked at (screen) and
    before it was read."""
    shutil.copy(MOTIVATING, tmp_path / "rank6.log")
    (tmp_path / "rank7.log").write_text("step 1 ok\n")
    monkeypatch.setattr(explain_cli, after,
                        _vanishing(getattr(explain_cli, after), tmp_path / "rank7.log"))
    result = CliRunner().invoke(cli, ["explain", "--format", "json", str(tmp_path)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["findings"][0]["id"] == "nccl.invalid_rank"
    assert data["files"] == [str(tmp_path / "rank6.log")]
    note = f"{tmp_path / 'rank7.log'}: vanished before it was read"
    assert [n["text"] for n in data["notes"] if n["id"] == "explain.unread"] == [note]
    assert result.stderr.splitlines() == [PREFIX + note]


def _as_nobody() -> list[str]:
    """setpriv's command to run as uid/gid 65534, when this process may and can."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to read as another user (root reads anything)")
    command = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    probe = subprocess.run([*command, sys.executable, "-c", "import ncclcheck"],
                           capture_output=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"this Python cannot run as uid 65534: {probe.stderr.decode()[-200:]}")
    return command


def test_an_unreadable_file_is_a_note_among_others_and_alone_exit_2():
    nobody = _as_nobody()
    with tempfile.TemporaryDirectory() as top:
        os.chmod(top, 0o755)
        folder = Path(top) / "job"
        folder.mkdir(mode=0o755)
        shutil.copy(MOTIVATING, folder / "rank6.log")
        os.chmod(folder / "rank6.log", 0o644)
        secret = folder / "rank7.log"
        secret.write_text("RuntimeError: CUDA error: an illegal memory access was encountered\n")
        os.chmod(secret, 0o000)
        cache = Path(top) / "cache"
        cache.mkdir()
        os.chown(cache, 65534, 65534)
        env = {**os.environ, "NCCLCHECK_CACHE_DIR": str(cache), "HOME": str(cache)}
        for given in ([str(folder)], [str(folder / "rank6.log"), str(secret)]):
            done = explain("--format", "json", *given, user=nobody, env=env)
            assert done.returncode == 0, done.stderr
            data = json.loads(done.stdout)
            assert data["findings"][0]["id"] == "nccl.invalid_rank"
            note = f"{secret}: cannot read: Permission denied"
            assert [n["text"] for n in data["notes"] if n["id"] == "explain.unread"] == [note]
            assert lines(done) == [PREFIX + note]
        alone = explain(str(secret), user=nobody, env=env)
        assert alone.returncode == 2 and alone.stdout == b""
        assert lines(alone) == [f"{PREFIX}{secret}: cannot read: Permission denied"]


def test_a_missing_path_on_the_command_line_fails_before_anything_is_read(tmp_path):
    done = explain(str(MOTIVATING), str(tmp_path / "typo.log"), timeout=DEADLINE_S)
    assert done.returncode == 2 and done.stdout == b""
    assert lines(done) == [f"{PREFIX}{tmp_path / 'typo.log'}: no such file or directory"]


def test_the_kernel_s_file_systems_are_told_by_the_mount_table_not_by_name(tmp_path):
    """The mount a path lies on decides (the deepest one): a cgroup file under /sys is the
    cgroup file system's, and a folder of logs that merely has "proc" in its name is read."""
    from ncclcheck.explain.reader import _mounts, in_kernel_tree

    mounts = dict(_mounts())
    assert mounts.get("/proc") == "proc"
    cgroup = [point for point, kind in mounts.items() if kind in ("cgroup", "cgroup2")]
    if cgroup:
        assert f"{mounts[cgroup[0]]} files at {cgroup[0]}" in in_kernel_tree(cgroup[0])
    (tmp_path / "proc").mkdir()
    assert in_kernel_tree(str(tmp_path / "proc" / "rank0.log")) is None
