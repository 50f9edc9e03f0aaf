"""Where log bytes come from: files, directories (every file in them), stdin, gzip."""

from __future__ import annotations

import gzip
import os
import sys
from dataclasses import dataclass
from typing import BinaryIO, Iterator

GZIP_MAGIC = b"\x1f\x8b"


class InputError(Exception):
    """A path that cannot be read: the CLI prints one line and exits 2."""


@dataclass(frozen=True)
class Source:
    """One log to read; ``name`` is how findings refer to it (the path as given, or "-")."""

    name: str
    path: str | None  # None for stdin

    def open(self) -> BinaryIO:
        """A binary stream of the log, decompressed when it is gzip (by content, not name)."""
        if self.path is None:
            raw: BinaryIO = sys.stdin.buffer
        else:
            try:
                raw = open(self.path, "rb")
            except OSError as exc:
                raise InputError(f"cannot read {self.name}: {exc.strerror or exc}") from None
        head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
        if head == GZIP_MAGIC:
            return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
        return raw


def sources(paths: list[str]) -> list[Source]:
    """Expand the command line into sources; no paths (or "-") means stdin.

    Every path is checked before anything is read, so a typo fails fast with one message.
    """
    if not paths:
        return [Source("-", None)]
    found: list[Source] = []
    for path in paths:
        if path == "-":
            found.append(Source("-", None))
        elif os.path.isdir(path):
            found.extend(_walk(path))
        elif os.path.exists(path):
            if not os.access(path, os.R_OK):
                raise InputError(f"cannot read {path}: permission denied")
            found.append(Source(path, path))
        else:
            raise InputError(f"no such file or directory: {path}")
    return found


def _walk(root: str) -> Iterator[Source]:
    for folder, dirs, files in os.walk(root, onerror=_raise):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                yield Source(path, path)


def _raise(error: OSError) -> None:
    raise InputError(f"cannot read {error.filename}: {error.strerror}")
