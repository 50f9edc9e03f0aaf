"""The committed launcher tails (tests/data/logs/tails/) are still what the real launchers
print: each is re-made with real torchrun, srun (the tests' Slurm) and mpirun, and must have
the committed shape (the same lines once numbers are set aside). The same runs check the
per-line prefixes logshapes.py writes for srun -l and torchrun --tee 3 against the real ones."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from conftest import _skip_or_fail
from logshapes import PREFIXES

sys.path.insert(0, str(Path(__file__).resolve().parent / "data" / "logs" / "make"))

from make_launcher_tails import OUT, TAILS, make, prefixes, shape  # noqa: E402

pytestmark = pytest.mark.slow

LOCAL = [name for name, tail in TAILS.items() if tail.launcher != "srun"]
SRUN = [name for name, tail in TAILS.items() if tail.launcher == "srun"]


def _committed(name: str) -> str:
    return (OUT / f"{name}.txt").read_text("utf-8")


@pytest.mark.parametrize("name", LOCAL)
def test_torchrun_and_mpirun_still_print_the_committed_tail(name):
    launcher = TAILS[name].launcher
    if launcher == "mpirun" and shutil.which("mpirun") is None:
        _skip_or_fail("needs mpirun (Debian package openmpi-bin)")
    made = make(name)
    assert shape(made.text) == shape(_committed(name)), made.raw[-3000:]
    # torchrun runs with --tee 3: its prefix on the worker's lines is the one logshapes writes
    expected = PREFIXES["torchrun-tee"].make if launcher == "torchrun" else lambda rank, n: ""
    assert prefixes(made.raw) == {rank: expected(rank, 0) for rank in (0, 1)}


@pytest.mark.slurm
@pytest.mark.parametrize("name", SRUN)
def test_srun_still_prints_the_committed_tail(name, slurm_cluster):
    made = make(name, slurm_cluster)
    assert shape(made.text) == shape(_committed(name)), made.raw[-3000:]
    if TAILS[name].label:
        assert prefixes(made.raw) == {rank: PREFIXES["srun-l"].make(rank, 0) for rank in (0, 1)}
    else:
        assert prefixes(made.raw) == {0: "", 1: ""}
