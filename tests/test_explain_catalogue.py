"""The catalogue, entry by entry: every signature's example triggers it, through the prefilter."""

from __future__ import annotations

import re
import string
import subprocess
import sys
from pathlib import Path

import pytest

from ncclcheck.catalogue import Signature, UnknownSignature, load
from ncclcheck.catalogue.facts import pci_bus_id
from ncclcheck.explain.docs import DOC_PATH, failures_markdown
from ncclcheck.explain.engine import literal_index
from ncclcheck.explain.lines import parse_line
from ncclcheck.explain.prepared import prepared
from ncclcheck.model import CATEGORIES

CATALOGUE = load()
SIGNATURES = CATALOGUE.line_signatures  # inferred ones: tests/test_explain_inference.py
REPO = Path(__file__).resolve().parents[1]


def test_catalogue_is_large_and_ids_are_stable_dotted_unique():
    ids = [s.id for s in SIGNATURES]
    assert len(ids) >= 60
    assert len(set(ids)) == len(ids)
    for sig_id in ids:
        assert re.fullmatch(r"[a-z]+\.[a-z0-9_]+", sig_id), sig_id


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: s.id)
def test_signature_example_is_found_and_explained(sig: Signature):
    assert sig.category.value in CATEGORIES
    assert sig.title and sig.meaning and sig.fix
    assert 0 <= sig.priority <= 100
    # The example passes the prefilter, its own regex and literals, and no earlier signature
    # claims it: what the catalogue says is what a log gets.
    assert list(literal_index().ends(sig.example.encode())), "example holds no literal"
    message = parse_line(sig.example).message
    found = prepared().matcher(SIGNATURES).match(message)
    assert found is not None and found[0].id == sig.id, (found and found[0].id)
    facts = found[1]
    explanation, fix = sig.render(facts)
    # Every fact a text needs outside an optional [[...]] part is captured by the example.
    required = {name for text in (sig.meaning, sig.fix)
                for _, name, _, _ in string.Formatter().parse(re.sub(r"\[\[.*?\]\]", "", text,
                                                                     flags=re.S)) if name}
    assert not [n for n in required if f"<{n}>" in explanation + fix], required
    assert "{" not in explanation + fix and "[[" not in explanation + fix


def test_render_fills_facts_and_drops_unknown_optional_parts():
    explanation, fix = CATALOGUE.signature("nccl.invalid_rank").render({"rank": 6, "nranks": 4})
    assert "rank 6 of a communicator of only 4 ranks" in explanation
    assert "nodes x GPUs per node ranks" in fix and "at least 7" in fix
    explanation, fix = CATALOGUE.signature("nccl.invalid_rank").render({})
    assert "6" not in explanation and "at least" not in fix and "nodes x GPUs" in fix


def test_render_derives_names_from_numbers():
    explanation, _ = CATALOGUE.signature("nccl.duplicate_gpu").render(
        {"rank": 1, "rank2": 0, "busid": "1b000"})
    assert "0000:1b:00.0" in explanation
    explanation, _ = CATALOGUE.signature("nccl.version_mismatch").render(
        {"rank1": 0, "version1": 21805, "rank2": 4, "version2": 22005})
    assert "2.18.5" in explanation and "2.20.5" in explanation
    explanation, _ = CATALOGUE.signature("torchrun.worker_signal").render(
        {"exitcode": -9, "rank": 1})
    assert "SIGKILL" in explanation
    explanation, _ = CATALOGUE.signature("nccl.version_mismatch").render(
        {"rank1": 0, "version1": 2804, "rank2": 4, "version2": 23007})
    assert "2.8.4" in explanation and "2.30.7" in explanation
    assert pci_bus_id("1b000") == "0000:1b:00.0"


def test_probes_get_the_same_text_for_an_interface_problem():
    explanation, fix = CATALOGUE.signature("nccl.no_socket_interface").render({"ifname": "eth9"})
    assert "NCCL_SOCKET_IFNAME=eth9" in explanation
    assert "NCCL_SOCKET_IFNAME" in fix
    sig = CATALOGUE.signature("nccl.no_socket_interface")
    assert sig.explanation.startswith("NCCL could not")


def test_unknown_id_is_a_clear_error():
    with pytest.raises(UnknownSignature):
        CATALOGUE.signature("nccl.no_such_thing")


def test_requires_conditions_filter_matches():
    sig = CATALOGUE.signature("lightning.member_overflow")
    assert sig.match("Initializing distributed: GLOBAL_RANK: 6, MEMBER: 7/4") is not None
    assert sig.match("Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/4") is None


def test_failures_doc_is_generated_from_the_catalogue():
    """docs/failures.md must be regenerated (python -m ncclcheck.explain.docs) after edits."""
    assert DOC_PATH.read_text("utf-8") == failures_markdown(), \
        "docs/failures.md is stale: run python -m ncclcheck.explain.docs"
    done = subprocess.run([sys.executable, "-m", "ncclcheck.explain.docs", "--check"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    for sig in SIGNATURES:
        assert f"## {sig.id}" in failures_markdown()
