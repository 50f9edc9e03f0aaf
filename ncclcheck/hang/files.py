"""A snapshot on disk: one file per process, named by host and pid, for a folder every node
writes into (``ncclcheck hang --out DIR`` on each node, then ``ncclcheck explain DIR``).

Each file is JSON whose first key is ``ncclcheck_hang_snapshot``, so explain recognises it by
its content, as it does flight-recorder dumps; each carries its node's record (the ranks gone
from the node, RAS's report, notes), and a node without any training process writes one file
that says so. Every value goes through the redaction every output goes through: a snapshot
travels (tickets, shared folders) and environment values whose names look secret never appear
in it. Reading one runs nothing: it is JSON, checked field by field.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import IO, Any

from ncclcheck.hang.model import (FORMAT_KEY, FORMAT_VERSION, NodeSnapshot, ProcessSnapshot)
from ncclcheck.redact import redact_value_tree
from ncclcheck.version import __version__

SNIFF = b'"' + FORMAT_KEY.encode() + b'"'
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class SnapshotError(Exception):
    """A file that claims to be a snapshot and cannot be read as one."""


def sniff_snapshot(head: bytes) -> bool:
    """Whether the first bytes of a file are a snapshot's."""
    text = head.lstrip()
    return text[:1] == b"{" and SNIFF in text[:200]


def file_name(host: str, pid: int | None) -> str:
    """``hang-node3-4121.json``; ``hang-node3-none.json`` for a node with no process."""
    return f"hang-{_UNSAFE.sub('_', host) or 'host'}-{pid if pid is not None else 'none'}.json"


def documents(node: NodeSnapshot) -> list[tuple[str, dict[str, Any]]]:
    """(file name, content) of every file of a node's snapshot, secrets masked."""
    head = {FORMAT_KEY: FORMAT_VERSION, "tool_version": __version__, "node": node.node_dict()}
    if not node.processes:
        return [(file_name(node.host, None), redact_value_tree({**head, "process": None}))]
    return [(file_name(node.host, p.pid), redact_value_tree({**head, "process": p.to_dict()}))
            for p in node.processes]


def write(node: NodeSnapshot, folder: str, dumps: list[tuple[str, bytes]] = ()) -> list[str]:
    """Write the node's files (and the flight-recorder dumps taken with it) into ``folder``,
    each atomically; returns the paths written."""
    written = []
    for name, content in documents(node):
        written.append(_atomic(os.path.join(folder, name),
                               json.dumps(content, separators=(",", ":")).encode()))
    for name, data in dumps:
        written.append(_atomic(os.path.join(folder, _UNSAFE.sub("_", name)), data))
    return written


def _atomic(path: str, data: bytes) -> str:
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "wb") as handle:
        handle.write(data)
    os.replace(temporary, path)
    return path


@dataclass
class Loaded:
    """One snapshot file read back: its node's record and its process (None: a node without)."""

    node: NodeSnapshot
    process: ProcessSnapshot | None


def load(stream: IO[bytes], name: str) -> Loaded:
    """A snapshot file's content; SnapshotError with the reason when it is not one."""
    try:
        data = json.loads(stream.read(256 << 20))
    except (ValueError, UnicodeDecodeError) as exc:
        raise SnapshotError(f"{name}: not a readable snapshot ({exc})") from None
    if not isinstance(data, dict) or data.get(FORMAT_KEY) != FORMAT_VERSION:
        raise SnapshotError(f"{name}: not a snapshot of format {FORMAT_VERSION}")
    try:
        node = NodeSnapshot.from_node_dict(data.get("node") or {})
        process = data.get("process")
        return Loaded(node, ProcessSnapshot.from_dict(process) if process else None)
    except (KeyError, TypeError, ValueError) as exc:
        raise SnapshotError(f"{name}: malformed snapshot ({type(exc).__name__}: {exc})") from None


def join(loaded: list[Loaded]) -> tuple[list[ProcessSnapshot], list[NodeSnapshot]]:
    """Every process of every file, newest snapshot per (host, pid), and one record per node
    (its newest)."""
    processes: dict[tuple[str, int], tuple[str, ProcessSnapshot]] = {}
    nodes: dict[str, NodeSnapshot] = {}
    for item in loaded:
        host = item.node.host
        if host not in nodes or item.node.taken_at > nodes[host].taken_at:
            nodes[host] = item.node
        if item.process is not None:
            key = (item.process.host, item.process.pid)
            if key not in processes or item.node.taken_at >= processes[key][0]:
                processes[key] = (item.node.taken_at, item.process)
    newest = {h: n.taken_at for h, n in nodes.items()}
    kept = [p for taken, p in processes.values() if taken == newest.get(p.host, taken)]
    return sorted(kept, key=lambda p: (p.rank is None, p.rank, p.host, p.pid)), list(
        nodes.values())
