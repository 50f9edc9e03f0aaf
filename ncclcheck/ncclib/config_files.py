"""NCCL's configuration files, read the way NCCL reads them.

NCCL loads $NCCL_CONF_FILE (when set and non-empty) or else ~/.nccl.conf, then /etc/nccl.conf;
each line is NAME=value (everything after the first '=', no quoting; '#' lines skipped) and is
applied only if the variable is not set yet. So the environment beats the user file, which
beats /etc/nccl.conf - and a probe that reads only the environment misses these values.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

ETC_CONF = "/etc/nccl.conf"
MAX_BYTES = 1 << 20


@dataclass
class ConfigFile:
    path: str
    why: str                       # "NCCL_CONF_FILE", "~/.nccl.conf", "/etc/nccl.conf"
    exists: bool = False
    error: str | None = None       # unreadable, binary, too large
    entries: dict[str, str] = field(default_factory=dict)
    skipped: list[int] = field(default_factory=list)  # line numbers without '='

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "why": self.why, "exists": self.exists, "error": self.error,
                "names": sorted(self.entries), "malformed_lines": self.skipped}


@dataclass(frozen=True)
class Setting:
    name: str
    value: str
    source: str   # "environment" or the config file's path


def config_paths(env: Mapping[str, str], etc_conf: str = ETC_CONF) -> list[tuple[str, str]]:
    """(path, why) in NCCL's load order."""
    paths = []
    if env.get("NCCL_CONF_FILE"):
        paths.append((env["NCCL_CONF_FILE"], "NCCL_CONF_FILE"))
    elif env.get("HOME"):
        paths.append((str(Path(env["HOME"]) / ".nccl.conf"), "~/.nccl.conf"))
    paths.append((etc_conf, "/etc/nccl.conf"))
    return paths


def read_config_file(path: str, why: str) -> ConfigFile:
    conf = ConfigFile(path, why)
    target = Path(path)
    if not target.exists():
        return conf
    conf.exists = True
    try:
        if target.is_dir():
            raise IsADirectoryError("is a directory")
        if not target.is_file():  # a FIFO or device could block or never end
            raise ValueError("not a regular file")
        with open(target, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            raise ValueError(f"larger than {MAX_BYTES} bytes")
        if b"\0" in raw:
            raise ValueError("binary content")
        text = raw.decode("utf-8")
    except (OSError, ValueError) as exc:
        conf.error = getattr(exc, "strerror", None) or str(exc)
        if isinstance(exc, UnicodeDecodeError):
            conf.error = "not UTF-8 text (a binary file?)"
        return conf
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        name, sep, value = stripped.partition("=")
        if not sep or not name.strip():
            conf.skipped.append(number)
            continue
        conf.entries.setdefault(name.strip(), value)
    return conf


def read_config_files(env: Mapping[str, str], etc_conf: str = ETC_CONF) -> list[ConfigFile]:
    return [read_config_file(p, why) for p, why in config_paths(env, etc_conf)]


def effective_settings(env: Mapping[str, str], files: list[ConfigFile],
                       wanted=lambda name: True) -> dict[str, Setting]:
    """What NCCL ends up with: environment first, then each file without overwriting."""
    settings = {k: Setting(k, v, "environment") for k, v in env.items() if wanted(k)}
    for conf in files:
        for name, value in conf.entries.items():
            if wanted(name) and name not in settings:
                settings[name] = Setting(name, value, conf.path)
    return settings


def writable_target(path: str) -> str | None:
    """Why ``path`` cannot be written (None when it can); the directory decides for new files."""
    target = Path(path)
    if target.is_dir():
        return "is a directory"
    if target.exists():
        return None if os.access(target, os.W_OK) else "the file is not writable"
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.exists():
        return f"directory {parent} does not exist"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"directory {parent} is not writable"
    return None
