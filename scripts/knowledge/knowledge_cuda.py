"""CUDA's error enumerations: every ``cudaError_t`` (runtime) and ``CUresult`` (driver) value.

Runtime names and numbers are read from the toolkit's ``driver_types.h`` and their texts from
the toolkit's libcudart (``cudaGetErrorName`` / ``cudaGetErrorString`` need no GPU). Driver
names, numbers and doc comments are read from ``cuda.h``; the driver's own texts
(``cuGetErrorString``) live in libcuda, which only a machine with the NVIDIA driver has, so a
driver entry carries the header's first doc sentence and the runtime error of the same number
instead (CUDA keeps the two enumerations' numbers aligned).
"""

from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path
from typing import Any

from knowledge_common import table

OK = frozenset({"cudaSuccess", "CUDA_SUCCESS", "cudaErrorNotReady", "CUDA_ERROR_NOT_READY"})
RULES: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset({"cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY"}), "out_of_memory"),
    # "invalid device ordinal": a rank asked for a GPU index this node does not show it
    (frozenset({"cudaErrorInvalidDevice", "CUDA_ERROR_INVALID_DEVICE"}), "rank_mismatch"),
    # the binary or the CUDA user-space does not fit this GPU or this kernel driver
    (frozenset({"cudaErrorNoKernelImageForDevice", "CUDA_ERROR_NO_BINARY_FOR_GPU",
                "cudaErrorCompatNotSupportedOnDevice", "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
                "cudaErrorSystemDriverMismatch", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"}),
     "version_mismatch"),
)
P2P = re.compile(r"Peer|PEER|Nvlink|NVLINK")
RULE = ("cudaErrorMemoryAllocation / CUDA_ERROR_OUT_OF_MEMORY -> out_of_memory; invalid device "
        "(ordinal) -> rank_mismatch; no kernel image for the device, compat not supported on "
        "the device, system driver mismatch -> version_mismatch; a name with Peer or NVLink -> "
        "p2p; every other error (illegal address, ECC, launch failures, no device, driver "
        "too old, unsupported PTX, invalid arguments ...) -> cuda. Success and not-ready are "
        "statuses, not failures: `ok` is true and their category is other.")
ENUM_ITEM = re.compile(r"(?:/\*\*(?P<doc>(?:(?!\*/).)*)\*/\s*)?(?P<name>\w+)\s*=\s*(?P<number>-?\d+)",
                       re.S)


def cuda_home() -> Path:
    """The toolkit: $CUDA_HOME, else the conventional /usr/local/cuda."""
    return Path(os.environ.get("CUDA_HOME") or "/usr/local/cuda")


def enum_body(text: str, opener: str) -> str:
    start = text.index(opener)
    return text[text.index("{", start) + 1:text.index("}", start)]


def first_sentence(doc: str) -> str:
    words = " ".join(line.strip().lstrip("*").strip() for line in doc.splitlines()).split()
    text = " ".join(words).replace("::", "")
    end = re.search(r"(?<!e\.g)(?<!i\.e)\.(\s|$)", text)
    return text[:end.start() + 1] if end else text


def parse_enum(text: str, opener: str) -> list[tuple[str, int, str]]:
    return [(m["name"], int(m["number"]), first_sentence(m["doc"] or ""))
            for m in ENUM_ITEM.finditer(enum_body(text, opener))]


def category(name: str) -> str:
    for names, cat in RULES:
        if name in names:
            return cat
    if name in OK:
        return "other"
    return "p2p" if P2P.search(name) else "cuda"


def cudart(home: Path) -> ctypes.CDLL:
    for folder in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
        found = sorted((home / folder).glob("libcudart.so*"))
        if found:
            lib = ctypes.CDLL(str(found[0]))
            for fn in (lib.cudaGetErrorName, lib.cudaGetErrorString):
                fn.restype, fn.argtypes = ctypes.c_char_p, [ctypes.c_int]
            return lib
    raise FileNotFoundError(f"no libcudart under {home}")


def toolkit_version(home: Path) -> str:
    code = int(re.search(r"#define CUDA_VERSION (\d+)", (home / "include" / "cuda.h")
                         .read_text())[1])
    return f"CUDA {code // 1000}.{code % 1000 // 10} (CUDA_VERSION {code})"


def cuda_table(home: Path | None = None) -> dict[str, Any]:
    home = home or cuda_home()
    include = home / "include"
    lib = cudart(home)
    runtime = parse_enum((include / "driver_types.h").read_text(), "enum __device_builtin__ cudaError\n")
    driver = parse_enum((include / "cuda.h").read_text(), "typedef enum cudaError_enum")
    by_number = {}
    entries: list[dict[str, Any]] = []
    for name, number, _doc in runtime:
        text = lib.cudaGetErrorString(number).decode()
        if lib.cudaGetErrorName(number).decode() == name:
            by_number.setdefault(number, name)
        entry = {"name": name, "number": number, "api": "runtime", "text": text,
                 "category": category(name)}
        entries.append(entry | ({"ok": True} if name in OK else {}))
    for name, number, doc in driver:
        entry = {"name": name, "number": number, "api": "driver", "doc": doc,
                 "category": category(name)}
        if number in by_number:
            entry["runtime"] = by_number[number]
        entries.append(entry | ({"ok": True} if name in OK else {}))
    return table("cuda", "cuda", "CUDA toolkit include/driver_types.h (enum cudaError) with "
                 "libcudart's cudaGetErrorString texts; include/cuda.h (enum cudaError_enum, "
                 "CUresult) with its doc comments", toolkit_version(home), RULE, entries)
