"""Secrets never leave the machine."""

from __future__ import annotations

import pytest

from ncclcheck.redact import MASK, is_secret_name, redact_env, redact_text, redact_value_tree


@pytest.mark.parametrize("name", ["HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "WANDB_API_KEY",
                                  "DB_PASSWORD", "GIT_PASSWD", "GOOGLE_APPLICATION_CREDENTIALS",
                                  "BASIC_AUTH", "SESSION_COOKIE", "aws_session_token"])
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["RANK", "MASTER_ADDR", "NCCL_SOCKET_IFNAME", "NCCL_IB_PKEY", "pass",
                                  "PATH", "WORLD_SIZE"])
def test_ordinary_names(name):
    assert not is_secret_name(name)


def test_redact_env():
    assert redact_env({"RANK": "1", "MY_TOKEN": "abc"}) == {"RANK": "1", "MY_TOKEN": MASK}


def test_redact_text_assignments_and_known_values():
    text = "export API_KEY=sk-123456 RANK=3; later sk-123456 again"
    out = redact_text(text, secrets=["sk-123456"])
    assert "sk-123456" not in out and "RANK=3" in out and "API_KEY=***" in out


def test_redact_tree_masks_keys_and_scrubs_strings():
    tree = {"env": {"NCCL_DEBUG": "INFO", "SECRET_X": "hunter22"},
            "lines": ["PASSWORD=hunter22 here"]}
    out = redact_value_tree(tree, secrets=["hunter22"])
    assert out == {"env": {"NCCL_DEBUG": "INFO", "SECRET_X": MASK}, "lines": ["PASSWORD=*** here"]}


# -- precise: secrets masked everywhere, ordinary fields never ---------------------------------

SECRET_TEXTS = [
    ("export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123456789 RANK=3", "hf_abcdefghij"),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
    ("python train.py --token abc123zz --nodes 2", "abc123zz"),
    ("python train.py --api-key=zzz999", "zzz999"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abcdefgh", "eyJhbGciOiJIUzI1NiJ9"),
    ("pip install git+https://alice:s3cr3tpass@git.example.com/x.git", "s3cr3tpass"),
    ("using key AKIAIOSFODNN7EXAMPLE for s3", "AKIAIOSFODNN7EXAMPLE"),
    ("token ghp_0123456789abcdefghijklmnopqrstuvwxyzAB in the clone url", "ghp_0123456789"),
    ('{"password": "hunter2hunter2"}', "hunter2hunter2"),
]


@pytest.mark.parametrize("text,secret", SECRET_TEXTS)
def test_secret_shapes_are_masked(text, secret):
    out = redact_text(text, secrets=[])
    assert secret not in out and MASK in out


ORDINARY_TEXTS = [
    "wait timeout after 30000ms, keys: /default_pg/0//cuda//0",
    "signature=nccl.invalid_rank tokens_per_s=1200 MONKEY=1 AUTHOR=me",
    "NCCL_IB_PKEY=0x8001 NCCL_SOCKET_IFNAME=eth0 MASTER_ADDR=node0",
    "Timed out waiting for key=ncclcheck/report/3 in the store",
    "NCCL INFO Bootstrap : Using eth0:10.1.2.3<0>",
]


@pytest.mark.parametrize("text", ORDINARY_TEXTS)
def test_ordinary_text_is_untouched(text):
    assert redact_text(text, secrets=[]) == text


def test_report_fields_are_not_masked():
    """details.signature links a check to the catalogue: it is a field, not a secret."""
    from ncclcheck.model import Report, failed, Category
    row = failed("ranks.world_size", "world size 4 != 8", "Set WORLD_SIZE=8.",
                 Category.RANK_MISMATCH, signature="nccl.invalid_rank", keys=["a", "b"],
                 env={"HF_TOKEN": "hf_secretvalue123", "RANK": "6"})
    data = Report([row]).to_dict()
    details = data["checks"][0]["details"]
    assert details["signature"] == "nccl.invalid_rank"
    assert details["keys"] == ["a", "b"]
    assert details["env"] == {"HF_TOKEN": MASK, "RANK": "6"}


@pytest.mark.parametrize("fmt", ["table", "json", "markdown"])
def test_explain_output_masks_secrets(tmp_path, fmt):
    from ncclcheck.explain.engine import explain
    from ncclcheck.report import render
    from ncclcheck.report.formats import EXPLANATION
    log = tmp_path / "run.log"
    log.write_text(
        "node1:1234:1234 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0\n"
        "[rank1]: RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, invalid usage, "
        "NCCL version 2.20.5 HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz012345 "
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY\n"
        "node1:1234:1234 [0] NCCL WARN Invalid rank requested : 6/4 "
        "Authorization: Bearer abcdefghijklmnopqrstuvwxyz\n")
    result = explain([str(log)])
    assert result.findings, "the log must yield findings for this test to mean anything"
    out = render(EXPLANATION, result.to_dict(), fmt)
    for secret in ("hf_abcdefghij", "wJalrXUtnFEMI", "abcdefghijklmnopqrstuvwxyz"):
        assert secret not in out, (fmt, out)
    assert "nccl.invalid_rank" in out or "Invalid rank" in out
