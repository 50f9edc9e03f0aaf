"""The failure catalogue as a package of its own: an immutable Catalogue read from a folder of
TOML files, the shipped one read once per process (from the compiled file made from its TOML),
and probes that take fix texts from it without loading explain or writing anything to the
user's cache folder."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ncclcheck.catalogue import (Catalogue, Signature, UnknownSignature, catalogue_fix, load,
                                 shipped_folder)
from ncclcheck.catalogue.compiled import digest
from ncclcheck.catalogue.known_issues import load as load_known_issues
from ncclcheck.catalogue.known_issues import parse as parse_known_issues
from ncclcheck.catalogue.sources import (REGENERATE, compile_shipped, compiled_text,
                                         shipped_compiled_text)
from ncclcheck.explain.hscache import CACHE_VARIABLE

REPO = Path(__file__).resolve().parents[1]
ENTRY = ('[[signature]]\nid = "test.{id}"\ncategory = "other"\ntitle = "t"\n{extra}\n'
         'patterns = ["some literal text {id}"]\nmeaning = "m {id}"\nfix = "f {{x}}"\n'
         'example = "some literal text {id}"\n')


def _folder(path: Path, **files: str) -> Path:
    path.mkdir(exist_ok=True)
    for name, text in files.items():
        (path / f"{name}.toml").write_text(text, "utf-8")
    return path


def test_the_shipped_catalogue_is_read_once_and_a_folder_at_every_call(tmp_path):
    assert load() is load()
    folder = _folder(tmp_path / "cat", b=ENTRY.format(id="b", extra=""),
                     a=ENTRY.format(id="a", extra="inferred = true"))
    first, second = load(folder), load(str(folder))
    assert first is not second and first is not load()
    assert [s.id for s in first.signatures] == [s.id for s in second.signatures] == \
        ["test.a", "test.b"]  # file by file, in name order
    (folder / "c.toml").write_text(ENTRY.format(id="c", extra=""), "utf-8")
    assert len(load(folder).signatures) == 3 and len(first.signatures) == 2


def test_a_catalogue_is_immutable(tmp_path):
    catalogue = load(_folder(tmp_path / "cat", a=ENTRY.format(id="a", extra="")))
    with pytest.raises(dataclasses.FrozenInstanceError):
        catalogue.signatures = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        catalogue.files["b"] = ("test.b",)  # type: ignore[index]
    with pytest.raises(TypeError):
        catalogue.by_id["test.b"] = catalogue.signature("test.a")  # type: ignore[index]


def test_what_callers_ask_of_a_catalogue(tmp_path):
    catalogue = load(_folder(
        tmp_path / "cat",
        one=ENTRY.format(id="a", extra="") + ENTRY.format(id="b", extra='refines = ["test.a"]'),
        two=ENTRY.format(id="c", extra='refines = ["test.b"]')
        + ENTRY.format(id="d", extra='inferred = true\nrule = "some_rule"')))
    assert isinstance(catalogue, Catalogue)
    assert dict(catalogue.files) == {"one": ("test.a", "test.b"), "two": ("test.c", "test.d")}
    assert [s.id for s in catalogue.line_signatures] == ["test.a", "test.b", "test.c"]
    assert [s.id for s in catalogue.inferred_signatures] == ["test.d"]
    assert catalogue.by_rule("some_rule").id == "test.d"
    assert isinstance(catalogue.signature("test.a"), Signature)
    assert catalogue.refined_by_closure("test.c") == {"test.a", "test.b"}
    assert catalogue.fix("test.a") == "f <x>"
    assert catalogue.fix("test.a", "Here: eth9.", {"x": 1}) == "f 1 Here: eth9."
    with pytest.raises(UnknownSignature):
        catalogue.signature("test.z")
    with pytest.raises(UnknownSignature):
        catalogue.by_rule("no_rule")


def test_the_shipped_catalogue_is_the_package_s_signature_files():
    names = sorted(item.name[:-5] for item in shipped_folder().iterdir()
                   if item.name.endswith(".toml"))
    assert list(load().files) == names and len(load().signatures) > 300
    assert catalogue_fix("nccl.net_not_found") == load().fix("nccl.net_not_found")


def test_probes_take_fix_texts_without_loading_explain():
    code = textwrap.dedent("""
        import json, sys
        from ncclcheck.probes.registry import load_registry
        load_registry()  # every check module of every family
        from ncclcheck.catalogue import catalogue_fix
        from ncclcheck.probes.ranks.facts import Expected, fix_world
        texts = [catalogue_fix("nccl.no_socket_interface", "Here: eth9.", {"ifname": "eth9"}),
                 fix_world(Expected(2, 4, "--nodes", "--gpus-per-node"))]
        print(json.dumps([texts, sorted(m for m in sys.modules
                                        if m.startswith("ncclcheck.explain"))]))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True, cwd=REPO)
    texts, loaded = json.loads(done.stdout)
    assert "(now eth9)" in texts[0] and texts[0].endswith("Here: eth9.") and "8" in texts[1]
    assert loaded == []


def test_a_preflight_leaves_the_cache_folder_empty(tmp_path):
    """A run whose checks fail with the catalogue's fix texts (an interface that does not
    exist) reads the catalogue, and still writes nothing to the cache folder."""
    cache = tmp_path / "cache"
    cache.mkdir()
    env = {**os.environ, CACHE_VARIABLE: str(cache), "NCCL_SOCKET_IFNAME": "nosuchif0",
           "GLOO_SOCKET_IFNAME": "nosuchif0"}
    done = subprocess.run([sys.executable, "-m", "ncclcheck", "run", "--no-bench", "--local",
                           "--format", "json"], capture_output=True, text=True, timeout=300,
                          env=env, cwd=REPO)
    report = json.loads(done.stdout)
    fixes = [c.get("fix") or "" for c in report["checks"]]
    assert any("NCCL_SOCKET_IFNAME" in fix and "nosuchif0" in fix for fix in fixes), fixes
    assert list(cache.iterdir()) == []


# -- the compiled file: the TOML sources as one JSON document, read at start-up ----------------
def test_the_compiled_file_is_current():
    """compiled.json is what the TOML sources give now; regenerate it with the command named."""
    assert shipped_compiled_text() == compiled_text(compile_shipped()), \
        f"ncclcheck/catalogue/compiled.json is stale: run `{REGENERATE}` and commit it"


def test_the_compiled_catalogue_is_the_toml_catalogue():
    compiled, read = load(), load(shipped_folder())
    assert compiled.signatures == read.signatures and dict(compiled.files) == dict(read.files)
    table = (REPO / "ncclcheck" / "catalogue" / "known_issues.toml").read_text("utf-8")
    assert load_known_issues() == parse_known_issues(table)


def test_the_digest_follows_every_byte_and_name_of_the_sources():
    base = digest([("a.toml", b"x = 1\n"), ("b.toml", b"")])
    assert base == digest([("a.toml", b"x = 1\n"), ("b.toml", b"")])
    assert base != digest([("a.toml", b"x = 2\n"), ("b.toml", b"")])
    assert base != digest([("a.toml", b"x = 1\n"), ("c.toml", b"")])
    assert base != digest([("a.toml", b"x = 1"), ("\nb.toml", b"")])


def _loads_toml(stale: bool) -> tuple[bool, int, int]:
    """In a fresh interpreter: whether reading the shipped catalogue and known-issues table
    imported a TOML parser, and how many entries each holds; ``stale`` makes the compiled
    file's digest disagree with the sources, as after an edit not compiled."""
    code = textwrap.dedent(f"""
        import json, sys
        import ncclcheck.catalogue.compiled as compiled
        if {stale!r}:
            compiled.shipped_digest = lambda: "an edited source"
        from ncclcheck.catalogue import load
        from ncclcheck.catalogue.known_issues import load as known_issues
        n, k = len(load().signatures), len(known_issues().issues)
        print(json.dumps([any(m in sys.modules for m in ("tomllib", "tomli")), n, k]))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True, cwd=REPO)
    toml, signatures, issues = json.loads(done.stdout)
    return toml, signatures, issues


def test_a_start_parses_no_toml_and_a_stale_file_falls_back_to_the_sources():
    toml, signatures, issues = _loads_toml(stale=False)
    assert not toml
    assert (signatures, issues) == (len(load().signatures), len(load_known_issues().issues))
    toml, signatures_stale, issues_stale = _loads_toml(stale=True)
    assert toml and (signatures_stale, issues_stale) == (signatures, issues)
