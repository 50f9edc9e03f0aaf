"""The corpus's GPU logs made again on this GPU node, and read by explain as the index says.

tests/data/logs/make/make_gpu_logs.py provokes each failure with today's torch, NCCL and
Lightning into a temporary folder; explain must find the root cause the corpus's copy has, so
a wording that changed in a new release shows up here first. Skipped where torch sees no GPU.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ncclcheck.explain.engine import explain

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
MAKER = LOGS / "make" / "make_gpu_logs.py"
INDEX = {Path(e["path"]).name: e for e in tomllib.loads((LOGS / "index.toml").read_text())["log"]
         if Path(e["path"]).name.startswith("gpu-")}


def _gpus() -> int:
    try:
        import torch
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_gpus() == 0, reason="needs a CUDA GPU")]


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gpu-logs")
    done = subprocess.run([sys.executable, str(MAKER), "--out", str(out)], capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    return out


@pytest.mark.parametrize("name", sorted(INDEX))
def test_made_again_and_read_as_the_corpus_says(made, name):
    entry = INDEX[name]
    text = (made / name).read_text()
    result = explain([str(made / name)])
    roots = [f for f in result.to_dict()["findings"] if f["root_cause"]]
    if not entry["root"]:
        assert roots == [] and result.failed is False, (roots, text[-2000:])
        return
    assert roots and roots[0]["id"] == entry["root"], (roots[:1], text[-2000:])
    assert roots[0]["category"] == entry["category"]
