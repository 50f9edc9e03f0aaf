"""ibverbs' enumerations: every work-completion status (``enum ibv_wc_status``) and every
asynchronous event (``enum ibv_event_type``), with the texts libibverbs prints for them.

NCCL's IB transport reports a failed completion as "NET/IB : Got completion from peer ... with
status=12 ... (transport retry counter exceeded)" in some releases and with the status name in
others, and an async event as "NET/IB : Got async event : port error". The names and their
order come from rdma-core's ``libibverbs/verbs.h`` at the release of the library installed;
the texts from the installed libibverbs.so.1 (``ibv_wc_status_str``, ``ibv_event_type_str``
through ctypes; no RDMA device is needed).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
import subprocess
from pathlib import Path
from typing import Any

from knowledge_common import table

RULE = ("every work-completion error status and async event of the verbs layer -> infiniband; "
        "IBV_WC_SUCCESS is a status (`ok`), category other; async events that report recovery "
        "or a normal state change (port active, LID/PKey/GID change, client reregister, "
        "path migrated) are `ok` too.")
OK = frozenset({"IBV_WC_SUCCESS", "IBV_EVENT_PORT_ACTIVE", "IBV_EVENT_LID_CHANGE",
                "IBV_EVENT_PKEY_CHANGE", "IBV_EVENT_SM_CHANGE", "IBV_EVENT_CLIENT_REREGISTER",
                "IBV_EVENT_GID_CHANGE", "IBV_EVENT_PATH_MIG", "IBV_EVENT_COMM_EST",
                "IBV_EVENT_SQ_DRAINED", "IBV_EVENT_QP_LAST_WQE_REACHED"})
ENUMS = (("wc_status", "ibv_wc_status", "ibv_wc_status_str"),
         ("event", "ibv_event_type", "ibv_event_type_str"))


def enum_names(header: str, enum: str) -> list[tuple[str, int]]:
    body = re.search(r"enum " + enum + r" \{(?P<body>[^}]*)\};", header)
    if body is None:
        raise ValueError(f"no enum {enum} in verbs.h")
    names, number = [], -1
    for item in body["body"].split(","):
        item = re.sub(r"/\*.*?\*/", "", item, flags=re.S).strip()
        if not item:
            continue
        name, _, value = (part.strip() for part in item.partition("="))
        number = int(value, 0) if value else number + 1
        names.append((name, number))
    return names


def libibverbs() -> ctypes.CDLL:
    found = ctypes.util.find_library("ibverbs")
    if not found:
        raise FileNotFoundError("libibverbs.so.1 is not installed (Debian: libibverbs1)")
    lib = ctypes.CDLL(found)
    for _, _, fn in ENUMS:
        getattr(lib, fn).restype, getattr(lib, fn).argtypes = ctypes.c_char_p, [ctypes.c_int]
    return lib


def rdma_tag(library_path: str) -> str:
    """The rdma-core tag of the installed library: libibverbs.so.1.14.<release>.<minor>."""
    match = re.search(r"\.so\.1\.\d+\.(\d+)\.(\d+)$", library_path)
    if match is None:
        raise ValueError(f"cannot read rdma-core's release from {library_path}")
    return f"v{match[1]}.{match[2]}"


def installed_library_file() -> str:
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    link = next(line.split("=>")[-1].strip() for line in out.splitlines()
                if "libibverbs.so.1 " in line)
    return str(Path(link).resolve())


def ibverbs_table(rdma_git_dir: Path) -> dict[str, Any]:
    lib = libibverbs()
    library_file = installed_library_file()
    tag = rdma_tag(library_file)
    header = subprocess.run(["git", "--git-dir", str(rdma_git_dir), "show",
                             f"{tag}:libibverbs/verbs.h"], capture_output=True, text=True,
                            check=True).stdout
    entries = []
    for kind, enum, fn in ENUMS:
        for name, number in enum_names(header, enum):
            text = getattr(lib, fn)(number).decode()
            entry = {"name": name, "number": number, "kind": kind, "text": text,
                     "category": "other" if name in OK else "infiniband"}
            entries.append(entry | ({"ok": True} if name in OK else {}))
    return table("ibverbs", "ibverbs", "rdma-core libibverbs/verbs.h (enum ibv_wc_status, enum "
                 "ibv_event_type) for the names; libibverbs.so.1 ibv_wc_status_str and "
                 "ibv_event_type_str (ctypes) for the texts",
                 f"rdma-core {tag.lstrip('v')} (libibverbs.so.1 {Path(library_file).name.split('.so.')[1]})",
                 RULE, entries)
