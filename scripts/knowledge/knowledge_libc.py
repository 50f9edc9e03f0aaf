"""The C library's enumerations: errno names with their strerror texts, and getaddrinfo's
EAI_* codes with their gai_strerror texts.

A log rarely says "ECONNREFUSED"; it says "Connection refused", "(errno: 111 - Connection
refused)" or "[Errno -2] Name or service not known". Both the names and the texts come from
the running software: Python's ``errno`` module and ``os.strerror`` (which call the C
library's strerror), Python's ``socket`` module and libc's ``gai_strerror`` through ctypes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import platform
import socket
import sys
from typing import Any

from knowledge_common import categorise, table

# errno -> category, by what the error says about a distributed run. An errno that names no
# specific failure (EINVAL, EPERM, ENOENT, EIO, EAGAIN ...) stays `other`: the line around it
# decides, not the number.
ERRNO_RULES: tuple[tuple[frozenset[str], str], ...] = (
    # a peer or the master cannot be reached, or the link to it broke
    (frozenset({"ECONNREFUSED", "ECONNRESET", "ECONNABORTED", "ETIMEDOUT", "EHOSTUNREACH",
                "ENETUNREACH", "EHOSTDOWN", "ENETRESET", "EPIPE", "ENOTCONN", "ESHUTDOWN"}),
     "connection"),
    # this host's own side: the interface is down, the address is not ours, the family is wrong
    (frozenset({"ENETDOWN", "EADDRNOTAVAIL", "EAFNOSUPPORT", "EPFNOSUPPORT"}), "interface"),
    (frozenset({"EADDRINUSE"}), "port_in_use"),
    (frozenset({"ENOMEM"}), "out_of_memory"),
)
# Where the words around an errno change what it means (the lookup applies these).
ERRNO_CONTEXT: dict[str, dict[str, list[str]]] = {
    "ENOSPC": {"shared_memory": ["/dev/shm", "shm", "posix_fallocate"]},
    "ENOMEM": {"infiniband": ["ibv_reg_mr", "NET/IB", "memlock", "ibv_"]},
    "EBUSY": {"cuda": ["CUDA", "cuda", "GPU"]},
}
ERRNO_RULE = ("ECONNREFUSED ECONNRESET ECONNABORTED ETIMEDOUT EHOSTUNREACH ENETUNREACH EHOSTDOWN "
              "ENETRESET EPIPE ENOTCONN ESHUTDOWN -> connection; ENETDOWN EADDRNOTAVAIL "
              "EAFNOSUPPORT EPFNOSUPPORT -> interface; EADDRINUSE -> port_in_use; ENOMEM -> "
              "out_of_memory; every other errno -> other (it names no specific failure). "
              "`context` lists words near the errno that change its category (ENOSPC on "
              "/dev/shm -> shared_memory, ENOMEM from ibv_reg_mr -> infiniband).")

EAI_RULES: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset({"EAI_NONAME", "EAI_AGAIN", "EAI_FAIL", "EAI_NODATA", "EAI_ADDRFAMILY"}),
     "name_resolution"),
    (frozenset({"EAI_SERVICE"}), "configuration"),  # a port string that is no service
    (frozenset({"EAI_MEMORY"}), "out_of_memory"),
)
EAI_RULE = ("EAI_NONAME EAI_AGAIN EAI_FAIL EAI_NODATA EAI_ADDRFAMILY -> name_resolution; "
            "EAI_SERVICE -> configuration; EAI_MEMORY -> out_of_memory; the rest (bad flags, "
            "socket type, family, overflow, system error) -> other.")


def libc_version() -> str:
    name, version = platform.libc_ver()
    return f"{name} {version}".strip() or "unknown libc"


def python_version() -> str:
    return f"Python {sys.version_info.major}.{sys.version_info.minor}"


def errno_table() -> dict[str, Any]:
    names = sorted((n for n in dir(errno) if n.startswith("E") and n.isupper()),
                   key=lambda n: (getattr(errno, n), n))
    entries = []
    for name in names:
        number = getattr(errno, name)
        entry: dict[str, Any] = {"name": name, "number": number, "text": os.strerror(number),
                                 "category": categorise(name, ERRNO_RULES)}
        primary = errno.errorcode.get(number, name)
        if primary != name:
            entry["alias_of"] = primary
            entry["category"] = categorise(primary, ERRNO_RULES)
        if (context := ERRNO_CONTEXT.get(primary)):
            entry["context"] = context
        entries.append(entry)
    return table("errno", "glibc", f"{python_version()} errno module names; the C library's "
                 "strerror texts (os.strerror)", f"{libc_version()}; {python_version()}",
                 ERRNO_RULE, entries)


def gai_strerror(code: int) -> str:
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.gai_strerror.restype = ctypes.c_char_p
    libc.gai_strerror.argtypes = [ctypes.c_int]
    return libc.gai_strerror(code).decode()


def eai_table() -> dict[str, Any]:
    names = sorted((n for n in dir(socket) if n.startswith("EAI_")),
                   key=lambda n: (-getattr(socket, n), n))
    entries = [{"name": n, "number": getattr(socket, n), "text": gai_strerror(getattr(socket, n)),
                "category": categorise(n, EAI_RULES)} for n in names]
    return table("eai", "glibc", f"{python_version()} socket module EAI_* names; the C "
                 "library's gai_strerror texts (ctypes)", f"{libc_version()}; {python_version()}",
                 EAI_RULE, entries)
