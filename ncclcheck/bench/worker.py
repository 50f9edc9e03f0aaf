"""One rank's part of the sweep: time the all-reduce per size, then check every element.

Used in-process by the bench probe under a launcher (cluster mode) and as the body of the
processes the standalone launcher starts (``python -m ncclcheck.bench.worker CONFIG``). torch is
imported here only, when a sweep actually runs.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any, Callable

from .faults import FAULT_VARIABLE, Fault, fault_for, parse_faults
from .sizes import DTYPES

EVENT_PREFIX = "@ncclcheck-bench "
Emit = Callable[[dict[str, Any]], None]


@dataclass
class SweepConfig:
    """What every rank must agree on; JSON-serialisable so it can cross a process boundary."""

    backend: str
    sizes: list[int]
    dtype: str = "float32"
    iters: int = 20
    warmup: int = 5
    collective_timeout: float = 30.0
    deadline: float = 0.0  # time.time() by which the sweep must be over (0: none)
    faults: str = ""       # NCCLCHECK_BENCH_FAULT, see faults.py (tests only)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SweepConfig":
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass
class RankOutcome:
    """What one rank reports: its rows, its device, and the error that stopped it, if any."""

    rank: int
    host: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    device: str = "cpu"
    gpu_name: str | None = None
    gpu_uuid: str | None = None
    nccl_version: str | None = None
    error: dict[str, Any] | None = None  # {"kind", "message", "step", "bytes"}
    cut_short: bool = False  # the deadline left no time for the remaining sizes
    peers: dict[str, Any] = field(default_factory=dict)  # rank -> device identity (NCCL)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class CollectiveTimeout(RuntimeError):
    """A collective did not complete before its deadline."""


class DuplicateGpu(RuntimeError):
    """Two ranks of one host would drive the same GPU."""


class NoGpuForRank(RuntimeError):
    """LOCAL_RANK points past the GPUs this process can see: more ranks than GPUs."""


def error_kind(exc: BaseException) -> str:
    """Sort a backend exception into the taxonomy the report uses."""
    text = str(exc)
    if isinstance(exc, DuplicateGpu) or "Duplicate GPU detected" in text \
            or "Multiple Ranks are using the same GPU" in text:
        return "duplicate_gpu"
    if isinstance(exc, NoGpuForRank):
        return "rank_mismatch"
    if isinstance(exc, CollectiveTimeout) or "Timed out" in text or "timed out" in text \
            or "timeout" in text.lower():
        return "timeout"
    if "Connection reset" in text or "Connection refused" in text or "closed" in text.lower():
        return "connection"
    if "out of memory" in text.lower():
        return "out_of_memory"
    if "CUDA" in text or "cuda" in text:
        return "cuda"
    return "other"


def _pattern(torch: Any, rank: int, count: int, dtype: Any, device: Any) -> Any:
    """Rank r's input: 1 + (i + r) % 3 at element i — small integers, exact in every dtype."""
    tile = torch.tensor([1 + (rank + j) % 3 for j in range(3)], dtype=dtype, device=device)
    return tile.repeat((count + 2) // 3)[:count]


def _expected(torch: Any, nranks: int, count: int, device: Any) -> Any:
    """The element-wise sum of every rank's pattern, in float32 (it repeats with period 3)."""
    tile = [float(sum(1 + (r + j) % 3 for r in range(nranks))) for j in range(3)]
    return torch.tensor(tile, dtype=torch.float32, device=device).repeat((count + 2) // 3)[:count]


def _tolerance(dtype: str, nranks: int) -> float:
    """0 while every partial sum is an exactly representable integer, else half a unit."""
    exact_up_to = {"float32": 2 ** 24, "bfloat16": 2 ** 8, "float16": 2 ** 11}[dtype]
    biggest = 3 * nranks
    return 0.0 if biggest <= exact_up_to else biggest * 2.0 ** -7


class RankSweep:
    """The sweep on one rank. ``store`` is a c10d store shared by the ranks (already prefixed)."""

    def __init__(self, config: SweepConfig, store: Any, rank: int, world_size: int,
                 local_rank: int, host: str, emit: Emit, keep_group: bool = False) -> None:
        self.config = config
        self.keep_group = keep_group  # --isolate: the pair tests build subgroups on it
        self.store = store
        self.rank = rank
        self.world_size = world_size
        self.local_rank = local_rank
        self.emit = emit
        self.faults: list[Fault] = parse_faults(config.faults)
        self.outcome = RankOutcome(rank, host)
        self.step = -1

    # -- set-up ------------------------------------------------------------------------------
    def _device(self, torch: Any) -> Any:
        if self.config.backend != "nccl":
            return torch.device("cpu")
        count = torch.cuda.device_count()
        if count == 0:
            raise RuntimeError("--backend nccl needs a CUDA GPU, but torch sees none")
        if count > 1 and self.local_rank >= count:
            raise NoGpuForRank(f"LOCAL_RANK {self.local_rank} has no GPU: only {count} are "
                               "visible to this process")
        index = self.local_rank if count > 1 else 0
        torch.cuda.set_device(index)
        props = torch.cuda.get_device_properties(index)
        self.outcome.device = f"cuda:{index}"
        self.outcome.gpu_name = props.name
        uuid = getattr(props, "uuid", None)
        bus = getattr(props, "pci_bus_id", None)
        self.outcome.gpu_uuid = str(uuid) if uuid is not None else (
            f"pci:{props.pci_domain_id}:{bus}:{props.pci_device_id}" if bus is not None
            else f"index:{index}")
        try:
            version = torch.cuda.nccl.version()
            self.outcome.nccl_version = ".".join(str(v) for v in version[:3]) + (
                f"-{version[3]}" if len(version) > 3 and version[3] else "")
        except Exception:
            self.outcome.nccl_version = None
        return torch.device(f"cuda:{index}")

    def _check_duplicate_gpus(self) -> None:
        """Before NCCL sees them: two ranks of one host on one GPU is a layout error to name.

        O(1) store operations per rank: each rank counts itself under its (host, GPU) key and
        the ranks on a shared key read each other's numbers once everyone has counted.
        """
        timeout = timedelta(seconds=self.config.collective_timeout)
        gpu_key = f"gpu/{self.outcome.host}/{self.outcome.gpu_uuid}"
        seq = self.store.add(gpu_key, 1)
        self.store.set(f"{gpu_key}/{seq}", str(self.rank))
        # Counted only once its GPU is on record, so "ready" means every GPU is.
        if self.store.add("devices/count", 1) >= self.world_size:
            self.store.set("devices/ready", "1")
        self.store.wait(["devices/ready"], timeout)
        sharing = int(self.store.add(gpu_key, 0))
        if sharing > 1:
            keys = [f"{gpu_key}/{i}" for i in range(1, sharing + 1)]
            self.store.wait(keys, timeout)
            ranks = sorted(int(v) for v in self.store.multi_get(keys))
            self.outcome.peers = {"sharing_gpu": ranks}
            raise DuplicateGpu(f"ranks {', '.join(map(str, ranks))} on {self.outcome.host} all "
                               f"use GPU {self.outcome.gpu_uuid} ({self.outcome.device})")

    def _init_group(self, torch: Any) -> Any:
        import torch.distributed as dist  # deferred: see run()
        if dist.is_initialized():
            raise RuntimeError("a default process group already exists in this process")
        if self.config.deadline:
            # the survivors of a hang must time out, and report, before the sweep's deadline
            left = self.config.deadline - time.time()
            self.config.collective_timeout = max(1.0, min(self.config.collective_timeout,
                                                          left * 0.5))
        # Gloo: the group's timeout is the collective deadline itself. NCCL: our own polling
        # enforces the deadline and aborts, so the watchdog (which may kill the process under
        # TORCH_NCCL_ASYNC_ERROR_HANDLING=1) is given more time than that, to let us report.
        timeout = self.config.collective_timeout
        if self.config.backend == "nccl":
            timeout = timeout * 1.5 + 5.0
        dist.init_process_group(self.config.backend, store=dist.PrefixStore("pg", self.store),
                                rank=self.rank, world_size=self.world_size,
                                timeout=timedelta(seconds=timeout))
        return dist

    # -- the collective under a deadline -----------------------------------------------------
    def _finish(self, dist: Any, work: Any, device: Any) -> None:
        """Wait for an all-reduce. Gloo's own timeout bounds ``wait``; NCCL's work is polled
        and the communicator aborted when the deadline passes, so nothing waits forever."""
        if device.type == "cpu":
            work.wait()
            return
        started = time.monotonic()
        limit = started + self.config.collective_timeout
        while not work.is_completed():
            now = time.monotonic()
            if now > limit:
                _abort(dist)
                raise CollectiveTimeout(
                    f"all-reduce did not complete within {self.config.collective_timeout:g} s")
            if now - started > 0.01:  # spin first (timing precision), then stop burning a core
                time.sleep(0.0002)

    def _fault(self, kind: str, step: int) -> Fault | None:
        fault = fault_for(self.faults, kind, self.rank)
        return fault if fault and (kind in ("slow", "corrupt") or fault.step == step) else None

    def _measure(self, torch: Any, dist: Any, device: Any, step: int, nbytes: int) -> dict[str, Any]:
        cfg = self.config
        dtype = getattr(torch, cfg.dtype)
        count = nbytes // DTYPES[cfg.dtype][0]
        buf = torch.zeros(count, dtype=dtype, device=device)
        for _ in range(cfg.warmup):
            self._finish(dist, dist.all_reduce(buf, async_op=True), device)
        if self._fault("hang", step):
            while True:  # stop answering: only the deadline and teardown end this
                time.sleep(60)
        if self._fault("crash", step):
            os._exit(3)
        # warmed up: a rank that stops after this mark is not the one the others wait for
        self.emit({"event": "timed", "rank": self.rank, "step": step, "bytes": nbytes})
        self._finish(dist, dist.all_reduce(torch.zeros(1, device=device), async_op=True), device)
        slow = self._fault("slow", step)
        lag = 0.0
        work = None
        start = time.perf_counter()
        for _ in range(cfg.iters):
            before = time.perf_counter()
            if slow:
                time.sleep(0.02)
            entered = time.perf_counter()
            lag += entered - before
            if device.type == "cpu":
                dist.all_reduce(buf)
            else:
                work = dist.all_reduce(buf, async_op=True)
        if work is not None:
            self._finish(dist, work, device)
        elapsed = (time.perf_counter() - start) / cfg.iters

        pattern = _pattern(torch, self.rank, count, dtype, device)
        buf.copy_(pattern)
        if self._fault("corrupt", step):
            buf[count // 2] += 1
        input_wrong = int((buf != pattern).sum().item())
        self._finish(dist, dist.all_reduce(buf, async_op=True), device)
        expected = _expected(torch, self.world_size, count, device)
        diff = (buf.float() - expected).abs()
        wrong = int((diff > _tolerance(cfg.dtype, self.world_size)).sum().item())
        return {"bytes": count * DTYPES[cfg.dtype][0], "count": count, "time_s": elapsed,
                "lag_s": lag / cfg.iters, "wrong": wrong, "input_wrong": input_wrong}

    # -- the sweep -----------------------------------------------------------------------------
    def run(self) -> RankOutcome:
        dist = None
        try:
            import torch  # deferred: seconds to import, inside the deadline's try
            device = self._device(torch)
            if self.config.backend == "nccl":
                self._check_duplicate_gpus()
            dist = self._init_group(torch)
            for step, nbytes in enumerate(self.config.sizes):
                if self.config.deadline and self._too_late(step):
                    self.outcome.cut_short = True
                    break
                self.step = step
                self.emit({"event": "start", "rank": self.rank, "step": step, "bytes": nbytes})
                self.outcome.rows.append(self._measure(torch, dist, device, step, nbytes))
                self.emit({"event": "done", "rank": self.rank, "step": step, "bytes": nbytes})
        except BaseException as exc:  # reported, never raised: the collector names the rank
            step = self.step
            self.outcome.error = {"kind": error_kind(exc), "message": _first_lines(str(exc)),
                                  "exception": type(exc).__name__, "step": step,
                                  "bytes": self.config.sizes[step] if step >= 0 else None}
        finally:
            if dist is not None and self.outcome.error is None and not self.keep_group:
                try:
                    dist.destroy_process_group()
                except Exception:
                    pass
        return self.outcome

    def _too_late(self, step: int) -> bool:
        """Stop before a size that cannot finish: the last size took t, this one ~factor*t."""
        left = self.config.deadline - time.time()
        if left <= 0:
            return True
        if not self.outcome.rows:
            return False
        last = self.outcome.rows[-1]
        growth = self.config.sizes[step] / max(1, last["bytes"])
        needed = last["time_s"] * growth * (self.config.iters + self.config.warmup + 2)
        return needed > left


def _abort(dist: Any) -> None:
    """Abort the NCCL communicators so a hung collective cannot hold the process."""
    for name in ("_abort_process_group",):
        abort = getattr(dist.distributed_c10d, name, None)
        if abort is not None:
            try:
                abort()
                return
            except Exception:
                pass
    try:
        group = dist.distributed_c10d._get_default_group()
        backend = group._get_backend(__import__("torch").device("cuda"))
        backend.abort()
    except Exception:
        pass


def _first_lines(text: str, limit: int = 600) -> str:
    return text.strip()[:limit]


# -- the standalone launcher's worker process ------------------------------------------------
def _print_event(event: dict[str, Any]) -> None:
    sys.stdout.write(EVENT_PREFIX + json.dumps(event) + "\n")
    sys.stdout.flush()


def worker_main(argv: list[str]) -> int:
    """Entry of one worker process: join the store, run the sweep, print the outcome."""
    spec = json.loads(argv[0])
    config = SweepConfig.from_dict(spec["config"])
    rank, world = int(spec["rank"]), int(spec["world_size"])
    host = socket.gethostname().split(".")[0]
    try:
        import torch.distributed as dist  # deferred: seconds to import, inside the try
        base = dist.TCPStore(spec["master_addr"], int(spec["master_port"]), world, rank == 0,
                             timeout=timedelta(seconds=config.collective_timeout),
                             wait_for_workers=False)
        store = dist.PrefixStore("bench", base)
    except Exception as exc:
        outcome = RankOutcome(rank, host, error={"kind": "connection", "step": -1, "bytes": None,
                                                 "message": _first_lines(str(exc)),
                                                 "exception": type(exc).__name__})
        _print_event({"event": "result", "rank": rank, "outcome": outcome.to_dict()})
        return 1
    outcome = RankSweep(config, store, rank, world, rank, host, _print_event).run()
    _print_event({"event": "result", "rank": rank, "outcome": outcome.to_dict()})
    if outcome.error is not None:
        os._exit(1)  # a failed communicator may hang on clean-up; the result is out
    # rank 0 serves the store: it stays until every rank has said it is finished
    store.add("finished", 1)
    if rank == 0:
        limit = time.monotonic() + config.collective_timeout
        while int(store.add("finished", 0)) < world and time.monotonic() < limit:
            time.sleep(0.02)
    return 0


if __name__ == "__main__":
    os.environ.pop(FAULT_VARIABLE, None)  # the config carries the faults explicitly
    sys.exit(worker_main(sys.argv[1:]))
