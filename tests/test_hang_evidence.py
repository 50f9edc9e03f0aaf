"""nccl.hang_evidence: before the job, will a hang leave flight-recorder dumps to explain it?"""

from __future__ import annotations

import os

import pytest

from ncclcheck.model import Status
from ncclcheck.probes.nccl.hang_evidence import check_hang_evidence


def env(tmp_path, **extra):
    base = {"WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4", "TORCH_FR_BUFFER_SIZE": "2000",
            "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
            "TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "nccl_trace_rank_")}
    base.update(extra)
    return {k: v for k, v in base.items() if v is not None}


def test_armed_recorder_with_a_writable_roomy_folder_passes(tmp_path):
    result = check_hang_evidence(env(tmp_path))
    assert result.status == Status.PASS, result.summary
    assert result.details["bytes_needed"] == 4 * 2000 * 2048


def test_a_single_process_is_skipped(tmp_path):
    assert check_hang_evidence(env(tmp_path, WORLD_SIZE="1")).status == Status.SKIP
    assert check_hang_evidence({}).status == Status.SKIP


@pytest.mark.parametrize("change, words", [
    ({"TORCH_FR_BUFFER_SIZE": None}, "TORCH_FR_BUFFER_SIZE is unset"),
    ({"TORCH_FR_BUFFER_SIZE": "0"}, "the flight recorder is off"),
    ({"TORCH_FR_BUFFER_SIZE": "lots"}, "the flight recorder is off"),
    ({"TORCH_NCCL_DUMP_ON_TIMEOUT": "0"}, "TORCH_NCCL_DUMP_ON_TIMEOUT is 0"),
    ({"TORCH_NCCL_DUMP_ON_TIMEOUT": None}, "TORCH_NCCL_DUMP_ON_TIMEOUT is unset"),
])
def test_a_recorder_that_would_not_dump_warns(tmp_path, change, words):
    result = check_hang_evidence(env(tmp_path, **change))
    assert result.status == Status.WARN and words in result.summary
    assert "ncclcheck explain" in result.fix


def test_the_older_names_count_too(tmp_path):
    result = check_hang_evidence(env(tmp_path, TORCH_FR_BUFFER_SIZE=None,
                                     TORCH_NCCL_TRACE_BUFFER_SIZE="500",
                                     TORCH_FR_DUMP_TEMP_FILE=None,
                                     TORCH_NCCL_DEBUG_INFO_TEMP_FILE=str(tmp_path / "t_")))
    assert result.status == Status.PASS and result.details["buffer_entries"] == 500


def test_a_missing_or_unwritable_folder_warns(tmp_path):
    missing = check_hang_evidence(env(tmp_path, TORCH_FR_DUMP_TEMP_FILE=str(
        tmp_path / "nowhere" / "trace_")))
    assert missing.status == Status.WARN and "does not exist" in missing.summary
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        result = check_hang_evidence(env(tmp_path, TORCH_FR_DUMP_TEMP_FILE=str(locked / "t_")))
        if os.geteuid() == 0:  # root writes anywhere: the check agrees with the kernel
            assert result.status == Status.PASS
        else:
            assert result.status == Status.WARN and "not writable" in result.summary
    finally:
        locked.chmod(0o700)


def test_a_folder_short_of_space_warns(tmp_path, monkeypatch):
    import shutil
    from collections import namedtuple
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage(10 << 20, 9 << 20, 1 << 20))
    result = check_hang_evidence(env(tmp_path))
    assert result.status == Status.WARN and "MiB free" in result.summary
