"""The world corpus: real logs copied verbatim from public threads, split by thread.

Each log under tests/data/logs/world/ comes from a public issue thread or Q&A page (its
``source``), labelled with the category the thread established. The split into dev (signatures
are written against it) and test (only measured, by benchmarks/explain_accuracy.py) is a hash
of the thread's address, so no log can be moved to the split that flatters a signature.
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

import pytest

from ncclcheck.model import CATEGORIES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

WORLD = Path(__file__).resolve().parent / "data" / "logs" / "world"
INDEX = tomllib.loads((WORLD / "index.toml").read_text("utf-8"))["log"]
LAUNCHERS = {"torchrun", "torch.distributed.launch", "mp.spawn", "lightning", "accelerate",
             "deepspeed", "mpirun", "srun", "kubernetes", "horovod", "ray", "other", "unknown"}


def thread(url: str) -> str:
    """A thread's address without anchor, query, scheme or trailing slash."""
    url = url.split("#")[0].split("?")[0].rstrip("/")
    return re.sub(r"^https?://(www\.)?", "", url).lower()


def split_of(url: str) -> str:
    digest = int(hashlib.sha256(thread(url).encode()).hexdigest(), 16)
    return "test" if digest % 3 == 0 else "dev"


def test_every_log_is_indexed_once():
    on_disk = {p.relative_to(WORLD).as_posix() for p in WORLD.glob("*/*.log")}
    indexed = [e["path"] for e in INDEX]
    assert len(indexed) == len(set(indexed))
    assert on_disk == set(indexed)


def test_size_and_breadth():
    failing = [e for e in INDEX if e["category"]]
    clean = [e for e in INDEX if not e["category"]]
    assert len(failing) >= 150 and len(clean) >= 15  # the minimum
    assert len({e["repo"] for e in INDEX}) >= 40
    assert len({e["category"] for e in failing}) >= 15
    assert len({e["launcher"] for e in INDEX} - {"unknown", "other"}) >= 10


@pytest.mark.parametrize("entry", INDEX, ids=lambda e: e["path"])
def test_entry_is_sourced_labelled_and_split_by_thread(entry):
    assert entry["source"].startswith("https://"), entry["source"]
    assert entry["category"] in CATEGORIES or entry["category"] == ""
    assert entry["launcher"] in LAUNCHERS
    assert entry["split"] == split_of(entry["source"])
    assert entry["path"].startswith(entry["split"] + "/")
    text = (WORLD / entry["path"]).read_text("utf-8")
    assert text.strip(), "an empty log"
    if entry["deciding_line"]:
        assert entry["deciding_line"].strip() in text, "the deciding line is not in the log"
    if entry["category"]:
        assert entry["cause"] and entry["fix"], "a failing log says what the thread established"


def test_no_thread_is_in_both_splits():
    splits: dict[str, set[str]] = {}
    for e in INDEX:
        splits.setdefault(thread(e["source"]), set()).add(e["split"])
    assert all(len(s) == 1 for s in splits.values())


def test_the_blind_reading_names_indexed_logs_and_known_categories():
    """The blind reading (the category a reader gave each log from the log alone) that the
    accuracy benchmark prints beside explain's: one reading per log, taxonomy words only."""
    readings = tomllib.loads((WORLD / "blind_reading.toml").read_text("utf-8"))["reading"]
    paths = [r["path"] for r in readings]
    assert len(paths) == len(set(paths))
    assert set(paths) <= {e["path"] for e in INDEX}
    for reading in readings:
        assert reading["category"] in set(CATEGORIES) | {"", "unknown"}, reading
        assert reading["confidence"] in {"high", "medium", "low"}, reading
