"""Keep secrets out of every report: environment values whose names look secret become ``***``.

Reports travel (CI artifacts, tickets, chat), so redaction happens once, where a report is
turned into data, and every renderer goes through it.
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping

MASK = "***"

SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL",
                "AUTH", "COOKIE", "PRIVATE", "SIGNATURE")

# Names that contain a secret word but hold nothing secret.
NOT_SECRET = frozenset({"NCCL_IB_PKEY"})

_ASSIGNMENT = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|\S+)")
_MIN_VALUE_LEN = 6  # shorter values ("1", "true") are too common to scrub from free text


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    if upper in NOT_SECRET:
        return False
    return any(word in upper for word in SECRET_WORDS)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` with secret-looking values masked."""
    return {k: (MASK if is_secret_name(k) else v) for k, v in env.items()}


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-looking variables long enough to scrub from free text, longest first."""
    env = os.environ if env is None else env
    values = {v for k, v in env.items() if is_secret_name(k) and len(v) >= _MIN_VALUE_LEN}
    return sorted(values, key=len, reverse=True)


def redact_text(text: str, secrets: list[str] | None = None) -> str:
    """Mask ``NAME=value`` assignments with secret names and any known secret value."""
    def _mask(match: re.Match[str]) -> str:
        name = match.group(1)
        return f"{name}={MASK}" if is_secret_name(name) else match.group(0)

    text = _ASSIGNMENT.sub(_mask, text)
    for value in secret_values() if secrets is None else secrets:
        if value in text:
            text = text.replace(value, MASK)
    return text


def redact_value_tree(data: Any, secrets: list[str] | None = None) -> Any:
    """Redact a JSON-like tree: secret-named keys are masked, every string is scrubbed."""
    secrets = secret_values() if secrets is None else secrets
    if isinstance(data, Mapping):
        out = {}
        for key, value in data.items():
            if isinstance(key, str) and is_secret_name(key) and isinstance(value, (str, int, float)):
                out[key] = MASK
            else:
                out[key] = redact_value_tree(value, secrets)
        return out
    if isinstance(data, (list, tuple)):
        return [redact_value_tree(v, secrets) for v in data]
    if isinstance(data, str):
        return redact_text(data, secrets)
    return data
