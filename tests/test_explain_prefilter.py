"""The prefilter's literals come from the patterns, and every engine finds the same lines."""

from __future__ import annotations

import re
import sys

import pytest

from ncclcheck.catalogue import load
from ncclcheck.explain import prefilter
from ncclcheck.explain.engine import explain, literal_index
from ncclcheck.explain.literals import MIN_LENGTH, NoLiteral, required_literals
from ncclcheck.explain.prefilter import ENGINES, Literal, build_index
from ncclcheck.explain.prepared import prepared

SIGNATURES = load().line_signatures  # inferred ones: tests/test_explain_inference.py


def test_literals_follow_the_pattern_structure():
    assert required_literals(r"Invalid rank requested : (?P<rank>\d+)/(?P<n>\d+)").strings == \
        {"Invalid rank requested : "}
    assert required_literals(r"(?:JOB|STEP) (?P<job>\S+) ON").strings == {"JOB ", "STEP "}
    assert required_literals(r"[Ee]rror while creating").strings == \
        {"Error while creating", "error while creating"}
    # The text a group ends with joins the text after it ("Error: ", not just "Error").
    assert required_literals(r"^(?P<e>\w+(?:Error|Exception)): (?P<m>.+)").strings == \
        {"Error: ", "Exception: "}
    found = required_literals(r"(?i)unhandled SYSTEM error")
    assert found.caseless and found.strings == {"unhandled system error"}
    assert required_literals(r"colou?r of things").strings == {"r of things"}


@pytest.mark.parametrize("pattern", [r"\d+/\d+", r"(?:ab|\d+)x", r"ab?c?", r".*"])
def test_a_pattern_without_a_literal_is_refused(pattern):
    with pytest.raises(NoLiteral):
        required_literals(pattern)


def test_a_catalogue_with_a_pattern_without_a_literal_is_refused_by_explain(tmp_path):
    """The catalogue itself reads such a pattern (a probe only wants its texts); explain, which
    would never let a line reach it, refuses it and names the signature."""
    (tmp_path / "a.toml").write_text(
        '[[signature]]\nid = "test.starved"\ncategory = "other"\ntitle = "t"\n'
        'patterns = ["\\\\d+/\\\\d+"]\nmeaning = "m"\nfix = "f"\nexample = "6/4"\n')
    catalogue = load(tmp_path)
    assert catalogue.signature("test.starved").patterns == (r"\d+/\d+",)
    with pytest.raises(ValueError, match="test.starved"):
        prepared(catalogue).literals
    log = tmp_path / "job.log"
    log.write_text("6/4\n")
    with pytest.raises(ValueError, match="test.starved"):
        explain([str(log)], catalogue=catalogue)


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: s.id)
def test_every_signature_has_literals_its_example_holds(sig):
    """No signature can be starved: each has literals, and the example of the pattern that
    matches it holds one of that pattern's literals."""
    literals = prepared().literals[sig.id]
    assert literals and all(len(lit.text) >= MIN_LENGTH for lit in literals)
    for pattern in sig.patterns:
        if re.search(pattern, sig.example):
            strings = required_literals(pattern).strings
            assert any(text in sig.example for text in strings), (pattern, strings)


def _available(engine: str) -> bool:
    module = {"hyperscan": "hyperscan", "aho": "ahocorasick", "re": "re"}[engine]
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("engine", ENGINES)
def test_every_engine_finds_the_same_lines(engine):
    if not _available(engine):
        pytest.skip(f"{engine} not installed")
    literals = [Literal("Invalid rank requested : "), Literal("Cuda failure "),
                Literal("Cuda failure '"), Literal("unhandled system error", caseless=True)]
    block = (b"ok\nx Cuda failure 'out of memory'\nfine\nUNHANDLED System Error here\n"
             b"Invalid rank requested : 6/4 and Cuda failure again\nval_error=0.1\n")
    index = build_index(literals, engine)
    assert index.name == engine
    lines = {block.rfind(b"\n", 0, end) + 1 for end in index.ends(block)}
    assert sorted(block[s:block.find(b"\n", s)] for s in lines) == [
        b"Invalid rank requested : 6/4 and Cuda failure again",
        b"UNHANDLED System Error here", b"x Cuda failure 'out of memory'"]


def test_fallback_is_used_when_no_optional_engine_is_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "hyperscan", None)  # import now raises ImportError
    monkeypatch.setitem(sys.modules, "ahocorasick", None)
    index = build_index([Literal("Invalid rank requested : ")])
    assert index.name == "re"
    assert list(index.ends(b"a\nInvalid rank requested : 6/4\n")) == [27]


def test_forced_fallback_explains_like_the_fast_engine(tmp_path, monkeypatch):
    log = tmp_path / "job.log"
    log.write_text("step 1 val_error=0.1\nUserWarning: deprecated\n"
                   "n1:1:1 [0] init.cc:1 NCCL WARN Invalid rank requested : 6/4\n"
                   "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    results = {}
    for engine in ENGINES:
        if _available(engine):
            monkeypatch.setenv(prefilter.ENGINE_VARIABLE, engine)
            assert literal_index().name == engine
            results[engine] = [(f["id"], f["line"]) for f in explain([str(log)]).to_dict()
                               ["findings"]]
    assert results["re"] == [("nccl.invalid_rank", 3), ("cuda.illegal_memory_access", 4)]
    assert all(found == results["re"] for found in results.values()), results


def test_the_literal_pass_names_the_tokens_a_block_holds():
    pytest.importorskip("hyperscan")
    tokens = (b"NCCL INFO", b"rror", b"torchrun", b"Killed")
    block = b"a NCCL INFO b\nan error here\nnothing\n"
    found: list[bytes] = []
    index = prefilter.HyperscanIndex([prefilter.Literal("here")], tokens)
    assert [end for end, _ in index.hits(block, found)] == [block.index(b"here") + 4]
    assert set(found) == {b"NCCL INFO", b"rror"}


def test_naming_the_tokens_does_not_change_the_candidates():
    """The same lines, with the same reasons, whether Hyperscan names the tokens in the
    literal pass or every token is searched for on its own."""
    pytest.importorskip("hyperscan")
    import io
    from ncclcheck.explain import scan
    text = (b"node1:1:1 [0] NCCL INFO Bootstrap : Using eth0\n+ torchrun --nnodes=2 x\n"
            b"step 3 failed, retrying\nNCCL_SOCKET_IFNAME=eth0 set by environment to eth0\n"
            b"node2:2251:2251 [2] init.cc:1872 NCCL WARN Invalid rank requested : 6/4\n")
    literals = [lit for sig in SIGNATURES for lit in prepared().literals[sig.id]]
    seen = []
    for index in (literal_index("hyperscan"), build_index(literals, "hyperscan")):
        seen.append([(c.number, c.text, c.gated, c.info, c.context, c.error)
                     for c in scan.Scanner(index).lines(io.BytesIO(text))])
    assert seen[0] == seen[1] and len(seen[0]) == 5
    assert literal_index("hyperscan").tokens == scan.TOKENS  # one pass in explain
