"""NCCL's configuration files, read exactly the way libnccl reads them: the one owner of
"NCCL settings as NCCL sees them" (environment + files) for every family.

NCCL (src/misc/param.cc ``initEnvFunc`` / ``setEnvFile``) loads $NCCL_CONF_FILE when set and
non-empty, else $HOME/.nccl.conf, then /etc/nccl.conf. It reads each file with
``fgets(line, 4096)`` (so a line longer than 4095 bytes continues as the next "line"), drops
one trailing ``\\n`` and then one ``\\r``, skips a line whose first byte is ``#``, and splits at
the first ``=``: the name is everything before it, the value everything after it, both kept
byte for byte (no trimming, no quotes) and cut at 1023 bytes. Each pair goes through
``setenv(name, value, 0)``: it never overwrites, so the environment beats the first file,
which beats /etc/nccl.conf; an empty name is refused by setenv.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

ETC_CONF = "/etc/nccl.conf"
MAX_BYTES = 1 << 20
LINE_BUFFER = 4096      # NCCL's fgets buffer: at most 4095 bytes per read
FIELD_BUFFER = 1024     # envVar / envValue buffers: at most 1023 bytes kept


@dataclass
class ConfigFile:
    path: str
    why: str                       # "NCCL_CONF_FILE", "~/.nccl.conf", "/etc/nccl.conf"
    exists: bool = False
    error: str | None = None       # unreadable, binary, too large
    entries: dict[str, str] = field(default_factory=dict)
    skipped: list[int] = field(default_factory=list)  # line numbers NCCL ignores (no '=')

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
        paths.append((f"{env['HOME']}/.nccl.conf", "~/.nccl.conf"))
    paths.append((etc_conf, "/etc/nccl.conf"))
    return paths


def _fgets_lines(raw: bytes) -> Iterator[bytes]:
    """The successive buffers ``fgets(line, 4096, file)`` returns, newline included."""
    start = 0
    while start < len(raw):
        end = raw.find(b"\n", start, start + LINE_BUFFER - 1)
        stop = end + 1 if end >= 0 else min(len(raw), start + LINE_BUFFER - 1)
        yield raw[start:stop]
        start = stop


def parse_nccl_conf(raw: bytes) -> tuple[dict[str, str], list[int]]:
    """(name -> value as NCCL's setEnvFile applies them, numbers of lines without '=').

    The first occurrence of a name wins (setenv never overwrites). Blank lines are not counted
    as malformed: they say nothing."""
    entries: dict[str, str] = {}
    skipped: list[int] = []
    for number, chunk in enumerate(_fgets_lines(raw), 1):
        line = chunk[:-1] if chunk.endswith(b"\n") else chunk
        line = line[:-1] if line.endswith(b"\r") else line
        if line.startswith(b"#"):
            continue
        name, sep, value = line.partition(b"=")
        if not sep:
            if line.strip():
                skipped.append(number)
            continue
        name, value = name[:FIELD_BUFFER - 1], value[:FIELD_BUFFER - 1]
        if not name:  # setenv("") fails with EINVAL: NCCL sets nothing
            skipped.append(number)
            continue
        text = name.decode("utf-8", "surrogateescape")
        entries.setdefault(text, value.decode("utf-8", "surrogateescape"))
    return entries, skipped


def _read_bytes(target: Path) -> bytes:
    """The file's bytes, refusing what NCCL could not sensibly mean (raises ValueError)."""
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
    raw.decode("utf-8")  # text we can show; raises UnicodeDecodeError otherwise
    return raw


def read_config_file(path: str, why: str) -> ConfigFile:
    conf = ConfigFile(path, why)
    target = Path(path)
    if not target.exists():
        return conf
    conf.exists = True
    try:
        raw = _read_bytes(target)
    except (OSError, ValueError) as exc:
        conf.error = getattr(exc, "strerror", None) or str(exc)
        if isinstance(exc, UnicodeDecodeError):
            conf.error = "not UTF-8 text (a binary file?)"
        return conf
    conf.entries, conf.skipped = parse_nccl_conf(raw)
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


def nccl_environment(env: Mapping[str, str], etc_conf: str = ETC_CONF) -> dict[str, str]:
    """The environment as libnccl sees it after reading its config files: every family that
    predicts what NCCL does asks this, so all of them see the same names and values."""
    files = read_config_files(env, etc_conf)
    return {name: s.value for name, s in effective_settings(env, files).items()}


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
