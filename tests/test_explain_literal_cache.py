"""The catalogue's prefilter literals cached on disk (literal_cache.py): a cached table is the
derivation's own answer for every pattern of the catalogue, and a cache that is off, corrupt,
stale or unwritable only costs time."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ncclcheck.catalogue import load
from ncclcheck.explain import literal_cache
from ncclcheck.explain.hscache import CACHE_VARIABLE, KEPT_FILES
from ncclcheck.explain.literals import NoLiteral, required_literals

PATTERNS = [r"Invalid rank requested : (?P<rank>\d+)/(?P<nranks>\d+)",
            r"(?i)address already in use", r"[Ee]rrno: 98"]


def _files(folder):
    return sorted(folder.glob(literal_cache.PREFIX + "*.json"))


def test_the_cached_table_is_the_derivation_for_every_catalogue_pattern(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path))
    patterns = [p for sig in load().signatures for p in sig.patterns]
    cold = literal_cache.literal_table(patterns)
    assert len(_files(tmp_path)) == 1
    monkeypatch.setattr(literal_cache, "required_literals", None)  # a warm read derives nothing
    warm = literal_cache.literal_table(patterns)
    assert warm == cold == {p: required_literals(p) for p in patterns}


def test_another_catalogue_gets_its_own_table(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path))
    literal_cache.literal_table(PATTERNS)
    table = literal_cache.literal_table(PATTERNS + [r"Duplicate GPU detected"])
    assert len(_files(tmp_path)) == 2
    assert table[r"Duplicate GPU detected"].strings == frozenset({"Duplicate GPU detected"})


@pytest.mark.parametrize("content", ["", "{not json", "[1, 2]", '{"x": 5}',
                                     '{"[Ee]rrno: 98": [["wrong"], false]}'])
def test_a_corrupt_or_partial_file_is_derived_over(tmp_path, monkeypatch, content):
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path))
    literal_cache.literal_table(PATTERNS)
    (path,) = _files(tmp_path)
    path.write_text(content)
    assert literal_cache.literal_table(PATTERNS) == {p: required_literals(p) for p in PATTERNS}
    assert len(json.loads(path.read_text())) == len(PATTERNS)  # and written again whole


@pytest.mark.parametrize("setting", ["off", ""])
def test_the_cache_can_be_turned_off(tmp_path, monkeypatch, setting):
    monkeypatch.setenv(CACHE_VARIABLE, setting)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert literal_cache.literal_table(PATTERNS)
    assert not list(tmp_path.rglob("*.json"))


def test_an_unwritable_cache_folder_costs_only_time(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv(CACHE_VARIABLE, str(blocked / "cache"))
    assert literal_cache.literal_table(PATTERNS) == {p: required_literals(p) for p in PATTERNS}


def test_a_pattern_without_literal_is_still_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path))
    with pytest.raises(NoLiteral):
        literal_cache.literal_table(PATTERNS + [r"\d+"])
    assert not _files(tmp_path)


def test_only_the_newest_tables_are_kept(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path))
    for n in range(KEPT_FILES + 3):
        literal_cache.literal_table(PATTERNS + [f"pattern number {n:03d}"])
    assert len(_files(tmp_path)) == KEPT_FILES


def test_explain_answers_the_same_with_a_cold_and_a_warm_cache(tmp_path):
    """Two fresh processes, the first deriving and storing, the second reading."""
    log = tmp_path / "job.log"
    log.write_text("node1:1:1 [0] init.cc:1 NCCL WARN Invalid rank requested : 6/4\n")
    env = {"PATH": "/usr/bin:/bin", CACHE_VARIABLE: str(tmp_path / "cache")}
    runs = [subprocess.run([sys.executable, "-m", "ncclcheck", "explain", "--format", "json",
                            str(log)], capture_output=True, text=True, timeout=60, env=env)
            for _ in range(2)]
    assert runs[0].stdout == runs[1].stdout and '"nccl.invalid_rank"' in runs[0].stdout
    assert _files(tmp_path / "cache")
