"""The world corpus as the accuracy benchmarks read it: its index, the fixed smoke subset, and
the thread-level halves of dev that a mechanism is designed on and measured against.

    tests/data/logs/world/index.toml: logs copied verbatim from public threads, split by thread
    into dev (read while writing signatures) and test (only measured).

Shared by explain_accuracy.py and explain_crossval.py, so neither imports the other's internals.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

LOGS = Path(__file__).resolve().parents[1] / "tests" / "data" / "logs"
WORLD = LOGS / "world"
SMOKE_STRIDE = 10  # --smoke keeps every 10th log of an index: a fixed subset of each split


def smoke_subset(entries: list[dict]) -> list[dict]:
    """The logs ``--smoke`` scores: a deterministic tenth, in the index's order."""
    return entries[::SMOKE_STRIDE]


def load(index: Path) -> list[dict]:
    return tomllib.loads(index.read_text("utf-8"))["log"]


def half_of(source: str) -> str:
    """'A' or 'B': a stable, thread-level split of dev (sha256 of the thread's address)."""
    return "AB"[int(hashlib.sha256(source.encode("utf-8")).hexdigest(), 16) % 2]


def dev_halves() -> dict[str, list[dict]]:
    dev = [e for e in load(WORLD / "index.toml") if e["split"] == "dev"]
    halves: dict[str, list[dict]] = {"A": [], "B": []}
    for entry in dev:
        halves[half_of(entry["source"])].append(entry)
    return halves
