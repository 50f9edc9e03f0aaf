"""One flight-recorder dump: recognised by content, read without running code, one shape.

torch writes a dump per rank (``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` / ``TORCH_FR_DUMP_TEMP_FILE``
plus the rank, on a watchdog timeout, or on demand with ``_dump_fr_trace``): a pickled dict, or
JSON (``_dump_fr_trace_json``), holding ``version``, ``pg_config``, ``pg_status`` and the ring
buffer's ``entries``. The format grew over releases (``seq_id`` before ``collective_seq_id``,
``is_p2p``/``p2p_seq_id``, ``thread_*``, discovered start and completion times); every field
that a version lacks reads as unknown here.

A dump is a pickle, and on-call engineers point explain at folders other people wrote. Reading
one never imports a module or calls anything: the unpickler refuses every global (the format
uses none; a hostile file's ``__reduce__`` needs one), persistent ids and extensions, the
file is read whole with a size cap before any byte is interpreted, and no memo slot or length
an opcode claims is believed beyond the file's size (claims.py: the C unpickler would allocate
what a corrupted number asks for). Nor is a decoded value rendered before it is walked within
a depth cap and a budget per byte of the dump (bounded.py: a value the memo shares can be a few
bytes with billions of leaves).
"""

from __future__ import annotations

import functools
import json
import os
import pickle
import re
import struct
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Mapping, NamedTuple

from ncclcheck.flightrec.bounded import Budget, Overgrown
from ncclcheck.flightrec.claims import Overclaim
from ncclcheck.flightrec.newest import decode, newest_entries

KEPT_NEWEST = 64                  # entries kept whatever ``keep_from`` says (where ranks were last)
MAX_DUMP_BYTES = 1 << 30          # a 2,000-entry dump with frames is a few MB
READ_PIECE = 4 << 20              # one read of MAX_DUMP_BYTES would reserve a GiB per dump
PICKLE_PROTOCOLS = range(2, 6)
_TRAILING_NUMBER = re.compile(r"(\d+)(?:\.(?:pkl|pickle|json|bin|dump|trace))?$", re.I)
_RANKS_TEXT = re.compile(r"^\s*\[\s*(?:-?\d+\s*(?:,\s*-?\d+\s*)*)?\]\s*$")
_FRAME_TEXT = (str, int, float, type(None))   # a frame's name or file rendered as it is


class DumpError(Exception):
    """A file that looked like a dump and cannot be read as one: said in one line."""


@dataclass(frozen=True)
class Frame:
    name: str
    filename: str
    line: int | None

    def describe(self) -> str:
        where = f"{self.filename}:{self.line}" if self.line is not None else self.filename
        return f"{self.name} ({where})"


class Entry(NamedTuple):
    """One collective or point-to-point operation as one rank recorded it. Sizes and dtypes
    stay as the dump holds them (lists); ``shape`` compares their text. (A named tuple: a
    1,024-rank job's dumps hold two million of these.)"""

    record_id: int | None
    pg_id: int | None              # this rank's local id of the group
    group: str                     # the process group's name (the same on every member rank)
    group_desc: str
    seq: int | None                # collective_seq_id (None for p2p)
    p2p_seq: int | None
    op: str                        # profiling_name without its backend ("all_reduce")
    input_sizes: Any
    output_sizes: Any
    input_dtypes: Any
    output_dtypes: Any
    state: str                     # scheduled, started or completed
    retired: bool | None           # the work left the active set (finished, or failed)
    is_p2p: bool
    time_created_ns: int | None
    started_ns: int | None
    completed_ns: int | None
    raw_frames: Any = ()

    @property
    def frames(self) -> tuple[Frame, ...]:
        """The Python stack at the call, innermost first (built when asked: most entries'
        frames are never read)."""
        out = []
        for frame in self.raw_frames if isinstance(self.raw_frames, (list, tuple)) else ():
            if not isinstance(frame, dict):
                continue
            name, filename = frame.get("name", ""), frame.get("filename", "")
            # a name or file that is not text is skipped like a frame that is not a dict:
            # ``str`` of a shared nested list never ends, and frames are read after the dump
            if isinstance(name, _FRAME_TEXT) and isinstance(filename, _FRAME_TEXT):
                out.append(Frame(str(name), str(filename), _int(frame.get("line"))))
        return tuple(out)

    def shape(self) -> tuple[str, str, str]:
        """What every member must agree on at one sequence number: op, sizes, dtypes."""
        return (self.op, repr(self.input_sizes), repr(self.input_dtypes))


@dataclass(frozen=True)
class Dump:
    """One rank's dump."""

    path: str
    rank: int
    rank_from: str                 # "content" or "file name"
    version: str
    entries: tuple[Entry, ...]
    group_ranks: dict[str, tuple[int, ...]] = field(default_factory=dict)  # pg_config
    group_desc: dict[str, str] = field(default_factory=dict)
    completed_upto: dict[str, int] = field(default_factory=dict)  # pg_status, by group name
    complete: bool = True          # False: ``entries`` are only the newest the buffer holds
    oldest: Entry | None = None    # the oldest entry the buffer holds, when not all were read

    @property
    def buffer_wrapped(self) -> bool | None:
        """Whether the ring buffer dropped its oldest entries, told by the oldest entry it still
        holds (record ids count from 0); None when every entry was read (the caller compares
        the entries themselves)."""
        if self.complete or self.oldest is None:
            return None
        if self.oldest.record_id is not None:
            return self.oldest.record_id > 0
        return self.oldest.seq is not None and self.oldest.seq > 1

    def done(self, entry: Entry) -> bool:
        """Whether this rank finished ``entry`` (NCCL records it per entry; Gloo only counts
        its group's last completed collective, failed ones included)."""
        if entry.state == "completed":
            return True
        last = self.completed_upto.get(entry.group)
        return entry.seq is not None and last is not None and entry.seq <= last


class _NoCode(pickle.Unpickler):
    """An unpickler that builds only plain values: no global, no persistent id, no extension."""

    def find_class(self, module: str, name: str) -> Any:
        raise DumpError(f"refers to code ({module}.{name}), which a flight-recorder dump never "
                        "does: not read")

    def persistent_load(self, pid: Any) -> Any:
        raise DumpError("holds a persistent reference, which a flight-recorder dump never does")


def sniff_dump(head: bytes) -> bool:
    """Whether the first bytes of a file look like a flight-recorder dump (pickle or JSON)."""
    if len(head) >= 2 and head[0] == 0x80 and head[1] in PICKLE_PROTOCOLS:
        return True
    text = head.lstrip()
    return text[:1] == b"{" and b'"entries"' in head and (
        b'"version"' in head or b'"pg_config"' in head or b'"comm_lib_version"' in head)


def read_dump(path: str, stream: BinaryIO | None = None, newest: int | None = None,
              keep_from: Mapping[str, tuple[int, int | None]] | None = None) -> Dump:
    """The dump at ``path``; raises DumpError with the reason when it cannot be read. With
    ``newest``, a large pickle's entries are only its newest ``newest`` (flightrec/newest.py).
    With ``keep_from`` (group name -> first and last sequence number, None: the newest), a
    group's collectives outside its numbers are dropped as they are read, the newest
    ``KEPT_NEWEST`` entries excepted: what a verdict about a rank far behind needs, in bounded
    memory. ``Dump.complete`` says whether
    every entry was kept."""
    try:
        if stream is None:
            if os.path.getsize(path) > MAX_DUMP_BYTES:
                raise DumpError(f"larger than {MAX_DUMP_BYTES >> 20} MiB: not read")
            with open(path, "rb") as handle:
                raw = _read_capped(handle)
        else:
            raw = _read_capped(stream)
    except OSError as exc:
        raise DumpError(f"cannot be read: {exc.strerror or exc}") from None
    if len(raw) > MAX_DUMP_BYTES:
        raise DumpError(f"larger than {MAX_DUMP_BYTES >> 20} MiB: not read")
    cut = newest_entries(raw, newest, _NoCode) if newest else None
    budget = Budget.for_size(len(raw))
    try:
        if cut is not None:
            return _dump(path, cut.data, budget, _entry(cut.first, budget), keep_from)
        data = _decode(raw)
        if not isinstance(data, dict) or "entries" not in data:
            raise DumpError("is not a flight-recorder dump (no 'entries')")
        return _dump(path, data, budget, keep_from=keep_from)
    except Overgrown as exc:
        raise DumpError(f"is a corrupt dump ({exc})") from None


def _read_capped(stream: BinaryIO) -> bytes:
    """At most ``MAX_DUMP_BYTES + 1`` bytes, read in pieces: a read asks for all the memory
    it may fill at once, which ``ulimit -v`` on a login node refuses for a GiB."""
    pieces, size = [], 0
    while size <= MAX_DUMP_BYTES:
        piece = stream.read(min(READ_PIECE, MAX_DUMP_BYTES + 1 - size))
        if not piece:
            break
        pieces.append(piece)
        size += len(piece)
    return b"".join(pieces)


def _decode(raw: bytes) -> Any:
    if raw[:1] == b"\x80":
        try:
            return decode(raw, _NoCode)
        except DumpError:
            raise
        except Overclaim as exc:
            raise DumpError(f"is a truncated or corrupt pickle ({exc})") from None
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError,
                AttributeError, OverflowError, MemoryError, RecursionError, UnicodeDecodeError,
                struct.error) as exc:
            raise DumpError(f"is a truncated or corrupt pickle ({type(exc).__name__})") from None
    try:
        return json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise DumpError(f"is truncated or corrupt JSON ({type(exc).__name__})") from None


def _dump(path: str, data: dict, budget: Budget, oldest: Entry | None = None,
          keep_from: Mapping[str, tuple[int, int | None]] | None = None) -> Dump:
    rank, rank_from = _rank(path, data)
    version = budget.text(data.get("version", "unknown"), "the version")
    raw_entries = data.get("entries") or []
    if not isinstance(raw_entries, list):
        raise DumpError("has 'entries' that are not a list")
    if keep_from and len(raw_entries) > KEPT_NEWEST and isinstance(raw_entries[0], dict):
        oldest = oldest or _entry(raw_entries[0], budget)
        cut = len(raw_entries) - KEPT_NEWEST
        raw_entries = [e for e in raw_entries[:cut] if not _outside(e, keep_from, budget)] + \
            raw_entries[cut:]
    entries = tuple(_entry(e, budget) for e in raw_entries if isinstance(e, dict))
    group_ranks: dict[str, tuple[int, ...]] = {}
    group_desc: dict[str, str] = {}
    config = data.get("pg_config")
    if isinstance(config, dict):
        for name, info in config.items():
            name = budget.text(name, "a process group's name")
            if not isinstance(info, dict) or not name:
                continue
            group_desc[name] = budget.text(info.get("desc", ""), "a process group's desc")
            ranks = _ranks(info.get("ranks"))
            if ranks:
                group_ranks[name] = ranks
    return Dump(path, rank, rank_from, version, entries, group_ranks, group_desc,
                _completed_upto(data.get("pg_status"), entries, budget), oldest is None, oldest)


def _outside(raw: Any, keep: Mapping[str, tuple[int, int | None]], budget: Budget) -> bool:
    """Whether a raw entry is a collective of a group outside the numbers kept."""
    if not isinstance(raw, dict):
        return True
    name, _ = _group(raw, budget)
    numbers = keep.get(name)
    seq = raw.get("collective_seq_id", raw.get("seq_id"))
    if numbers is None or not isinstance(seq, int) or seq <= 0:
        return False
    low, high = numbers
    return seq < low or (high is not None and seq > high)


def _completed_upto(status: Any, entries: tuple[Entry, ...], budget: Budget) -> dict[str, int]:
    """pg_status's last completed collective per group, keyed by the group's name (pg_status
    is keyed by this rank's local group id, which entries pair with the name)."""
    if not isinstance(status, dict):
        return {}
    names = {str(e.pg_id): e.group for e in entries if e.pg_id is not None}
    out = {}
    for pg_id, info in status.items():
        pg_id = budget.text(pg_id, "a group's status key")
        if isinstance(info, dict) and pg_id in names:
            last = _int(_number(info.get("last_completed_collective")))
            if last is not None:
                out[names[pg_id]] = last
    return out


def _number(value: Any) -> Any:
    """JSON dumps write pg_status's numbers as text."""
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return value


def _rank(path: str, data: dict) -> tuple[int, str]:
    for key in ("rank", "global_rank"):
        value = data.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value, "content"
    found = _TRAILING_NUMBER.search(os.path.basename(path))
    if found is None:
        raise DumpError("records no rank and its file name does not end in one")
    return int(found.group(1)), "file name"


def _ranks(value: Any) -> tuple[int, ...]:
    """pg_config's ``ranks``: a list, or its text ``"[0, 1, 2]"`` (parsed, never evaluated)."""
    if isinstance(value, (list, tuple)):
        return tuple(v for v in value if isinstance(v, int) and not isinstance(v, bool))
    if isinstance(value, str):
        return _ranks_text(value)
    return ()


@functools.lru_cache(maxsize=256)
def _ranks_text(text: str) -> tuple[int, ...]:
    """Every rank's dump repeats the same text (a 1,024-rank group's is 6 KB): parsed once."""
    if not _RANKS_TEXT.match(text):
        return ()
    return tuple(int(v) for v in re.findall(r"-?\d+", text))


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return int(value)
    except (OverflowError, ValueError):  # inf or nan in a corrupt file
        return None


def _nonzero(value: Any) -> int | None:
    """A time in ns; JSON dumps write 0 where pickles write None (not discovered)."""
    number = _int(value)
    return number if number else None


def _group(raw: dict, budget: Budget) -> tuple[str, str]:
    """An entry's process group: its name and desc."""
    group = raw.get("process_group")
    if isinstance(group, (list, tuple)) and group:
        return (budget.text(group[0], "an entry's group name"),
                budget.text(group[1], "an entry's group desc") if len(group) > 1 else "")
    return budget.text(raw.get("pg_id", ""), "an entry's pg_id"), ""


def _entry(raw: dict, budget: Budget) -> Entry:
    get, listed = raw.get, budget.listed
    name, desc = _group(raw, budget)
    profiling = budget.text(get("profiling_name", ""), "an entry's profiling_name")
    op = profiling.split(":", 1)[1] if ":" in profiling else profiling
    is_p2p = get("is_p2p")
    if not isinstance(is_p2p, bool):
        is_p2p = op.startswith(("send", "recv"))
    seq = get("collective_seq_id", get("seq_id"))
    retired = get("retired")
    return Entry(
        record_id=_int(get("record_id")), pg_id=_int(get("pg_id")), group=name,
        group_desc=desc, seq=None if is_p2p else _int(seq), p2p_seq=_int(get("p2p_seq_id")),
        op=op, input_sizes=listed(get("input_sizes"), "an entry's input_sizes"),
        output_sizes=listed(get("output_sizes"), "an entry's output_sizes"),
        input_dtypes=listed(get("input_dtypes"), "an entry's input_dtypes"),
        output_dtypes=listed(get("output_dtypes"), "an entry's output_dtypes"),
        state=budget.text(get("state", ""), "an entry's state"),
        retired=retired if isinstance(retired, bool) else None,
        is_p2p=is_p2p, time_created_ns=_nonzero(get("time_created_ns")),
        started_ns=_nonzero(get("time_discovered_started_ns")),
        completed_ns=_nonzero(get("time_discovered_completed_ns")),
        raw_frames=get("frames") or ())

