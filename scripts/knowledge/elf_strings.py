"""The NUL-terminated strings of an ELF shared library's read-only data (``.rodata``), read
with the standard library alone (no binutils), from a file or from bytes taken out of a wheel.

torch's C++ messages (c10d, Gloo, TCPStore) exist in a wheel only as such strings.
"""

from __future__ import annotations

import re
import struct

PRINTABLE = re.compile(rb"[\x20-\x7e\t]{8,}(?=\x00)")


def section(data: bytes, wanted: str) -> bytes:
    """One section's bytes of a 64-bit little-endian ELF image."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    for name, _type, _flags, _addr, offset, size, *_ in headers:
        end = data.index(b"\0", names_at + name)
        if data[names_at + name:end].decode() == wanted:
            return data[offset:offset + size]
    raise ValueError(f"no {wanted} section")


def rodata_strings(data: bytes) -> list[str]:
    """Every printable string of at least 8 characters in ``.rodata``, in file order."""
    return [m.group().decode("ascii") for m in PRINTABLE.finditer(section(data, ".rodata"))]
