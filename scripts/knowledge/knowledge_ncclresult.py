"""NCCL's result codes: every ``ncclResult_t`` name and number from the nvidia-nccl wheel's
``nccl.h``, and the text its libnccl.so.2 gives for it (``ncclGetErrorString``, loaded with
ctypes: the library loads and answers on a machine without a GPU).

torch prints these texts ("NCCL error in: ..., unhandled system error (run with
NCCL_DEBUG=INFO for details), NCCL version 2.20.5"), so they tie a wrapper's message to the
kind of failure NCCL reported.
"""

from __future__ import annotations

import ctypes
import importlib.util
import re
from pathlib import Path
from typing import Any

from knowledge_common import categorise, table

OK = frozenset({"ncclSuccess", "ncclInProgress"})
RULES: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset({"ncclUnhandledCudaError"}), "cuda"),
    (frozenset({"ncclInvalidArgument", "ncclInvalidUsage"}), "configuration"),
    (frozenset({"ncclRemoteError"}), "connection"),
    (frozenset({"ncclTimeout"}), "timeout"),
)
RULE = ("ncclUnhandledCudaError -> cuda; ncclInvalidArgument, ncclInvalidUsage -> "
        "configuration; ncclRemoteError (remote process exited or network error) -> connection; "
        "ncclTimeout -> timeout; ncclSystemError and ncclInternalError -> other (a system call "
        "or NCCL itself failed: the WARN lines before say what); ncclSuccess and ncclInProgress "
        "are statuses (`ok`), category other; ncclNumResults is the enum's end, not a result.")
ENUM = re.compile(r"typedef enum \{(?P<body>[^}]*)\}\s*ncclResult_t;")
ITEM = re.compile(r"(\w+)\s*=\s*(\d+)")


def wheel_folder() -> Path:
    """The installed nvidia-nccl wheel's nvidia/nccl folder."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("no nvidia-nccl wheel installed")
    for base in spec.submodule_search_locations:
        if (Path(base) / "nccl" / "lib" / "libnccl.so.2").exists():
            return Path(base) / "nccl"
    raise FileNotFoundError("no nvidia/nccl/lib/libnccl.so.2 in the installed nvidia packages")


def library(folder: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(folder / "lib" / "libnccl.so.2"))
    lib.ncclGetErrorString.restype, lib.ncclGetErrorString.argtypes = ctypes.c_char_p, [ctypes.c_int]
    return lib


def library_version(lib: ctypes.CDLL) -> str:
    code = ctypes.c_int()
    lib.ncclGetVersion(ctypes.byref(code))
    major, rest = divmod(code.value, 10000)
    return f"NCCL {major}.{rest // 100}.{rest % 100} (nvidia-nccl wheel, ncclGetVersion {code.value})"


def result_names(header: str) -> list[tuple[str, int]]:
    body = ENUM.search(header)
    if body is None:
        raise ValueError("no ncclResult_t enum in nccl.h")
    return [(n, int(v)) for n, v in ITEM.findall(body["body"]) if n != "ncclNumResults"]


def nccl_result_table(folder: Path | None = None) -> dict[str, Any]:
    folder = folder or wheel_folder()
    lib = library(folder)
    entries = []
    for name, number in result_names((folder / "include" / "nccl.h").read_text()):
        entry = {"name": name, "number": number, "text": lib.ncclGetErrorString(number).decode(),
                 "category": categorise(name, RULES)}
        entries.append(entry | ({"ok": True} if name in OK else {}))
    return table("nccl_result", "nccl", "nvidia-nccl wheel: include/nccl.h (enum ncclResult_t) "
                 "and lib/libnccl.so.2 ncclGetErrorString (ctypes)", library_version(lib), RULE,
                 entries)
