"""What a snapshot of a live job holds: per process, every thread's Python stack at each sample,
the process's state, its place in the job; per node, the ranks that are gone and what NCCL's RAS
said.

These are plain dataclasses with ``to_dict`` / ``from_dict`` because a snapshot travels: one node
writes it (``ncclcheck hang --out DIR``), another machine reads it (``ncclcheck explain DIR``), and
the verdict (verdict.py) must reach the same answer from the file as from memory. Frames are
stored as ``[function, file, line]`` triples: a 10,240-rank job's snapshot is mostly frames.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

FORMAT_KEY = "ncclcheck_hang_snapshot"  # the first key of every snapshot file (files.py sniffs it)
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Frame:
    """One Python frame: the function, its file (as the process sees it) and the line."""

    function: str
    file: str
    line: int

    def short(self) -> str:
        """``function (file:line)`` with the file's last two path parts, as people read it."""
        parts = self.file.replace("\\", "/").split("/")
        file = "/".join(parts[-2:]) if len(parts) > 2 else self.file
        return f"{self.function} ({file}:{self.line})"

    def to_list(self) -> list[Any]:
        return [self.function, self.file, self.line]

    @classmethod
    def from_list(cls, value: Any) -> "Frame":
        function, file, line = value
        return frame(str(function), str(file), int(line))


@lru_cache(maxsize=1 << 16)
def frame(function: str, file: str, line: int) -> Frame:
    """One shared Frame per place: a 10,240-rank job repeats the same few hundred frames, and
    holding each once keeps a snapshot of millions of frames small."""
    return Frame(function, file, line)


@dataclass
class ThreadStack:
    """One thread's Python stack, innermost frame first."""

    ident: int | None              # the thread's id as Python or py-spy names it
    native_id: int | None          # the kernel's thread id (/proc/PID/task/TID), where known
    name: str | None               # "MainThread", "Thread-2 (_pin_memory_loop)", ...
    frames: list[Frame]
    idle: bool | None = None       # py-spy's reading: waiting in the kernel, not running
    main: bool | None = None       # the process's main thread, where the source says so

    def to_dict(self) -> dict[str, Any]:
        return {"ident": self.ident, "native_id": self.native_id, "name": self.name,
                "idle": self.idle, "main": self.main,
                "frames": [f.to_list() for f in self.frames]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ThreadStack":
        return cls(data.get("ident"), data.get("native_id"), data.get("name"),
                   [Frame.from_list(f) for f in data.get("frames") or []],
                   data.get("idle"), data.get("main"))


@dataclass
class ProcState:
    """What the kernel says of a process at one moment (/proc, readable by anyone)."""

    state: str                     # R running, S sleeping, D disk wait, Z zombie, T stopped
    cpu_s: float                   # user + system time of the whole process
    threads: int
    wchan: str | None              # the main thread's wait channel ("futex_do_wait")
    main_cpu_s: float | None = None          # the main thread's own CPU time
    main_switches: int | None = None         # the main thread's voluntary context switches

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ProcState":
        return cls(str(data.get("state", "?")), float(data.get("cpu_s") or 0.0),
                   int(data.get("threads") or 0), data.get("wchan"),
                   data.get("main_cpu_s"), data.get("main_switches"))


@dataclass
class Sample:
    """One look at one process: when (seconds from the snapshot's start), its state, its stacks."""

    at: float
    state: ProcState | None
    threads: list[ThreadStack]

    def to_dict(self) -> dict[str, Any]:
        return {"at": round(self.at, 3), "state": self.state.to_dict() if self.state else None,
                "threads": [t.to_dict() for t in self.threads]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Sample":
        state = data.get("state")
        return cls(float(data.get("at") or 0.0), ProcState.from_dict(state) if state else None,
                   [ThreadStack.from_dict(t) for t in data.get("threads") or []])


@dataclass
class Problem:
    """Why a stack could not be taken, and what makes it possible (one line each)."""

    what: str
    fix: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ProcessSnapshot:
    """One process of the job on one node, looked at ``len(samples)`` times."""

    pid: int
    host: str
    rank: int | None
    local_rank: int | None
    world_size: int | None
    local_world_size: int | None
    launcher: str | None
    cmdline: str
    env: dict[str, str] = field(default_factory=dict)   # the job's variables, secrets masked
    source: str | None = None      # where the stacks came from: py-spy, debug-server, armed
    samples: list[Sample] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    exited: bool = False           # it ended while it was being looked at
    fr_dump: str | None = None     # the flight-recorder dump taken beside it (a file name)

    @property
    def label(self) -> str:
        """``rank 2 (node3, pid 4121)``: how a person finds it."""
        who = f"rank {self.rank}" if self.rank is not None else (
            f"local rank {self.local_rank}" if self.local_rank is not None else "a process")
        return f"{who} ({self.host}, pid {self.pid})"

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "host": self.host, "rank": self.rank,
                "local_rank": self.local_rank, "world_size": self.world_size,
                "local_world_size": self.local_world_size, "launcher": self.launcher,
                "cmdline": self.cmdline, "env": self.env, "source": self.source,
                "exited": self.exited, "fr_dump": self.fr_dump,
                "problems": [p.to_dict() for p in self.problems],
                "samples": [s.to_dict() for s in self.samples]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ProcessSnapshot":
        return cls(int(data["pid"]), str(data.get("host") or "?"), data.get("rank"),
                   data.get("local_rank"), data.get("world_size"), data.get("local_world_size"),
                   data.get("launcher"), str(data.get("cmdline") or ""),
                   dict(data.get("env") or {}), data.get("source"),
                   [Sample.from_dict(s) for s in data.get("samples") or []],
                   [Problem(str(p.get("what", "")), p.get("fix"))
                    for p in data.get("problems") or []],
                   bool(data.get("exited")), data.get("fr_dump"))


@dataclass
class GoneRank:
    """A rank this node should run and does not: it exited, or never started."""

    rank: int | None
    local_rank: int | None
    host: str
    why: str
    pid: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GoneRank":
        return cls(data.get("rank"), data.get("local_rank"), str(data.get("host") or "?"),
                   str(data.get("why") or ""), data.get("pid"))


@dataclass
class NodeSnapshot:
    """One node's snapshot: its processes, the ranks gone from it, NCCL RAS's report, notes."""

    host: str
    taken_at: str                  # ISO time, UTC
    samples: int
    interval_s: float
    duration_s: float
    processes: list[ProcessSnapshot] = field(default_factory=list)
    gone: list[GoneRank] = field(default_factory=list)
    ras: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def node_dict(self) -> dict[str, Any]:
        """Everything but the processes (each process file carries it)."""
        return {"host": self.host, "taken_at": self.taken_at, "samples": self.samples,
                "interval_s": self.interval_s, "duration_s": round(self.duration_s, 3),
                "gone": [g.to_dict() for g in self.gone], "ras": self.ras, "notes": self.notes}

    @classmethod
    def from_node_dict(cls, data: dict[str, Any]) -> "NodeSnapshot":
        return cls(str(data.get("host") or "?"), str(data.get("taken_at") or ""),
                   int(data.get("samples") or 0), float(data.get("interval_s") or 0.0),
                   float(data.get("duration_s") or 0.0), [],
                   [GoneRank.from_dict(g) for g in data.get("gone") or []],
                   data.get("ras"), [str(n) for n in data.get("notes") or []])
