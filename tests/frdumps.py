"""Flight-recorder dumps built from the format's schema (the field names torch's FlightRecorder
writes, version by version), for tests: NCCL's started/completed states and older releases
cannot be produced on a CPU machine. ``torch_dump`` has torch's own recorder write one over
Gloo, in a subprocess."""

from __future__ import annotations

import json
import os
import pickle
import pickletools
import random
import resource
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator


def entry(seq, op="all_reduce", group=("0", "default_pg"), pg_id=0, sizes=((16,),),
          dtypes=("Float",), state="completed", time_ns=None, frames=None, version="2.10",
          p2p=False, record_id=None):
    """One entry as torch writes it (schema of FlightRecorder.hpp's keys; built, not recorded:
    a GPU would be needed for NCCL's states)."""
    e = {"record_id": seq if record_id is None else record_id, "pg_id": pg_id,
         "process_group": group, "profiling_name": f"nccl:{op}",
         "input_sizes": [list(s) for s in sizes], "output_sizes": [list(s) for s in sizes],
         "input_dtypes": list(dtypes), "output_dtypes": list(dtypes), "state": state,
         "time_created_ns": time_ns or 1_000_000 * seq, "duration_ms": None,
         "time_discovered_started_ns": 5 if state in ("started", "completed") else None,
         "time_discovered_completed_ns": 9 if state == "completed" else None,
         "retired": state == "completed", "timeout_ms": 600000,
         "frames": frames if frames is not None else [
             {"name": op, "filename": "/site/torch/distributed/distributed_c10d.py", "line": 1},
             {"name": "train_step", "filename": "/job/train.py", "line": 40 + seq}]}
    if version >= "2.2":
        e.update({"collective_seq_id": 0 if p2p else seq, "p2p_seq_id": seq if p2p else 0,
                  "op_id": seq, "is_p2p": p2p})
    else:  # before 2.2 the collective's number was seq_id and there was no is_p2p
        e["seq_id"] = seq
    return e


def write(folder: Path, file_rank: int, entries, fmt="pickle", prefix="nccl_trace_rank_",
          version="2.10", pg_config=None, pg_status=None, protocol=2, **extra) -> Path:
    """A dump laid out as torch writes it: ``entries`` the last key, pickle protocol 2."""
    data = {"version": version, "comm_lib_version": "2.21.5",
            "pg_config": pg_config or {"": {"name": "", "desc": "", "ranks": "[]"}},
            "pg_status": pg_status or {}, **extra, "entries": entries}
    path = folder / f"{prefix}{file_rank}"
    if fmt == "json":
        path.write_text(json.dumps(data))
    else:
        path.write_bytes(pickle.dumps(data, protocol=protocol))
    return path


class Hostile:
    """A pickled object whose loading would run a command (touch ``marker``)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def mutated(data: bytes, count: int, seed: int) -> Iterator[bytes]:
    """``count`` broken copies of ``data``: every fourth cut short, the others with 1 to 8
    bytes overwritten (the first two, the pickle's protocol, kept)."""
    rng = random.Random(seed)
    for n in range(count):
        copy = bytearray(data)
        if n % 4 == 0:
            copy = copy[:rng.randrange(2, len(copy))]
        else:
            for _ in range(rng.randint(1, 8)):
                copy[rng.randrange(2, len(copy))] = rng.randrange(256)
        yield bytes(copy)


def claim_memo_slot(data: bytes, slot: int, newest: bool = False) -> bytes:
    """``data`` with a put into memo slot ``slot`` (LONG_BINPUT, three bytes longer): in place
    of its first put, or, ``newest``, after its last memo reference (among the newest entries,
    which a large dump's cut decodes)."""
    ops = [(op.name, pos) for op, _, pos in pickletools.genops(data)]
    put = b"r" + struct.pack("<I", slot)
    if newest:
        at = next(pos for name, pos in reversed(ops) if name == "BINGET") + 2
        return data[:at] + put + data[at:]
    at = next(pos for name, pos in ops if name == "BINPUT")
    return data[:at] + put + data[at + 2:]


def claim_length(data: bytes, length: int) -> bytes:
    """``data`` with its first BINUNICODE string claiming ``length`` bytes."""
    at = next(pos for op, _, pos in pickletools.genops(data) if op.name == "BINUNICODE")
    return data[:at + 1] + struct.pack("<I", length) + data[at + 5:]


def torch_dump(folder: Path, buffer_size: int, collectives: str) -> bytes:
    """The dump torch's flight recorder writes for one Gloo rank (a subprocess, 120 s at most)
    after ``collectives`` (Python lines over a tensor ``t`` of 8 ones) in a buffer of
    ``buffer_size`` entries."""
    code = (
        f"import os; os.environ['TORCH_FR_BUFFER_SIZE'] = '{buffer_size}'\n"
        "import torch, torch.distributed as dist\n"
        "from torch._C._distributed_c10d import _dump_fr_trace\n"
        f"dist.init_process_group('gloo', init_method='file://{folder}/store', rank=0, "
        "world_size=1)\n"
        "t = torch.ones(8)\n"
        f"{collectives}"
        f"open('{folder}/nccl_trace_rank_0', 'wb').write(_dump_fr_trace())\n"
        "dist.destroy_process_group()\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, capture_output=True)
    return (folder / "nccl_trace_rank_0").read_bytes()


def nest_shared(data: bytes, levels: int, first_slot: int = 10_000) -> bytes:
    """``data`` with its newest entry's ``input_sizes`` a list nested ``levels`` deep whose every
    level holds its child twice through the memo (LONG_BINPUT, then two LONG_BINGETs): a few
    bytes per level, 2**levels leaves to anything that walks it. The memo slots from
    ``first_slot`` are past the ones the file uses."""
    ops = list(pickletools.genops(data))
    key = next(n for n, (op, arg, _) in enumerate(ops) if arg == "input_sizes")
    slot = ops[key + 1][1]                              # the key's put
    dtypes = next(n for n, (op, arg, _) in enumerate(ops) if arg == "input_dtypes")
    dtypes_slot = ops[dtypes + 1][1]
    last = max(n for n, (op, arg, _) in enumerate(ops) if op.name.endswith("GET") and arg == slot)
    start = ops[last + 1][2]                            # the value after the key's reference
    end = next(pos for op, arg, pos in ops[last + 1:]
               if op.name.endswith("GET") and arg == dtypes_slot)

    def put(n: int) -> bytes:
        return b"r" + struct.pack("<I", first_slot + n)

    def get(n: int) -> bytes:
        return b"j" + struct.pack("<I", first_slot + n)

    nested = b"](K\x08e" + put(0)
    for level in range(1, levels + 1):
        nested += b"0](" + get(level - 1) * 2 + b"e" + put(level)
    return data[:start] + nested + data[end:]


# 300 collectives into a 200-entry buffer: more than the newest entries explain cuts
CYCLING_COLLECTIVES = ("for i in range(300):\n"
                       "    dist.broadcast(t, 0) if i % 3 == 0 else dist.all_reduce(t)\n")
LIMITED_ADDRESS_SPACE = 1 << 30


def explain_limited(folder: Path, cpu_seconds: int, timeout: float) -> tuple[dict, float]:
    """``ncclcheck explain --format json`` on ``folder`` in a child limited to 1 GiB of address
    space and ``cpu_seconds`` of CPU (a regression fails instead of eating the machine), and
    its wall seconds."""
    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (LIMITED_ADDRESS_SPACE, LIMITED_ADDRESS_SPACE))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))

    start = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "explain", "--format", "json",
                          str(folder)], capture_output=True, text=True, timeout=timeout,
                         preexec_fn=limits)
    elapsed = time.monotonic() - start
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout), elapsed
