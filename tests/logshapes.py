"""The shapes a real log takes between the job and the reader, as pure text -> text functions.

explain must name the same root cause whatever a collector did to the lines on the way: a
per-line prefix (srun -l, torchrun, Ray, kubectl, docker compose, journald, ts), other ranks'
consequence lines interleaved, Ray's folding of repeats, hard wrapping at 80 columns, a middle
cut out, or the launcher's report of a death appended (logtails.py). Each function copies its
collector's format from the collector's own source or from a real run, named beside it, so a
move measured with them (benchmarks/explain_invariance.py, tests/test_explain_invariance.py)
is explain's fault, not the instrument's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta


def split(text: str) -> list[str]:
    """The log's lines: split on "\\n" only (a progress bar's "\\r" stays inside its line)."""
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def join(lines: list[str]) -> str:
    return "\n".join(lines) + "\n" if lines else ""


# -- what the log itself names: its rank, host, NCCL version and latest time -------------------
_ERRORISH = re.compile(r"error|fail|warn|exception|abort|killed|timeout|timed out|signal", re.I)
_RANKS = re.compile(r"\[rank(\d+)\]|\[Rank (\d+)\]|\brank[ :=]+(\d+)\b|\[default(\d+)\]:", re.I)
_HOSTS = re.compile(r"(?:^|\s|\])([A-Za-z][\w.-]*):\d+:\d+ \[\d+\]|^\s*host\s*:\s*(\S+)"
                    r"|srun: error: ([^:\s]+): task|on node (\S+) exited")
_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")


def _named(pattern: re.Pattern[str], text: str) -> str | None:
    """The first value ``pattern`` finds on a line that reads like an error, else anywhere."""
    first = None
    for line in split(text):
        found = pattern.search(line)
        if found:
            value = next(g for g in found.groups() if g is not None)
            if _ERRORISH.search(line):
                return value
            first = first or value
    return first


def named_rank(text: str) -> int | None:
    value = _named(_RANKS, text)
    return int(value) if value is not None else None


def named_host(text: str) -> str | None:
    return _named(_HOSTS, text)


def nccl_version(text: str) -> str | None:
    found = _NCCL_VERSION.search(text)
    return found.group(1) if found else None


_FULL_STAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T_](\d\d):(\d\d):(\d\d)")
_GLOG_STAMP = re.compile(r"(?:^|[\[\]:\s])[IWEF](\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)")


def last_stamp(text: str, now: datetime | None = None) -> datetime | None:
    """The latest time the log prints: full date-times, and glog's month-day stamps in the
    year of the log's full stamps (else the latest year that does not put them ahead of
    ``now``, as explain reads them)."""
    stamps: list[datetime] = []
    for found in _FULL_STAMP.finditer(text):
        try:
            stamps.append(datetime(*map(int, found.groups())))
        except ValueError:
            continue
    now = now or datetime.now()
    for found in _GLOG_STAMP.finditer(text):
        month, day, hour, minute, second = map(int, found.groups())
        year = max(stamps).year if stamps else now.year
        try:
            stamp = datetime(year, month, day, hour, minute, second)
        except ValueError:
            continue
        if not stamps and stamp > now:
            stamp = stamp.replace(year=year - 1)
        stamps.append(stamp)
    return max(stamps) if stamps else None


# -- (b) one collector's prefix on every line --------------------------------------------------
@dataclass(frozen=True)
class Prefix:
    """A collector that writes ``make(rank, n)`` before line n; ``blank`` is False where it
    leaves empty lines bare."""

    make: Callable[[int, int], str]
    blank: bool = True


_START = datetime(2026, 12, 7, 2, 55, 21)


def _clock(n: int) -> str:
    """A syslog-style time for line n, a second every ten lines (ts and journald use
    strftime "%b %d %H:%M:%S": "Dec 07 02:55:21")."""
    return (_START + timedelta(seconds=n // 10)).strftime("%b %d %H:%M:%S")


PREFIXES: dict[str, Prefix] = {
    # Slurm srun -l (--label): "<task id>: ", as the real srun prints it
    # (tests/data/logs/tails/srun-l-*.txt; tests/test_launcher_tails.py checks it).
    "srun-l": Prefix(lambda rank, n: f"{rank}: "),
    # torchrun --tee 3: the elastic agent's tail_log.py writes f"[{role}{local_rank}]:" before
    # every line of the worker's output, empty lines too (checked with real torchrun 2.13).
    "torchrun-tee": Prefix(lambda rank, n: f"[default{rank}]:"),
    # torch.distributed's excepthook (distributed_c10d.py, init_process_group):
    # f"[rank{get_rank()}]: " before each line of a traceback, empty lines left empty.
    "torch-rank": Prefix(lambda rank, n: f"[rank{rank}]: ", blank=False),
    # Ray's driver (worker.py print_worker_logs) for an actor on another node:
    # "({actor_name} pid={pid}, ip={ip}) " (docs: "(MyActor pid=480956) actor log message").
    "ray": Prefix(lambda rank, n: f"(RayTrainWorker pid={12345 + rank}, ip=10.0.0.{rank + 1}) "),
    # kubectl logs --prefix (kubectl's logs.go): fmt.Sprintf("[pod/%s/%s] ", pod, container).
    "kubectl": Prefix(lambda rank, n: f"[pod/train-{rank}/main] "),
    # docker compose (cmd/formatter/logs.go): fmt.Sprintf("%-<width>s | ", name), width being
    # the longest container name + 1: "train-1  | " for a single service.
    "compose": Prefix(lambda rank, n: f"{f'train-{rank + 1}':<{len(f'train-{rank + 1}') + 1}} | "),
    # journalctl -o short (the default): "%b %d %H:%M:%S host identifier[pid]: message".
    "journald": Prefix(lambda rank, n: f"{_clock(n)} node{rank + 1} python3[{1234 + rank}]: "),
    # moreutils ts (no format given: "%b %d %H:%M:%S"), the time, one space, the line.
    "ts": Prefix(lambda rank, n: f"{_clock(n)} "),
}


def prefixed(text: str, style: str, rank: int | None = None) -> str:
    """Every line as collector ``style`` writes it, for the log's rank (its named one, else 0)."""
    prefix = PREFIXES[style]
    rank = named_rank(text) if rank is None else rank
    rank = rank or 0
    return join([line if not line and not prefix.blank else prefix.make(rank, n) + line
                 for n, line in enumerate(split(text))])


# -- (c) other ranks' consequence lines in between -----------------------------------------------
CONSEQUENCES = (
    # real/torchrun-killed-rank.log (Gloo, a peer SIGKILLed)
    "[rank{rank}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
    "pair.cc:537] Read error [127.0.0.1]:11157: Connection reset by peer. This is typically "
    "caused by a remote worker hanging or bugs in the application. Check the logs of the "
    "remote worker before reporting an error. GLHF! \U0001f3d6\ufe0f",
    # real/torchrun-rank-valueerror.log (Gloo, a peer raised)
    "[rank{rank}]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
    "pair.cc:553] Connection closed by peer [127.0.0.1]:35734. This is typically caused by a "
    "remote worker crashing. Check the logs of the remote worker before reporting an error. "
    "GLHF! \U0001f3d6\ufe0f",
    # world/dev/c5-022-lm-eval-harness-gsm8k-multigpu-watchdog-allreduce-timeout.log
    "[rank{rank}]:[E ProcessGroupNCCL.cpp:474] [Rank {rank}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1, NumelOut=1, "
    "Timeout(ms)=1800000) ran for 1800668 milliseconds before timing out.",
    # world/dev/c8-039-remote-peer-closed-but-rank3-cuda-oom-in-nccl-alloc.log (hosts renamed)
    "worker-{rank}:3063025:3066048 [0] misc/socket.cc:49 NCCL WARN socketProgress: "
    "Connection closed by remote peer worker-{peer}<51159>",
    # world/dev/c1-036-nccl-remote-error-connection-reset-bad-ib-nodes.log
    "[rank{rank}]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/"
    "distributed/c10d/NCCLUtils.hpp:268, remote process exited or there was a network error, "
    "NCCL version {version}",
    "[rank{rank}]: ncclRemoteError: A call failed possibly due to a network error or a remote "
    "process exiting prematurely.",
)


_WORK = re.compile(r"WorkNCCL\(SeqNum=(\d+), OpType=(\w+)")


def interleave(text: str, rank: int | None = None, version: str | None = None) -> str:
    """CONSEQUENCES spread evenly between the log's lines, each from another rank than the
    log's: the NCCL version the log names (``version``: the one a per-rank folder's files
    name), where it names one, and the collective its own watchdog names (the others'
    watchdogs of the same failure wait on the same collective; one that names another sequence
    number is a desync, a different story)."""
    lines = split(text)
    own = named_rank(text) if rank is None else rank
    others = [r for r in range(1, 16) if r != own]
    version = nccl_version(text) or version or "2.21.5"
    work = _WORK.search(text)
    seq, op = work.groups() if work else ("3", "ALLREDUCE")
    step = max(1, len(lines) // (len(CONSEQUENCES) + 1))
    out: list[str] = []
    queue = list(enumerate(CONSEQUENCES))
    for n, line in enumerate(lines, 1):
        out.append(line)
        if queue and n % step == 0:
            i, template = queue.pop(0)
            out.append(template.format(rank=others[i], peer=others[i - 1], version=version,
                                       seq=seq, op=op))
    out += [t.format(rank=others[i], peer=others[i - 1], version=version, seq=seq, op=op)
            for i, t in queue]
    return join(out)


# -- (d) Ray's log deduplication -------------------------------------------------------------
# ray/_private/ray_logging: a line whose words without digits were seen within the aggregation
# window is held back and counted; when the window closes the latest such line is printed once
# with " [repeated Nx across cluster]" (N: the lines held back), the first time followed by the
# note below; a line that came back only once is printed as itself. Lines left with no words
# after dropping the numbered ones are never folded (ray-project/ray#45485).
RAY_NOTE = (" (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log "
            "deduplication, or see https://docs.ray.io/en/master/ray-observability/user-guides/"
            "configure-logging.html#log-deduplication for more options.)")
_NUMBERED = re.compile(r"\d+|0x[0-9a-fA-F]+")


def _dedup_key(line: str) -> str:
    return " ".join(word for word in line.split() if not _NUMBERED.search(word))


@dataclass
class _Held:
    since: int  # the line the window opened on
    count: int
    line: str


def fold_repeats(text: str, window: int = 20) -> str:
    """Ray's folding, with a window of ``window`` lines standing in for Ray's 5 seconds and
    every repeat taken as another worker's (a log keeps no record of who printed a line)."""
    out: list[str] = []
    held: dict[str, _Held] = {}
    noted = False

    def close(key: str, state: _Held, n: int) -> None:
        nonlocal noted
        if state.count > 1:
            out.append(f"{state.line} [repeated {state.count}x across cluster]"
                       + ("" if noted else RAY_NOTE))
            noted = True
            held[key] = _Held(n, 0, state.line)  # Ray keeps folding the pattern
        elif state.count == 1:
            out.append(state.line)

    lines = split(text)
    for n, line in enumerate(lines):
        for key in [k for k, state in held.items() if n - state.since >= window]:
            close(key, held.pop(key), n)
        key = _dedup_key(line)
        if not key:
            out.append(line)
        elif key in held:
            held[key].count += 1
            held[key].line = line
        else:
            held[key] = _Held(n, 0, line)
            out.append(line)
    for key, state in list(held.items()):  # the end of the log flushes what is held
        del held[key]
        close(key, state, len(lines))
    return join(out)


# -- (e) hard wrap ------------------------------------------------------------------------------
def wrap(text: str, width: int = 80) -> str:
    """Every line cut into pieces of ``width`` columns, as ``fold -w 80`` or a terminal's
    capture does: a tab advances to the next multiple of 8, a carriage return to column 0, a
    backspace one column back, any other character one column."""
    out: list[str] = []
    for line in split(text):
        piece, column = "", 0
        for char in line:
            after = _advance(column, char)
            if after > width:
                out.append(piece)
                piece, after = "", _advance(0, char)
            piece += char
            column = after
        out.append(piece)
    return join(out)


def _advance(column: int, char: str) -> int:
    if char == "\t":
        return column + 8 - column % 8
    if char == "\r":
        return 0
    if char == "\b":
        return max(0, column - 1)
    return column + 1


# -- (f) the middle cut out -------------------------------------------------------------------
def cut_middle(text: str, keep: Collection[int] = (), count: bool = False) -> str:
    """The longest run of lines in the middle half of the log (never its first or last line)
    that holds none of ``keep`` (1-based line numbers: the lines the root cause was read
    from) replaced by one line, "..." or with ``count`` "... N lines omitted ..."."""
    lines = split(text)
    lo, hi = max(1, len(lines) // 4), min(len(lines) - 1, len(lines) - len(lines) // 4)
    best: tuple[int, int] = (0, 0)
    start = None
    for n in range(lo, hi + 1):
        free = n < hi and (n + 1) not in keep
        if free and start is None:
            start = n
        elif not free and start is not None:
            best = max(best, (n - start, start))
            start = None
    length, first = best
    if not length:
        return join(lines)
    marker = f"... {length} lines omitted ..." if count else "..."
    return join(lines[:first] + [marker] + lines[first + length:])
