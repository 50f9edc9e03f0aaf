"""The Hyperscan gate leaves out only lines nobody can use, so findings never change.

A line holding only a common literal (the catch-all's "Error: " in a retry warning) is left
out when no signature can match it, the context and the keyword fallback would not keep it,
and it cannot start a message continued on the next line. These tests force every literal to
count as common (``NOISY_HITS = 1``) and compare with the ``re`` engine, which has no gate.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from ncclcheck.catalogue import load
from ncclcheck.explain import gate as gate_module
from ncclcheck.explain.engine import explain, literal_index
from ncclcheck.explain.hsregex import prefix_run, to_hyperscan
from ncclcheck.explain.lines import LINE_PREFIXES
from ncclcheck.explain.prefilter import ENGINE_VARIABLE
from ncclcheck.explain.prepared import prepared
from ncclcheck.explain.scan import Scanner
from test_explain_mutations import MUTATIONS, ids_found

hyperscan = pytest.importorskip("hyperscan")

SIGNATURES = load().line_signatures
LOGS = Path(__file__).parent / "data" / "logs"
NOISE = "WARNING:urllib3.connectionpool:Retrying after ConnectionError: read timed out (attempt {n})"
PREFIXES = ("", "[rank3]:", "node1:123:456 [0] ", "[1,3]<stderr>:", "2026-12-02 12:59:53,123 ",
            "[rank0]:[W1202 12:59:21.142842639 ProcessGroupNCCL.cpp:1042] ")


def _database(expressions: list[bytes]) -> hyperscan.Database:
    """A block-mode database of ``expressions``: compiled once, scanned as often as needed."""
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(expressions=expressions, ids=list(range(len(expressions))),
                     flags=[hyperscan.HS_FLAG_MULTILINE] * len(expressions))
    return database


def _ends(database: hyperscan.Database, text: bytes) -> set[int]:
    ends: set[int] = set()
    database.scan(text, match_event_handler=lambda _i, _s, end, _f, _c: ends.add(end))
    return ends


def _reported(expressions: list[bytes], text: bytes) -> set[int]:
    return _ends(_database(expressions), text)


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


def _noisy(monkeypatch) -> None:
    monkeypatch.setattr(gate_module, "NOISY_HITS", 1)
    monkeypatch.setenv(ENGINE_VARIABLE, "hyperscan")


def _kept(text: str, year_known: bool = False) -> list[str]:
    scanner = Scanner(literal_index(), gate=prepared().gate("hyperscan"))
    candidates = scanner.lines(io.BytesIO(text.encode()), year_known=lambda: year_known)
    return [c.text for c in candidates if c.gated]


def test_a_line_holding_only_a_common_literal_no_one_can_use_is_left_out(monkeypatch):
    _noisy(monkeypatch)
    noise = [NOISE.format(n=n) for n in range(3)]
    assert _kept("\n".join(noise + ["step 10 done"]) + "\n") == []
    # Without the gate, every one of them (and the line after each) goes to the matcher.
    plain = Scanner(literal_index()).lines(io.BytesIO(("\n".join(noise) + "\nx\n").encode()))
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
def test_a_line_someone_can_use_still_goes_to_the_matcher(monkeypatch, line, below):
    _noisy(monkeypatch)
    assert line in _kept(NOISE.format(n=0) + "\n" + line + "\n" + below + "\n")


def test_a_known_year_lets_a_dated_common_line_go(monkeypatch):
    _noisy(monkeypatch)
    line = "2026-12-02 12:59:53,123 " + NOISE.format(n=1)
    assert _kept(line + "\nx\n", year_known=True) == []


def test_a_literal_across_the_join_keeps_the_header():
    """'Call to ibv_reg_mr failed' cut after 'to': the header ends with 'Call to'."""
    gate = prepared().gate("hyperscan")
    after = gate._afters(b"Retrying after ConnectionError: Call to")
    assert after is not None and after.search(b"ibv_reg_mr failed with error 12")
    assert gate._afters(b"Retrying after ConnectionError: (attempt 1)") is None or \
        not gate._afters(b"Retrying after ConnectionError: (attempt 1)").search(b"step 10")


def _all_logs() -> list[str]:
    return sorted(os.path.join(folder, name) for folder, _, names in os.walk(LOGS)
                  for name in names if name != "index.toml")


@pytest.mark.exhaustive
def test_findings_do_not_change_on_the_corpus_with_every_literal_common(monkeypatch):
    gated, plain = {}, {}
    for engine, out in (("hyperscan", gated), ("re", plain)):
        monkeypatch.setenv(ENGINE_VARIABLE, engine)
        monkeypatch.setattr(gate_module, "NOISY_HITS", 1)
        for path in _all_logs():
            out[path] = explain([path]).to_dict()
    assert gated == plain


def test_a_dense_log_gives_the_same_findings_with_and_without_the_gate(monkeypatch, tmp_path):
    lines = []
    for n in range(3000):
        lines += [NOISE.format(n=n % 7), f"node1:1:1 [0] NCCL INFO comm {n} rank 0 nranks 8"]
    lines.insert(4000, "node2:2251:2251 [2] init.cc:1872 NCCL WARN Invalid rank requested : 6/4")
    path = tmp_path / "dense.log"
    path.write_text("\n".join(lines) + "\n")
    found = {}
    for engine in ("hyperscan", "re"):
        monkeypatch.setenv(ENGINE_VARIABLE, engine)
        found[engine] = explain([str(path)]).to_dict()
    assert found["hyperscan"] == found["re"]
    assert [f["id"] for f in found["re"]["findings"]][:1] == ["nccl.invalid_rank"]
    with path.open("rb") as stream:
        gated = sum(c.gated for c in Scanner(literal_index("hyperscan"),
                                             gate=prepared().gate("hyperscan")).lines(stream))
    assert gated < 10  # 3000 retry warnings and the lines after them stayed out


@pytest.mark.exhaustive
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_mutated_examples_are_found_with_every_literal_common(monkeypatch, tmp_path, mutation):
    _noisy(monkeypatch)
    for sig in SIGNATURES:
        found = ids_found(tmp_path, MUTATIONS[mutation](sig.example))
        assert found and found[0] == sig.id, (sig.id, found)


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
