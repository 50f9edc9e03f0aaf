"""Every corpus log yields its expected root cause (clean logs: test_explain_clean.py).

The index (tests/data/logs/index.toml) says for each log where it came from: "real" logs were
printed by torchrun, Gloo, Lightning and libnccl on this machine (make/make_real_logs.py);
"written" logs are composed from the libraries' exact message formats for what cannot run here
(GPUs, InfiniBand, NVLink, CUDA, Slurm).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ncclcheck.explain.engine import explain

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

LOGS = Path(__file__).resolve().parent / "data" / "logs"
INDEX = tomllib.loads((LOGS / "index.toml").read_text("utf-8"))["log"]
FAILING = [e for e in INDEX if e["root"]]
CLEAN = [e for e in INDEX if not e["root"]]


def test_corpus_size_and_every_log_indexed():
    assert len(FAILING) >= 40 and len(CLEAN) >= 5
    assert sum(e["origin"].startswith("real") for e in INDEX) >= 15
    indexed = {e["path"] for e in INDEX}
    on_disk = {p.relative_to(LOGS).as_posix() for p in LOGS.glob("*/*")
               if p.parent.name not in ("make", "world", "tails") and not p.name.endswith(".py")}
    assert on_disk == indexed


@pytest.mark.parametrize("entry", FAILING, ids=lambda e: e["path"])
def test_root_cause(entry):
    result = explain([str(LOGS / entry["path"])]).to_dict()
    root = result["findings"][0]
    assert root["root_cause"] is True
    assert root["category"] == entry["category"], root
    assert root["id"] == entry["root"], root
    assert sum(f["root_cause"] for f in result["findings"]) == 1
    ids = [f["id"] for f in result["findings"]]
    assert len(ids) == len(set(ids)), "a finding is repeated instead of counted"
