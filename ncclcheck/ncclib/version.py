"""NCCL and CUDA version numbers: the integers the libraries return, the labels people write,
and NCCL's own version line in a log.

NCCL packs x.y.z into one integer, with two encodings: x*1000 + y*100 + z up to 2.8, and
x*10000 + y*100 + z from 2.9 on (nccl.h's NCCL_VERSION macro). Codes below 2900 are the old
form, as torch's own decoder assumes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OLD_ENCODING_LIMIT = 2900
# NCCL's version line ("NCCL version 2.18.5+cuda12.2"): the version, then the build it names.
LOG_LINE = re.compile(r"NCCL version (?P<version>\d+\.\d+\.\d+)(?P<build>\S*)")
_BUILD_CUDA = re.compile(r"\+cuda(?P<cuda>\d+\.\d+)")
_LABEL = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+._]([0-9A-Za-z.+_-]*))?\s*$")


@dataclass(frozen=True, order=True)
class NcclVersion:
    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @property
    def code(self) -> int:
        return encode(self.major, self.minor, self.patch)


def decode(code: int) -> NcclVersion:
    """The integer from ncclGetVersion as x.y.z (both encodings)."""
    if code < 100:
        raise ValueError(f"{code} is not an NCCL version code")
    if code < OLD_ENCODING_LIMIT:
        return NcclVersion(code // 1000, (code % 1000) // 100, code % 100)
    return NcclVersion(code // 10000, (code % 10000) // 100, code % 100)


def encode(major: int, minor: int, patch: int) -> int:
    """nccl.h's NCCL_VERSION(X, Y, Z)."""
    if major <= 2 and minor <= 8:
        return major * 1000 + minor * 100 + patch
    return major * 10000 + minor * 100 + patch


@dataclass(frozen=True)
class VersionLabel:
    """A version as written in NCCL_VERSION or a package name: "2.11.4-1" (-1 is the package
    revision), "2.7.8", "2.16.2"."""

    text: str
    version: NcclVersion
    revision: str | None


def parse_label(text: str) -> VersionLabel | None:
    """``2.11.4-1`` -> 2.11.4 (revision "1"); None when the text is not a version."""
    match = _LABEL.match(text)
    if not match:
        return None
    major, minor, patch, rest = match.groups()
    return VersionLabel(text, NcclVersion(int(major), int(minor), int(patch or 0)), rest or None)


def from_torch_tuple(value: object) -> NcclVersion | None:
    """torch.cuda.nccl.version(): (major, minor, patch[, suffix]) or, in old torch, an int."""
    if isinstance(value, int):
        return decode(value) if value >= 100 else None
    if isinstance(value, (tuple, list)) and len(value) >= 3:
        try:
            return NcclVersion(int(value[0]), int(value[1]), int(value[2]))
        except (TypeError, ValueError):
            return None
    return None


def from_any(value: object) -> NcclVersion | None:
    """Any way a version reaches ncclcheck, decoded by the one set of rules above: an
    ncclGetVersion code (``22707``), a label (``"2.27.7-1"``, ``"v2.27"``), a tuple from
    torch.cuda.nccl.version(), or an NcclVersion. None when it is none of these."""
    if isinstance(value, NcclVersion):
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        try:
            return decode(value)
        except ValueError:
            return None
    if isinstance(value, str):
        label = parse_label(value)
        return label.version if label else None
    if isinstance(value, (tuple, list)) and len(value) == 2:  # (2, 28): a release line
        value = (*value, 0)
    return from_torch_tuple(value)


def rules_version(value: object, latest: tuple[int, int, int]) -> tuple[int, int, int]:
    """(major, minor, patch) of ``value`` for version-dependent rules; ``latest`` when the
    value is None or unreadable (the newest rules apply)."""
    version = from_any(value) if value is not None else None
    if version is None:
        return latest
    return (version.major, version.minor, version.patch)


def version_text(value: object) -> str | None:
    """"2.21.5" for any form ``from_any`` reads (what reports show); None when unreadable."""
    version = from_any(value)
    return str(version) if version else None


def build_cuda(build: str) -> str | None:
    """The CUDA version a version line's build names ("+cuda12.2" -> "12.2"), else None."""
    found = _BUILD_CUDA.search(build)
    return found.group("cuda") if found else None


def cuda_version_tuple(code: int) -> tuple[int, int]:
    """A CUDA version code as cuDriverGetVersion (and NCCL's ``cudaDriverVersion``) gives it:
    12040 -> (12, 4)."""
    return code // 1000, (code % 1000) // 10
