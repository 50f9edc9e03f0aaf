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
