"""The gate leaves out only lines nobody can use, so findings never change.

A line holding only a common literal (the catch-all's "Error: " in a retry warning) is left
out when no signature can match it, the context and the keyword fallback would not keep it,
and it cannot start a message continued on the next line. These tests force every literal to
count as common (``NOISY_HITS = 1``) and compare with the ``re`` engine, which has no gate,
for both engines that have one: Hyperscan (its full-pattern pass over the block) and
Aho-Corasick (the same expressions in Python's ``re``, line by line).
"""

from __future__ import annotations

import importlib.util
import io
import os
import time
from pathlib import Path

import pytest

from ncclcheck.catalogue import load
from ncclcheck.explain import gate as gate_module
from ncclcheck.explain.engine import explain, literal_index
from ncclcheck.explain.gate_lines import ClaimLines
from ncclcheck.explain.hsregex import prefix_run, to_hyperscan
from ncclcheck.explain.lines import LINE_PREFIXES
from ncclcheck.explain.prefilter import ENGINE_VARIABLE
from ncclcheck.explain.prepared import prepared
from ncclcheck.explain.scan import Scanner
from test_explain_mutations import MUTATIONS, ids_found, reads_its_line

HYPERSCAN = importlib.util.find_spec("hyperscan") is not None
needs_hyperscan = pytest.mark.skipif(not HYPERSCAN, reason="Hyperscan has no wheel here")
GATED = [pytest.param("hyperscan", marks=needs_hyperscan), "aho"]  # the engines with a gate

SIGNATURES = load().line_signatures
LOGS = Path(__file__).parent / "data" / "logs"
NOISE = "WARNING:urllib3.connectionpool:Retrying after ConnectionError: read timed out (attempt {n})"
PREFIXES = ("", "[rank3]:", "node1:123:456 [0] ", "[1,3]<stderr>:", "2026-12-02 12:59:53,123 ",
            "[rank0]:[W1202 12:59:21.142842639 ProcessGroupNCCL.cpp:1042] ")


def _database(expressions: list[bytes]):
    """A block-mode database of ``expressions``: compiled once, scanned as often as needed."""
    import hyperscan

    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(expressions=expressions, ids=list(range(len(expressions))),
                     flags=[hyperscan.HS_FLAG_MULTILINE] * len(expressions))
    return database


def _ends(database, text: bytes) -> set[int]:
    ends: set[int] = set()
    database.scan(text, match_event_handler=lambda _i, _s, end, _f, _c: ends.add(end))
    return ends


def _reported(expressions: list[bytes], text: bytes) -> set[int]:
    return _ends(_database(expressions), text)


@needs_hyperscan
@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: s.id)
def test_a_signature_expression_matches_its_example_behind_any_prefix(sig):
    start = prefix_run(LINE_PREFIXES.pattern, LINE_PREFIXES.flags)
    database = _database([to_hyperscan(p, 0, start) for p in sig.patterns])
    # An example cut over two lines is matched as one (engine.Matcher.match_continued).
    message = " ".join(part.strip() for part in sig.example.strip().split("\n"))
    for prefix in PREFIXES:
        line = (prefix + message).encode()
        block = b"before\n" + line + b"\r\nafter\n"
        # Reported once, at the end of the example's own line (after its \r).
        assert len(b"before\n" + line) + 1 in _ends(database, block), prefix


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: s.id)
def test_without_hyperscan_an_owner_claims_its_example_behind_any_prefix(sig):
    """The Aho-Corasick engine's gate asks the owners' own patterns of the line's message."""
    lines = ClaimLines([sig])
    message = " ".join(part.strip() for part in sig.example.strip().split("\n"))
    for prefix in PREFIXES:
        line = (prefix + message).encode() + b"\r"
        block = b"before\n" + line + b"\nafter\n"
        start_at = len(b"before\n")
        assert lines.hit(block, start_at, start_at + len(line)), prefix
        assert not lines.hit(block, 0, len(b"before")), prefix


@needs_hyperscan
def test_the_translation_errs_on_the_side_of_matching():
    def matches(pattern: str, text: str) -> bool:
        start = prefix_run(LINE_PREFIXES.pattern, LINE_PREFIXES.flags)
        return bool(_reported([to_hyperscan(pattern, 0, start)], text.encode()))

    assert matches(r"(?i:unhandled SYSTEM) error", "UNHANDLED system error")
    assert not matches(r"(?i:unhandled SYSTEM) error", "unhandled system ERROR")
    assert matches(r"^(?!ChildFailed)\w+Error: .{1,300}$", "ChildFailedError: x")  # lookahead off
    assert matches(r"rank [^ ]+ of \d+$", "rank x of 4 and more")  # "$" dropped
    assert not matches(r"rank [^ ]+ of \d+", "rank x of four")
    assert matches(r"^Boom", "[rank3]:node1:1:2 [0] Boom")  # "^" after launcher prefixes
    assert not matches(r"^Boom", "x Boom")


def _noisy(monkeypatch, engine: str) -> None:
    monkeypatch.setattr(gate_module, "NOISY_HITS", 1)
    monkeypatch.setenv(ENGINE_VARIABLE, engine)


def _kept(text: str, engine: str, year_known: bool = False) -> list[str]:
    scanner = Scanner(literal_index(engine), gate=prepared().gate(engine))
    candidates = scanner.lines(io.BytesIO(text.encode()), year_known=lambda: year_known)
    return [c.text for c in candidates if c.gated]


@pytest.mark.parametrize("engine", GATED)
def test_a_line_holding_only_a_common_literal_no_one_can_use_is_left_out(monkeypatch, engine):
    _noisy(monkeypatch, engine)
    noise = [NOISE.format(n=n) for n in range(3)]
    assert _kept("\n".join(noise + ["step 10 done"]) + "\n", engine) == []
    # Without the gate, every one of them (and the line after each) goes to the matcher.
    plain = Scanner(literal_index(engine)).lines(io.BytesIO(("\n".join(noise) + "\nx\n").encode()))
    assert sum(c.gated for c in plain) == 4


@pytest.mark.parametrize("line, below", [
    ("RuntimeError: something odd happened", "x"),                     # the catch-all matches
    (NOISE.format(n=1), "RendezvousConnectionError: The connection to the C10d store has failed"),
    ("Retrying after ConnectionError: Call to", "ibv_reg_mr failed"),  # a literal across the join
    ("Retrying after ConnectionError: job 7 ON node1", "CANCELLED AT 2026-12-02T12:00:00"),
    ("2026-12-02 12:59:53,123 " + NOISE.format(n=1), "x"),            # the year is still unknown
    ("Retrying after ConnectionError: failed", "x"),                   # the fallback counts it
    ("Retrying after ConnectionError: NCCL_SOCKET_IFNAME=eth0", "x"),  # the context keeps it
    ("Retrying after ConnectionError: " + "\u00e9t\u00e9", "x"),       # not ASCII
])
@pytest.mark.parametrize("engine", GATED)
def test_a_line_someone_can_use_still_goes_to_the_matcher(monkeypatch, line, below, engine):
    _noisy(monkeypatch, engine)
    assert line in _kept(NOISE.format(n=0) + "\n" + line + "\n" + below + "\n", engine)


@pytest.mark.parametrize("engine", GATED)
def test_a_known_year_lets_a_dated_common_line_go(monkeypatch, engine):
    _noisy(monkeypatch, engine)
    line = "2026-12-02 12:59:53,123 " + NOISE.format(n=1)
    assert _kept(line + "\nx\n", engine, year_known=True) == []


def test_without_hyperscan_a_run_of_prefixes_costs_no_backtracking(monkeypatch):
    """Python's re over the translated expressions backtracks exponentially in a run of
    optional prefixes; the owners' own patterns on the peeled message do not."""
    _noisy(monkeypatch, "aho")
    line = "[rank1]: " * 14 + "Retrying after ConnectionError: read timed out"  # ~1 min in re
    started = time.monotonic()
    _kept(NOISE.format(n=0) + "\n" + line + "\nx\n", "aho")
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("engine", GATED)
def test_a_literal_across_the_join_keeps_the_header(engine):
    """'Call to ibv_reg_mr failed' cut after 'to': the header ends with 'Call to'."""
    gate = prepared().gate(engine)
    after = gate._afters(b"Retrying after ConnectionError: Call to")
    assert after is not None and after.search(b"ibv_reg_mr failed with error 12")
    assert gate._afters(b"Retrying after ConnectionError: (attempt 1)") is None or \
        not gate._afters(b"Retrying after ConnectionError: (attempt 1)").search(b"step 10")


def _all_logs() -> list[str]:
    return sorted(os.path.join(folder, name) for folder, _, names in os.walk(LOGS)
                  for name in names if name != "index.toml")


@pytest.mark.exhaustive
@pytest.mark.parametrize("gated_engine", GATED)
def test_findings_do_not_change_on_the_corpus_with_every_literal_common(monkeypatch,
                                                                         gated_engine):
    gated, plain = {}, {}
    for engine, out in ((gated_engine, gated), ("re", plain)):
        monkeypatch.setenv(ENGINE_VARIABLE, engine)
        monkeypatch.setattr(gate_module, "NOISY_HITS", 1)
        for path in _all_logs():
            out[path] = explain([path]).to_dict()
    assert gated == plain


@pytest.mark.parametrize("gated_engine", GATED)
def test_a_dense_log_gives_the_same_findings_with_and_without_the_gate(monkeypatch, tmp_path,
                                                                       gated_engine):
    lines = []
    for n in range(3000):
        lines += [NOISE.format(n=n % 7), f"node1:1:1 [0] NCCL INFO comm {n} rank 0 nranks 8"]
    lines.insert(4000, "node2:2251:2251 [2] init.cc:1872 NCCL WARN Invalid rank requested : 6/4")
    path = tmp_path / "dense.log"
    path.write_text("\n".join(lines) + "\n")
    found = {}
    for engine in (gated_engine, "re"):
        monkeypatch.setenv(ENGINE_VARIABLE, engine)
        found[engine] = explain([str(path)]).to_dict()
    assert found[gated_engine] == found["re"]
    assert [f["id"] for f in found["re"]["findings"]][:1] == ["nccl.invalid_rank"]
    with path.open("rb") as stream:
        gated = sum(c.gated for c in Scanner(literal_index(gated_engine),
                                             gate=prepared().gate(gated_engine)).lines(stream))
    assert gated < 10  # 3000 retry warnings and the lines after them stayed out


@pytest.mark.exhaustive
@pytest.mark.parametrize("engine", GATED)
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_mutated_examples_are_found_with_every_literal_common(monkeypatch, tmp_path, mutation,
                                                             engine):
    _noisy(monkeypatch, engine)
    for sig in SIGNATURES:
        found = ids_found(tmp_path, MUTATIONS[mutation](sig.example))
        assert reads_its_line(sig, found), (sig.id, found)


def test_the_gate_builds_its_tables_only_when_a_block_has_a_common_literal(monkeypatch):
    """A small log has no common literal: the gate's tables (each literal's owners, the cuts
    at spaces, the Hyperscan prefix run) are never built; a block with one builds them."""
    made = ("_owners", "_firm_owned", "_cuts", "_cut_index", "_start")
    fresh = gate_module.Gate(SIGNATURES, prepared().literals, literal_index("hyperscan").literals)
    scanner = Scanner(literal_index("hyperscan"), gate=fresh)
    log = LOGS / "world" / "dev" / "c4-006-colbert-kmeans-rank0-allreduce-watchdog-timeout.log"
    assert [c for c in scanner.lines(io.BytesIO(log.read_bytes())) if c.gated]
    assert not [name for name in made if name in vars(fresh)]
    monkeypatch.setattr(gate_module, "NOISY_HITS", 1)
    noisy = Scanner(literal_index("hyperscan"), gate=fresh)
    kept = [c.text for c in noisy.lines(io.BytesIO((NOISE.format(n=1) + "\nok\n").encode()))
            if c.gated]
    assert kept == [] and all(name in vars(fresh) for name in made)
