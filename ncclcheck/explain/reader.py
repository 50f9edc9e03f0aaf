"""Where log bytes come from: files, directories (every file in them), stdin, gzip."""

from __future__ import annotations

import gzip
import os
import sys
from dataclasses import dataclass, field
from typing import BinaryIO, Iterator

from ncclcheck.flightrec.load import sniff_dump
from ncclcheck.hang.files import sniff_snapshot

GZIP_MAGIC = b"\x1f\x8b"
SNIFF_BYTES = 8192  # how much of a log is looked at to tell text from binary, as grep does


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


@dataclass(frozen=True)
class Screened:
    """The sources worth reading, and those left out or empty, for the note the CLI prints."""

    readable: list[Source]
    binary: list[str]
    empty: list[str]
    dumps: list[Source]  # flight-recorder dumps (by content), read apart from the logs
    snapshots: list[Source] = field(default_factory=list)  # `ncclcheck hang`'s (by content)


def sniff(source: Source) -> str | None:
    """"dump" (a flight-recorder dump, by content), "snapshot" (`ncclcheck hang`'s), "binary"
    (a NUL byte in the first 8 KB, decompressed), "empty", or None for text.
    Gzip on stdin and named pipes (``<(cmd)``) are not sniffed: it would consume them."""
    if source.path is not None and not os.path.isfile(source.path):
        return None
    if source.path is None:
        head = sys.stdin.buffer.peek(SNIFF_BYTES)[:SNIFF_BYTES]
        if head[:2] == GZIP_MAGIC:
            return None
    else:
        stream = source.open()
        try:
            head = stream.peek(SNIFF_BYTES)[:SNIFF_BYTES]  # type: ignore[attr-defined]
        except (OSError, EOFError) as exc:
            raise InputError(f"cannot read {source.name}: {exc}") from None
        finally:
            stream.close()
    if not head:
        return "empty"
    if source.path is not None and sniff_snapshot(head):
        return "snapshot"
    if source.path is not None and sniff_dump(head):
        return "dump"
    return "binary" if b"\0" in head else None


def screen(items: list[Source]) -> Screened:
    """Leave binary files out (a library or a core dump holds NCCL's message formats and would
    "match"), and note the empty ones."""
    readable: list[Source] = []
    binary: list[str] = []
    empty: list[str] = []
    dumps: list[Source] = []
    snapshots: list[Source] = []
    for source in items:
        kind = sniff(source)
        if kind == "dump":
            dumps.append(source)
            continue
        if kind == "snapshot":
            snapshots.append(source)
            continue
        if kind == "binary":
            binary.append(source.name)
            continue
        if kind == "empty":
            empty.append(source.name)
        readable.append(source)
    return Screened(readable, binary, empty, dumps, snapshots)


def input_notes(paths: list[str], screened: Screened) -> list[str]:
    """One line each on what was not read: binary files skipped, no lines at all."""
    notes = []
    if screened.binary:
        shown = ", ".join(screened.binary[:5]) + (", ..." if len(screened.binary) > 5 else "")
        notes.append(f"skipped {len(screened.binary)} binary file(s), not logs: {shown}")
    if len(screened.empty) == len(screened.readable) and not (screened.dumps or
                                                              screened.snapshots):
        given = ", ".join(paths) if paths else "stdin"
        why = "empty" if screened.empty else "binary" if screened.binary else "an empty folder"
        notes.append(f"no lines were read: the input ({given}) is {why}")
    return notes
