"""explain's root cause must not move when a log takes a shape it has in the wild: a real
launcher's tail appended, a collector's prefix on every line, other ranks' consequences in
between, Ray's folding, an 80-column wrap, a middle cut (tests/logshapes.py, tests/logtails.py;
benchmarks/explain_invariance.py prints the same figures with the logs that moved).

Over the whole corpus (every log with a known root cause: world dev and test, and the own
corpus), per transformation, the moves are bounded by CEILINGS. The goal is 0 for every
transformation. A ceiling only ever goes down: when explain improves, lower it to the new
figure (the test warns when one is loose); never raise it to let a change through.
"""

from __future__ import annotations

import shutil
import warnings

import pytest

from invariance import (SPLITS, Tally, cases, compare, moves_by_split, read,
                        transforms)
from ncclcheck.explain.textmodel import load_model

pytestmark = pytest.mark.exhaustive

# Moves (dev, test, own) of 358 dev, 153 test and 68 own logs, as measured when the arbiter and
# the readers last improved (a tail moves a log with no root of its own to rank_crashed: the
# launcher reports a death nothing else explains). Goal: 0. Only ever lowered.
CEILINGS: dict[str, tuple[int, int, int]] = {
    "tail:mpirun-abort": (37, 23, 0),
    "tail:mpirun-exit1": (37, 23, 0),
    "tail:srun-abort": (42, 24, 0),
    "tail:srun-exit1": (42, 24, 0),
    "tail:srun-l-abort": (42, 24, 0),
    "tail:srun-l-exit1": (42, 24, 0),
    "tail:torchrun-abort": (39, 25, 0),
    "tail:torchrun-exit1": (38, 24, 0),
    "prefix:srun-l": (0, 0, 0),
    "prefix:torchrun-tee": (0, 0, 0),
    "prefix:torch-rank": (0, 0, 0),
    "prefix:ray": (0, 0, 0),
    "prefix:kubectl": (0, 0, 0),
    "prefix:compose": (0, 0, 0),
    "prefix:journald": (0, 0, 0),
    "prefix:ts": (2, 1, 0),
    "interleave": (51, 44, 2),
    "fold": (2, 2, 0),
    "wrap80": (1, 1, 0),
    "cut": (11, 1, 0),
    "cut-count": (11, 1, 0),
}


@pytest.fixture(scope="module")
def tallies() -> dict[str, Tally]:
    return compare(cases(), transforms())


def test_every_transformation_has_a_ceiling():
    assert set(CEILINGS) == {t.name for t in transforms()}


@pytest.mark.parametrize("name", list(CEILINGS))
def test_the_root_cause_moves_no_more_than_the_ceiling(name, tallies):
    tally = tallies[name]
    got = moves_by_split(tally)
    ceiling = dict(zip(SPLITS, CEILINGS[name]))
    over = {split: (got[split], ceiling[split]) for split in SPLITS if got[split] > ceiling[split]}
    moved = "\n".join(f"  {case.split} {case.path.name}: {before.category or '(nothing)'} "
                      f"({before.id}) -> {after.category or '(nothing)'} ({after.id})"
                      for case, before, after in tally.moves)
    assert not over, f"{name}: moves over the ceiling (got, ceiling) {over}\n{moved}"
    loose = {split: (got[split], ceiling[split]) for split in SPLITS if got[split] < ceiling[split]}
    if loose:
        warnings.warn(f"{name}: fewer moves than the ceiling (got, ceiling) {loose}: lower "
                      "CEILINGS in tests/test_explain_invariance.py", stacklevel=1)


def test_a_copy_of_a_log_reads_as_the_log(tmp_path):
    """The instrument itself moves nothing: a log copied under the same name, untouched,
    gets the root cause the original gets."""
    model = load_model()
    differ = []
    for case in cases():
        copy = tmp_path / case.path.name
        if case.path.is_dir():
            shutil.copytree(case.path, copy)
        else:
            shutil.copy(case.path, copy)
        if read(copy, model) != read(case.path, model):
            differ.append(case.path.name)
        shutil.rmtree(copy) if copy.is_dir() else copy.unlink()
    assert not differ, differ
