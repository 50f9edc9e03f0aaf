"""Keep secrets out of every output, and nothing else.

Reports and explanations travel (CI artifacts, tickets, chat), so every output goes through
``redact_value_tree`` once, where it is turned into data. Two things are masked as ``***``:
the values of variables whose names say they are secret (``HF_TOKEN=...``, a JSON key
``"AWS_SECRET_ACCESS_KEY"``, ``--token abc``), and strings shaped like credentials wherever
they appear (bearer tokens, AWS access key ids, passwords inside URLs, well-known token
prefixes, private-key blocks). Ordinary fields are never masked: a report's own keys such as
``signature`` or ``tokens_per_s`` are not variable names.
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping

MASK = "***"

# A word of a name (split at "_", "-", "." and case changes) that makes it secret when the word
# ends with it: HF_TOKEN, NPM_AUTHTOKEN, DB_PASSWORD, GOOGLE_APPLICATION_CREDENTIALS.
SECRET_SUFFIXES = ("TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD",
                   "PASSPHRASE", "CREDENTIAL", "CREDENTIALS", "COOKIE", "COOKIES", "APIKEY")
# Words that are secret only on their own: KEY (not MONKEY), AUTH (not AUTHOR), PAT.
SECRET_WORDS = ("KEY", "KEYS", "AUTH", "PAT", "PRIVATE")
# Lower-case field names that hold a secret in JSON, YAML or ``name=value`` text. Anything else
# in lower case ("key", "keys", "signature", "tokens") is an ordinary word.
SECRET_FIELDS = frozenset({"password", "passwd", "passphrase", "token", "secret", "api_key",
                           "apikey", "access_token", "auth_token", "refresh_token", "id_token",
                           "secret_key", "access_key", "private_key", "client_secret",
                           "aws_secret_access_key", "aws_session_token", "hf_token"})

# Names that contain a secret word but hold nothing secret.
NOT_SECRET = frozenset({"NCCL_IB_PKEY"})

_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z]{3,}")
_ASSIGNMENT = re.compile(
    r"""(?<![\w.-])(?:(?P<flag>--?[A-Za-z][\w.-]*)(?P<fsep>\s*=\s*|\s+)"""
    r"""|(?P<name>[A-Za-z_][\w.-]*)(?P<sep>["']?\s*[=:]\s*))"""
    r"""(?P<value>"[^"]*"|'[^']*'|[^\s,;'"}]+)""")
_MIN_VALUE_LEN = 6  # shorter values ("1", "true") are too common to scrub from free text

# Credential shapes that are secret wherever they appear, whatever the name beside them.
_SHAPES = (
    re.compile(r"(?i)\b(authorization:\s*(?:basic|bearer|token)|bearer)\s+([A-Za-z0-9._~+/=-]{8,})"),
    re.compile(r"\b(?:AKIA|ASIA|AIDA|AROA)[A-Z0-9]{16}\b"),
    re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})\b"),
    re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{20,}\b"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\b"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)",
               re.S),
)
_URL_PASSWORD = re.compile(r"\b([a-z][a-z0-9+.-]*://[^\s:/@]+):([^\s@/]+)@")


def name_words(name: str) -> list[str]:
    return [w.upper() for w in _WORD_SPLIT.split(name) if w]


def is_secret_name(name: str) -> bool:
    """Whether a variable, flag or key name says its value is a secret."""
    if name.upper() in NOT_SECRET:
        return False
    words = name_words(name)
    return any(w in SECRET_WORDS or w.endswith(SECRET_SUFFIXES) for w in words)


def is_secret_key(key: str) -> bool:
    """A key (JSON, YAML, ``key=value``) whose value is a secret: a secret environment-variable
    name (``HF_TOKEN``) or a secret field name (``password``), never an ordinary field such
    as ``signature`` or ``keys``."""
    if key.lower() in SECRET_FIELDS:
        return True
    return bool(_ENV_NAME.fullmatch(key)) and is_secret_name(key)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` with secret-looking values masked."""
    return {k: (MASK if is_secret_name(k) else v) for k, v in env.items()}


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-looking variables long enough to scrub from free text, longest first."""
    env = os.environ if env is None else env
    values = {v for k, v in env.items() if is_secret_name(k) and len(v) >= _MIN_VALUE_LEN}
    return sorted(values, key=len, reverse=True)


def _mask_assignment(match: re.Match[str]) -> str:
    flag, name, value = match["flag"], match["name"], match["value"]
    secret = is_secret_name(flag.lstrip("-")) if flag else is_secret_key(name)
    if not secret:
        return match.group(0)
    quote = value[0] if value[:1] in "\"'" and len(value) > 1 else ""
    return match.group(0)[: match.start("value") - match.start()] + f"{quote}{MASK}{quote}"


def redact_text(text: str, secrets: list[str] | None = None) -> str:
    """Mask secret-named assignments and flags, credential-shaped strings, URL passwords and
    any known secret value of this process's environment."""
    if not text:
        return text
    text = _ASSIGNMENT.sub(_mask_assignment, text)
    text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:{MASK}@", text)
    for shape in _SHAPES:
        text = shape.sub(_mask_shape, text)
    for value in secret_values() if secrets is None else secrets:
        if value in text:
            text = text.replace(value, MASK)
    return text


def _mask_shape(match: re.Match[str]) -> str:
    if match.re is _SHAPES[0]:  # keep the scheme word: "Bearer ***"
        return f"{match.group(1)} {MASK}"
    return MASK


def redact_value_tree(data: Any, secrets: list[str] | None = None) -> Any:
    """Redact a JSON-like tree: values under secret variable names are masked whole, every
    string is scrubbed; keys themselves are kept."""
    secrets = secret_values() if secrets is None else secrets
    if isinstance(data, Mapping):
        out = {}
        for key, value in data.items():
            if isinstance(key, str) and is_secret_key(key) and isinstance(value, (str, int, float)):
                out[key] = MASK
            else:
                out[key] = redact_value_tree(value, secrets)
        return out
    if isinstance(data, (list, tuple)):
        return [redact_value_tree(v, secrets) for v in data]
    if isinstance(data, str):
        return redact_text(data, secrets)
    return data
