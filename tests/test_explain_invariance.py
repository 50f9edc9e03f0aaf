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
# the readers last improved. A launcher's report of a death is never the root cause, so a tail
# moves nothing; what is left: other ranks' consequences interleaved into a log explain finds
# no cause in (they then stand first: a peer's lost connection, a watchdog) or printed before
# the log's own consequence of another kind; Ray's folding of repeated rank announcements
# (which rank repeated is lost); a middle cut out of a log only the text model reads. Goal: 0.
# Only ever lowered.
CEILINGS: dict[str, tuple[int, int, int]] = {
    **{f"tail:{name}": (0, 0, 0) for name in (
        "mpirun-abort", "mpirun-exit1", "srun-abort", "srun-exit1", "srun-l-abort",
        "srun-l-exit1", "torchrun-abort", "torchrun-exit1")},
    **{f"prefix:{style}": (0, 0, 0) for style in (
        "srun-l", "torchrun-tee", "torch-rank", "ray", "kubectl", "compose", "journald", "ts")},
    "interleave": (45, 42, 0),
    "fold": (4, 1, 0),
    "wrap80": (0, 0, 0),
    "cut": (2, 1, 0),
    "cut-count": (2, 1, 0),
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
