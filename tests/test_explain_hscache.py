"""Hyperscan databases cached on disk between runs (hscache.py): the same answers from a cached
database as from a fresh one, and a cache that is off, corrupt or unwritable only costs time."""

from __future__ import annotations

import pytest

hyperscan = pytest.importorskip("hyperscan")

from ncclcheck.catalogue import load, shipped_folder  # noqa: E402
from ncclcheck.explain import hscache  # noqa: E402
from ncclcheck.explain.engine import explain  # noqa: E402
from ncclcheck.explain.prefilter import ENGINE_VARIABLE  # noqa: E402

EXPRESSIONS = [b"NCCL WARN", b"Invalid rank requested", b"errno: 98"]
FLAGS = [0, 0, hyperscan.HS_FLAG_CASELESS]
TEXT = b"x NCCL WARN Invalid rank requested : 6/4\nERRNO: 98\n"


def _hits(database) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    database.scan(TEXT, match_event_handler=lambda i, _s, end, _f, _c: found.append((i, end)))
    return found


def _compiles(monkeypatch) -> list[int]:
    """Record the compiles block_database makes from here on (a cache miss is a compile)."""
    calls: list[int] = []
    real = hscache._load

    def counted(module, path):
        found = real(module, path)
        if found is None:
            calls.append(1)
        return found

    monkeypatch.setattr(hscache, "_load", counted)
    return calls


def test_a_database_is_compiled_once_then_read_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(hscache.CACHE_VARIABLE, str(tmp_path))
    calls = _compiles(monkeypatch)
    fresh = hscache.block_database(EXPRESSIONS, FLAGS, literal=True)
    cached = hscache.block_database(EXPRESSIONS, FLAGS, literal=True)
    assert len(calls) == 1 and len(list(tmp_path.glob("hyperscan-*.db"))) == 1
    assert _hits(cached) == _hits(fresh) == [(0, 11), (1, 34), (2, 50)]
    # other input, other file
    hscache.block_database(EXPRESSIONS[:2], FLAGS[:2], literal=True)
    assert len(calls) == 2 and len(list(tmp_path.glob("hyperscan-*.db"))) == 2


def test_a_corrupt_cache_file_is_compiled_over(tmp_path, monkeypatch):
    monkeypatch.setenv(hscache.CACHE_VARIABLE, str(tmp_path))
    hscache.block_database(EXPRESSIONS, FLAGS, literal=True)
    (stored,) = tmp_path.glob("hyperscan-*.db")
    stored.write_bytes(stored.read_bytes()[:100])
    calls = _compiles(monkeypatch)
    assert _hits(hscache.block_database(EXPRESSIONS, FLAGS, literal=True))[0] == (0, 11)
    assert len(calls) == 1


@pytest.mark.parametrize("setting", ["off", ""])
def test_the_cache_can_be_turned_off(tmp_path, monkeypatch, setting):
    monkeypatch.setenv(hscache.CACHE_VARIABLE, setting)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert hscache.cache_dir() is None
    assert _hits(hscache.block_database(EXPRESSIONS, FLAGS, literal=True))
    assert list(tmp_path.rglob("*.db")) == []


def test_an_unwritable_cache_folder_costs_only_time(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv(hscache.CACHE_VARIABLE, str(blocked / "cache"))
    assert _hits(hscache.block_database(EXPRESSIONS, FLAGS, literal=True))


def test_only_the_newest_databases_are_kept(tmp_path, monkeypatch):
    monkeypatch.setenv(hscache.CACHE_VARIABLE, str(tmp_path))
    monkeypatch.setattr(hscache, "KEPT_FILES", 2)
    for n in range(4):
        hscache.block_database([b"word%d" % n], [0], literal=True)
    assert len(list(tmp_path.glob("hyperscan-*.db"))) == 2


def test_explain_finds_the_same_with_a_cold_and_a_warm_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(hscache.CACHE_VARIABLE, str(tmp_path / "cache"))
    monkeypatch.setenv(ENGINE_VARIABLE, "hyperscan")
    log = tmp_path / "job.log"
    log.write_text("node1:1:1 [0] init.cc:1 NCCL WARN Invalid rank requested : 6/4\n")
    # Each catalogue read afresh is a new object, prepared anew: the first compiles and
    # stores the databases, the second finds them on disk.
    cold = explain([str(log)], catalogue=load(shipped_folder())).to_dict()
    stored = sorted((tmp_path / "cache").glob("hyperscan-*.db"))
    compiles = _compiles(monkeypatch)
    warm = explain([str(log)], catalogue=load(shipped_folder())).to_dict()
    assert cold == warm and cold["findings"][0]["id"] == "nccl.invalid_rank"
    assert stored and compiles == []
    assert sorted((tmp_path / "cache").glob("hyperscan-*.db")) == stored
