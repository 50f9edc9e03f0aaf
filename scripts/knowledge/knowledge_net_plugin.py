"""The AWS OFI net plugin's log format strings (aws-ofi-nccl, which carries NCCL's traffic over
libfabric on EFA): every NCCL_OFI_WARN / NCCL_OFI_INFO format of several releases, the file
that prints it and the releases it appears in.

The plugin logs through NCCL's logger with its own macros, which put "NET/OFI " before the
format and the function's name (not the file) where NCCL prints a source file
(``nccl_net_ofi_rdma_init:7978 NCCL WARN NET/OFI OFI fi_getinfo() call failed: ...``). Whatever
a message says, the plugin printed it: NCCL's network goes through the plugin, so every entry
is filed under net_plugin (what failed inside it is read from the error it quotes: an errno
text, a CUDA error).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from knowledge_common import table
from knowledge_nccl_formats import COLUMNS, literal_chars, release_of
from nccl_source import calls, git

# the plugin's logging macros (include/nccl_ofi_log.h): name -> format argument, level
MACROS: dict[str, tuple[int, str]] = {"NCCL_OFI_WARN": (0, "WARN"), "NCCL_OFI_INFO": (1, "INFO")}
PREFIX = "NET/OFI "  # what the macros put before every format
SOURCE = re.compile(r"^(?:src|include)/.+\.(?:c|cc|cpp|h|hpp)$")
RULE = ("every message the plugin prints is the net plugin's (NCCL's network goes through it): "
        "net_plugin; what failed inside it is read from the error it quotes")


def net_plugin_table(git_dir: Path, tags: list[str]) -> dict[str, Any]:
    found: dict[tuple[str, str, str], dict[str, Any]] = {}
    for tag in tags:
        release = release_of(tag)
        names = git(git_dir, "ls-tree", "-r", "--name-only", tag).splitlines()
        for name in (n for n in names if SOURCE.match(n)):
            text = git(git_dir, "show", f"{tag}:{name}")
            for call in calls(text, MACROS):
                if literal_chars(call.format) == 0:
                    continue
                key = (call.level, call.format, name)
                entry = found.setdefault(key, {
                    "format": PREFIX + call.format, "level": call.level, "file": name,
                    "releases": [], "category": "net_plugin", "subsys": call.flags,
                    "macro": 0})
                if release not in entry["releases"]:
                    entry["releases"].append(release)
    entries = sorted(found.values(), key=lambda e: (e["file"], e["level"], e["format"]))
    releases = [release_of(t) for t in tags]
    return table("net_plugin_formats", "aws-ofi-nccl",
                 "aws/aws-ofi-nccl repository: every src/ and include/ file's NCCL_OFI_WARN and "
                 "NCCL_OFI_INFO calls", ", ".join(releases), RULE,
                 [[e[c] for c in COLUMNS] for e in entries], columns=COLUMNS,
                 levels=["WARN", "INFO"],
                 line_shape="host:pid:tid [cudaDev] function:line NCCL WARN NET/OFI message; "
                 "host:pid:tid [cudaDev] NCCL INFO NET/OFI message")
