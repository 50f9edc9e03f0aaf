"""Where log bytes come from: files, directories (every file in them), stdin, gzip.

Only regular files are read: a device (``/dev/zero``), a named pipe, a socket or a file of the
kernel's /proc or /sys never ends or blocks. Named on the command line, such a path is refused
before anything is read; met inside a folder, it is skipped with a note. A file that cannot be
opened or vanished after the folder was listed is a note too, and the rest is read.
"""

from __future__ import annotations

import gzip
import os
import re
import stat
import sys
from dataclasses import dataclass, field
from typing import BinaryIO

GZIP_MAGIC = b"\x1f\x8b"
PICKLE_MARK = b"\x80"  # a pickle's first byte (its protocol follows)
SNIFF_BYTES = 8192  # how much of a log is looked at to tell text from binary, as grep does
UNREAD_NOTE = "explain.unread"  # the id of the note that names an input left unread
# File systems whose files the kernel makes up on reading (some never end): no log lives there
KERNEL_FILE_SYSTEMS = frozenset({"proc", "sysfs", "debugfs", "tracefs", "securityfs", "configfs",
                                 "cgroup", "cgroup2", "pstore", "bpf", "efivarfs", "fusectl"})
MOUNTS = "/proc/self/mounts"
PIPE_HINT = "pipe a command's output in instead: cmd | ncclcheck explain -"


class InputError(Exception):
    """A path that cannot be read, said as ``NAME: why`` (the CLI prints one line, exit 2)."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"{name}: {why}")
        self.name = name
        self.why = why


@dataclass(frozen=True)
class Unread:
    """An input left unread and why: a note in the report, while the rest is read."""

    name: str
    why: str

    @property
    def text(self) -> str:
        return f"{self.name}: {self.why}"


def not_a_file(mode: int) -> str | None:
    """Why a file of this mode is no log to read (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return f"a named pipe is not a log file ({PIPE_HINT})"
    kinds = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))
    kind = next((name for test, name in kinds if test(mode)), "what is not a regular file")
    return f"{kind} is not a log file"


def in_kernel_tree(path: str) -> str | None:
    """Why a path (links followed) is on a file system the kernel makes up (proc, sysfs, ...:
    the mount it lies on, from the mount table), or None."""
    real = os.path.realpath(path)
    mount, kind = "", ""
    for point, fs_type in _mounts():
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(mount):
            mount, kind = point, fs_type
    if kind in KERNEL_FILE_SYSTEMS:
        return f"the kernel's {kind} files at {mount} are no log files"
    return None


def _mounts() -> list[tuple[str, str]]:
    """(mount point, file system type) of this process's mounts; none where it cannot tell."""
    try:
        with open(MOUNTS, encoding="utf-8", errors="replace") as table:
            rows = [line.split() for line in table]
    except OSError:
        return []
    return [(_unescape(row[1]), row[2]) for row in rows if len(row) >= 3]


def _unescape(field: str) -> str:
    """A mount point as the table writes it (space, tab, newline, backslash in octal)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _open_file(path: str, name: str) -> BinaryIO:
    """Open a regular file without blocking on anything else (a FIFO opens at once with
    O_NONBLOCK, and is then refused by what the open descriptor is)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(name, "vanished before it was read") from None
    except OSError as exc:
        raise InputError(name, f"cannot read: {exc.strerror or exc}") from None
    try:
        why = not_a_file(os.fstat(fd).st_mode)
    except OSError as exc:
        why = f"cannot read: {exc.strerror or exc}"
    if why is not None:
        os.close(fd)
        raise InputError(name, why)
    return os.fdopen(fd, "rb")


@dataclass(frozen=True)
class Source:
    """One log to read; ``name`` is how findings refer to it (the path as given, or "-")."""

    name: str
    path: str | None  # None for stdin

    def open(self) -> BinaryIO:
        """A binary stream of the log, decompressed when it is gzip (by content, not name)."""
        raw: BinaryIO = sys.stdin.buffer if self.path is None else _open_file(self.path,
                                                                              self.name)
        head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
        if head == GZIP_MAGIC:
            return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
        return raw


@dataclass
class Inputs:
    """The command line's paths as sources to read, and what inside folders was left unread."""

    sources: list[Source] = field(default_factory=list)
    unread: list[Unread] = field(default_factory=list)


def gather(paths: list[str]) -> Inputs:
    """Expand the command line into sources; no paths (or "-") means stdin.

    Every path named is checked before anything is read, so a typo or a device fails fast
    with one message (InputError); what a folder holds that cannot be read is noted."""
    found = Inputs()
    if not paths:
        found.sources.append(Source("-", None))
    for path in paths:
        if path == "-":
            found.sources.append(Source("-", None))
            continue
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            raise InputError(path, "a link to nothing" if os.path.islink(path) else
                             "no such file or directory") from None
        except OSError as exc:  # a folder on the way that cannot be entered: a note
            found.unread.append(Unread(path, f"cannot read: {exc.strerror or exc}"))
            continue
        why = (None if stat.S_ISDIR(mode) else not_a_file(mode)) or in_kernel_tree(path)
        if why is not None:
            raise InputError(path, f"refused, {why}")
        if stat.S_ISDIR(mode):
            _walk(path, found)
        else:
            found.sources.append(Source(path, path))
    return found


def sources(paths: list[str]) -> list[Source]:
    """The sources of ``paths`` (gather), without the notes on what folders held unread."""
    return gather(paths).sources


def _walk(root: str, found: Inputs) -> None:
    def unreadable(error: OSError) -> None:
        found.unread.append(Unread(str(error.filename),
                                   f"cannot read: {error.strerror or error}"))

    for folder, dirs, files in os.walk(root, onerror=unreadable):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            why = _skipped(path)
            if why is None:
                found.sources.append(Source(path, path))
            else:
                found.unread.append(Unread(path, why))


def _skipped(path: str) -> str | None:
    """Why a file a folder lists is not read (None: it is a log to read)."""
    link = os.path.islink(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "skipped, a link to nothing" if link else "vanished before it was read"
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    why = not_a_file(mode) or (in_kernel_tree(path) if link else None)
    return None if why is None else f"skipped, {why}"


@dataclass(frozen=True)
class Screened:
    """The sources worth reading, and those left out or empty, for the note the CLI prints."""

    readable: list[Source]
    binary: list[str]
    empty: list[str]
    dumps: list[Source]  # flight-recorder dumps (by content), read apart from the logs
    snapshots: list[Source] = field(default_factory=list)  # `ncclcheck hang`'s (by content)
    unread: list[Unread] = field(default_factory=list)  # could not be opened: a note each


def sniff(source: Source) -> str | None:
    """"dump" (a flight-recorder dump, by content), "snapshot" (`ncclcheck hang`'s), "binary"
    (a NUL byte in the first 8 KB, decompressed), "empty", or None for text.
    Gzip on stdin is not sniffed: it would consume it. InputError when it cannot be read."""
    if source.path is None:
        head = sys.stdin.buffer.peek(SNIFF_BYTES)[:SNIFF_BYTES]
        if head[:2] == GZIP_MAGIC:
            return None
    else:
        stream = source.open()
        try:
            head = stream.peek(SNIFF_BYTES)[:SNIFF_BYTES]  # type: ignore[attr-defined]
        except (OSError, EOFError) as exc:
            raise InputError(source.name, f"cannot read: {exc}") from None
        finally:
            stream.close()
    if not head:
        return "empty"
    # a snapshot and a JSON dump begin with "{", a pickled dump with its protocol byte: only
    # such a file loads the readers that tell them apart
    if source.path is not None and (head[:1] == PICKLE_MARK or head.lstrip()[:1] == b"{"):
        from ncclcheck.flightrec.load import sniff_dump  # deferred: pickle, for such files only
        from ncclcheck.hang.files import sniff_snapshot  # deferred: as above
        if sniff_snapshot(head):
            return "snapshot"
        if sniff_dump(head):
            return "dump"
    return "binary" if b"\0" in head else None


def screen(items: list[Source], unread: list[Unread] | None = None) -> Screened:
    """Leave binary files out (a library or a core dump holds NCCL's message formats and would
    "match"), note the empty ones, and those that cannot be opened (``unread``: what was
    noted already)."""
    readable: list[Source] = []
    binary: list[str] = []
    empty: list[str] = []
    dumps: list[Source] = []
    snapshots: list[Source] = []
    left = list(unread or [])
    for source in items:
        try:
            kind = sniff(source)
        except InputError as exc:
            left.append(Unread(exc.name, exc.why))
            continue
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
    return Screened(readable, binary, empty, dumps, snapshots, left)


def input_notes(paths: list[str], screened: Screened) -> list[str]:
    """One line each on what was not read: binary files skipped, no lines at all (the files
    left unread are the report's notes, said apart)."""
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


def nothing_readable(screened: Screened, failed: list[Unread]) -> str | None:
    """The one line that ends the run (exit 2) when no input could be read: every file binary
    or unreadable (``failed``: the logs whose reading failed). None when something was read."""
    names = {u.name for u in failed}
    read = [s for s in screened.readable if s.name not in names]
    if read or screened.dumps or screened.snapshots or not (screened.binary or
                                                            screened.unread or failed):
        return None
    if screened.binary and not (screened.unread or failed):
        shown = ", ".join(screened.binary[:3]) + (", ..." if len(screened.binary) > 3 else "")
        return f"{shown}: binary, not a log (give the job's text output)"
    others = len(screened.binary) + len(screened.unread) + len(failed) - 1
    first = (screened.unread or failed)[0].text
    return first + (f" (and {others} more input(s) unreadable or binary: nothing was read)"
                    if others else "")
