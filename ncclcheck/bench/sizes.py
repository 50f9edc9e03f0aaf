"""Sweep sizes as nccl-tests takes them: byte counts with K/M/G suffixes, a geometric step."""

from __future__ import annotations

import re

# Element size and the name nccl-tests prints in its `type` column, per supported dtype.
DTYPES: dict[str, tuple[int, str]] = {
    "float32": (4, "float"),
    "bfloat16": (2, "bfloat16"),
    "float16": (2, "half"),
}

_UNITS = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}
_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'64K' -> 65536. Suffixes are powers of 1024, as in nccl-tests' -b/-e; 'B'/'iB' optional."""
    match = _SIZE.match(str(text))
    if not match:
        raise ValueError(f"{text!r} is not a size (examples: 1024, 64K, 16M, 1G)")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def format_size(nbytes: int) -> str:
    """65536 -> '64 KB' (binary multiples, the way the sizes were given)."""
    for unit, scale in (("GB", 1024 ** 3), ("MB", 1024 ** 2), ("KB", 1024)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def sweep_sizes(min_bytes: int, max_bytes: int, factor: float, dtype: str) -> list[int]:
    """Byte sizes from min to max (inclusive), each ``factor`` times the previous one.

    Every size is rounded down to whole elements (at least one), duplicates dropped, exactly as
    nccl-tests steps with -f and rounds each size to its element count.
    """
    if factor <= 1:
        raise ValueError(f"the step factor must be above 1, not {factor:g}")
    if min_bytes > max_bytes:
        raise ValueError(f"--min-bytes {min_bytes} is above --max-bytes {max_bytes}")
    itemsize = DTYPES[dtype][0]
    sizes: list[int] = []
    size = float(max(min_bytes, 1))
    while size <= max_bytes:
        rounded = max(itemsize, int(size) // itemsize * itemsize)
        if not sizes or rounded != sizes[-1]:
            sizes.append(rounded)
        size *= factor
    return sizes
