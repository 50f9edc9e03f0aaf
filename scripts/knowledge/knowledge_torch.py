"""torch.distributed's messages about setting up and running communication: c10d, Gloo,
TCPStore, ProcessGroupNCCL (C++, as strings in the wheel's shared libraries) and elastic /
rendezvous / launcher / c10d (Python, as raised and logged messages), for several releases.

The C++ messages are read from ``.rodata`` of libtorch_cpu.so, libtorch_cuda.so (CUDA builds:
ProcessGroupNCCL) and libtorch_python.so, keeping strings about distributed setup or
communication (SUBJECT) that are sentences rather than code (NOT_A_MESSAGE); the Python ones
from the torch/distributed files in PY_FILES. Each message gets a category by the first rule of
RULES its words match.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any, Iterator

from elf_strings import rodata_strings
from knowledge_common import table
from py_messages import messages, package_sources

LIBRARIES = ("libtorch_cpu.so", "libtorch_cuda.so", "libtorch_python.so")
PY_FILES = re.compile(r"^torch/distributed/(distributed_c10d|rendezvous|run|launch|constants|"
                      r"c10d_logger|utils|__init__)\.py$|^torch/distributed/(elastic|launcher)/")
SUBJECT = re.compile(r"c10d|[Gg]loo|TCPStore|[Ss]ocket|[Rr]endezvous|ProcessGroup|NCCL|\bpeer\b|"
                     r"[Cc]onnection|[Cc]onnect\b|MASTER_|TORCH_NCCL|TORCH_DISTRIBUTED|world size|"
                     r"[Ww]atchdog|[Tt]imed out|address already in use|heartbeat|[Ss]tore\b|"
                     r"collective|init_process_group")
NOT_A_MESSAGE = re.compile(r"INTERNAL ASSERT FAILED|fully_qualified_type_name|__torch__|"
                           r"Sec-WebSocket|\) -> |c10::|std::|^\w+\(|\w+\.(cpp|hpp|h|cu):\d|"
                           r"^[\w:.]+$|^\s*[,:;)]|RRef|\blane\b|nop object|ringbuffer|spontaneous|"
                           r"requested connection|registration callback|\bJIT\b|glootls")
RULES: tuple[tuple[str, str], ...] = (
    (r"address already in use|EADDRINUSE|port .*(in use|already bound)", "port_in_use"),
    (r"gai error|getaddrinfo|name or service not known|cannot be retrieved|resolv|unknown host",
     "name_resolution"),
    (r"desync|mismatch between collectives|collective sequence|detected mismatch", "desync"),
    (r"(world[_ ]?size|\branks?\b|local[_ ]?rank|node[_ ]?rank|nnodes|nproc).*(invalid|expected|"
     r"must|mismatch|out of|exceed|greater|less|not match|does not|larger|smaller|equal)|"
     r"(invalid|expected|mismatch).*(world[_ ]?size|\branks?\b)", "rank_mismatch"),
    (r"interface|ifname|network device|makeDeviceFor", "interface"),
    (r"connect|connection|refused|reset by peer|closed by peer|unreachable|no route|\bpeer\b",
     "connection"),
    (r"timed? ?out|timeout|deadline", "timeout"),
    (r"exit ?code|exitcode|signal|sigterm|sigkill|died|terminated|childfailed|crash",
     "rank_crashed"),
    (r"out of memory|\boom\b", "out_of_memory"),
    (r"/dev/shm|shared memory", "shared_memory"),
    (r"same (gpu|device)|duplicate (gpu|device)", "duplicate_gpu"),
    (r"\bversion\b", "version_mismatch"),
    (r"\bcuda\b|\bgpus?\b", "cuda"),
    (r"environment variable|env var|MASTER_ADDR|MASTER_PORT|must be|should be|invalid|expected|"
     r"not supported|unsupported|only supported|not set|required|cannot|can't|unknown|"
     r"not allowed|not a valid|built in|missing", "configuration"),
)
RULE = ("by the message's words (case-insensitive), first rule wins: "
        + "; ".join(f"/{words}/ -> {cat}" for words, cat in RULES) + "; the rest -> other. "
        "component: gloo when the message names Gloo, torch otherwise (the wheel links Gloo and "
        "libuv in; their texts are not told apart by source here).")


def category(message: str) -> str:
    for words, cat in RULES:
        if re.search(words, message, re.I):
            return cat
    return "other"


def torch_version(where: Path) -> str:
    if where.suffix == ".whl":
        return where.name.split("-")[1]
    text = (where / "torch" / "version.py").read_text()
    return re.search(r"__version__\s*=\s*['\"]([^'\"]+)", text)[1]


def libraries(where: Path) -> Iterator[tuple[str, bytes]]:
    if where.suffix == ".whl":
        with zipfile.ZipFile(where) as wheel:
            names = set(wheel.namelist())
            for lib in LIBRARIES:
                if f"torch/lib/{lib}" in names:
                    yield lib, wheel.read(f"torch/lib/{lib}")
        return
    for lib in LIBRARIES:
        if (where / "torch" / "lib" / lib).exists():
            yield lib, (where / "torch" / "lib" / lib).read_bytes()


def release_messages(where: Path) -> Iterator[tuple[str, str, str]]:
    """(message, source, kind) of one torch release."""
    for lib, data in libraries(where):
        for text in dict.fromkeys(s.strip() for s in rodata_strings(data)):
            if (len(text.split()) >= 2 and len(text) >= 10 and SUBJECT.search(text)
                    and not NOT_A_MESSAGE.search(text)):
                yield text, lib, "c++"
    for path, source in package_sources(where, ("torch",)):
        if PY_FILES.search(path):
            for found in messages(source):
                if len(found.template.strip()) >= 10:
                    yield found.template, path, found.kind


def torch_table(sources: list[Path]) -> dict[str, Any]:
    entries: dict[tuple[str, str, str], dict[str, Any]] = {}
    versions = []
    for where in sources:
        version = torch_version(where)
        versions.append(version)
        for message, source, kind in release_messages(where):
            entry = entries.setdefault((message, source, kind), {
                "message": message, "component": "gloo" if "gloo" in message.lower() else "torch",
                "source": source, "kind": kind, "releases": [], "category": category(message)})
            if version not in entry["releases"]:
                entry["releases"].append(version)
    rows = sorted(entries.values(), key=lambda e: (e["source"], e["message"], e["kind"]))
    return table("torch", "torch", "torch wheels: .rodata strings of torch/lib/" + ", ".join(LIBRARIES)
                 + " (those present); messages raised and logged in torch/distributed/ "
                 "(distributed_c10d, rendezvous, run, launch, constants, c10d_logger, utils, "
                 "elastic/, launcher/)", ", ".join(versions), RULE, rows)
