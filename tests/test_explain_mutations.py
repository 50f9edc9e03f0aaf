"""Every signature is still found when its example line reaches us the way real logs do.

Logs arrive without NCCL's prefixes (a logger that keeps only the message), hard-wrapped by a
terminal, or as the message of a Python exception. Each mutation of each catalogue example
must still be explained with the same signature id.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ncclcheck.catalogue import Signature, load
from ncclcheck.explain.engine import explain
from ncclcheck.explain.lines import parse_line

SIGNATURES = load().line_signatures  # inferred ones: tests/test_explain_inference.py
WIDTH = 80
# A harmless launch line longer than the terminal, so the pasted log is wrapped throughout.
PREAMBLE = ("+ torchrun --nnodes=2 --nproc-per-node=8 --rdzv-backend=c10d "
            "--rdzv-endpoint=node1:29500 train.py --config configs/large.yaml --epochs 90")
_NCCL_LEVEL = re.compile(r"^(?:[\w./-]+\.(?:cc|h|cpp):\d+ )?(?:\(\w+\) )?NCCL (?:WARN|INFO) ")


def bare(example: str) -> str:
    """The example without timestamps, host:pid:tid [dev], [rankN]: and NCCL WARN/INFO."""
    return _NCCL_LEVEL.sub("", parse_line(example).message)


def wrapped(text: str, width: int = WIDTH) -> str:
    """Hard-wrapped as a terminal does: every `width` characters, mid-word."""
    return "\n".join(text[i:i + width] for i in range(0, len(text), width))


def in_traceback(message: str, exception: str) -> str:
    return ("Traceback (most recent call last):\n"
            '  File "/workspace/train.py", line 42, in <module>\n'
            "    dist.init_process_group(backend=\"nccl\")\n"
            f"{exception}: {message}\n")


MUTATIONS = {
    "bare": lambda ex: bare(ex) + "\n",
    "wrapped": lambda ex: wrapped(PREAMBLE) + "\n" + wrapped(ex) + "\n",
    "bare_wrapped": lambda ex: wrapped(PREAMBLE) + "\n" + wrapped(bare(ex)) + "\n",
    "runtime_error": lambda ex: in_traceback(bare(ex), "RuntimeError"),
    "dist_backend_error": lambda ex: in_traceback(bare(ex),
                                                  "torch.distributed.DistBackendError"),
}


def ids_found(tmp_path: Path, text: str) -> list[str]:
    """The ids found, line findings first: a cause inferred from the same line (a generic
    error read in the light of the rest of the log) is dropped, so the line's own signature
    must still be found first."""
    path = tmp_path / "mutated.log"
    path.write_text(text, "utf-8")
    findings = explain([str(path)]).to_dict()["findings"]
    return [f["id"] for f in findings if not f["inferred_from"]]


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: s.id)
def test_mutated_example_is_found_with_the_same_id(tmp_path, sig: Signature, mutation: str):
    text = MUTATIONS[mutation](sig.example)
    found = ids_found(tmp_path, text)
    assert reads_its_line(sig, found), (found, text)


def reads_its_line(sig: Signature, found: list[str]) -> bool:
    """Whether ``sig`` read its line first among the findings ``found``: one that says only
    that something failed (NCCL's generic "Call to posix_memalign failed", a wrapper quoting a
    CUDA error) may stand after the component that printed the line's own reading of it
    ("Cannot allocate memory": out of memory), never after anything else."""
    if found[:1] == [sig.id]:
        return True
    return ((sig.generic or bool(sig.quotes)) and len(found) > 1
            and found[0].startswith("component.") and found[1] == sig.id)


def test_mutations_really_change_the_line():
    example = "[2026-06-11 11:44:19] node2:2251:2251 [2] init.cc:1872 NCCL WARN Invalid rank " \
              "requested : 6/4"
    assert bare(example) == "Invalid rank requested : 6/4"
    assert all(len(line) <= WIDTH for line in MUTATIONS["wrapped"](example).splitlines())
    assert "Invalid rank requested : 6/4" not in MUTATIONS["wrapped"](example + " " * 40)
