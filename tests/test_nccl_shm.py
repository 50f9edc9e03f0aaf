"""nccl.shm: /dev/shm has room for NCCL's shared-memory segments.

The judgement is tested on mounts described by hand; the real thing is a private mount
namespace whose /dev/shm is a 64 MB tmpfs, what a Docker container gets by default.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import _skip_or_fail
from ncclcheck.model import Status
from ncclcheck.probes.nccl.shm import MIN_FREE, ShmMount, check_shm, read_shm

MIB = 1 << 20


def test_a_container_default_warns_with_the_catalogue_s_fix():
    small = ShmMount("/dev/shm", True, True, 64 * MIB, 63 * MIB)
    result = check_shm(small, {"LOCAL_WORLD_SIZE": "8"})
    assert result.status == Status.WARN and result.category.value == "shared_memory"
    assert "63 MiB free of 64 MiB" in result.summary and "8 ranks" in result.summary
    assert "--shm-size" in result.fix and "NCCL_SHM_DISABLE=1" in result.fix
    assert result.details["free_bytes"] == 63 * MIB


def test_room_passes_and_says_how_much():
    roomy = ShmMount("/dev/shm", True, True, 16 << 30, MIN_FREE)
    result = check_shm(roomy, {})
    assert result.status == Status.PASS and "1024 MiB free of 16384 MiB" in result.summary


@pytest.mark.parametrize("mount,words", [
    (ShmMount("/dev/shm", exists=False), "there is no /dev/shm"),
    (ShmMount("/dev/shm", True, writable=False, size=1 << 34, free=1 << 34), "not writable"),
    (ShmMount("/dev/shm", True, error="Permission denied"), "cannot be read"),
])
def test_a_missing_or_closed_mount_warns(mount, words):
    result = check_shm(mount, {})
    assert result.status == Status.WARN and words in result.summary


def test_nothing_to_share_passes_whatever_the_size():
    small = ShmMount("/dev/shm", True, True, 64 * MIB, 10 * MIB)
    assert check_shm(small, {"NCCL_SHM_DISABLE": "1"}).status == Status.PASS
    one = check_shm(small, {"LOCAL_WORLD_SIZE": "1"})
    assert one.status == Status.PASS and "one rank per node" in one.summary


def test_the_real_dev_shm_is_read(tmp_path):
    mount = read_shm()
    assert mount.exists == os.path.isdir("/dev/shm")
    if mount.exists:
        assert mount.size >= mount.free > 0
    assert read_shm(str(tmp_path / "none")).exists is False


@pytest.mark.slow
def test_a_64_mb_tmpfs_on_dev_shm_is_found_by_the_nccl_command():
    """A private mount namespace with Docker's default /dev/shm, and the real command in it."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        _skip_or_fail("needs root and unshare(1) for a private mount namespace")
    script = (f"mount -t tmpfs -o size=64m tmpfs /dev/shm && exec {sys.executable} -m "
              "ncclcheck nccl --local --format json")
    env = {**os.environ, "LOCAL_WORLD_SIZE": "4"}
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    shm = next(c for c in json.loads(done.stdout)["checks"] if c["id"] == "nccl.shm")
    assert shm["status"] == "warn" and shm["category"] == "shared_memory"
    assert shm["details"]["size_bytes"] == 64 * MIB and "4 ranks" in shm["summary"]
