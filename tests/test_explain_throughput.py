"""A run that slowed down several-fold while nothing errors reads as degraded
(readers/throughput.py, host.throughput_fell).

The figures are the run's own, in the words of whatever printed them: tqdm's progress bar
(every update after a carriage return on one line, its rate in it/s and below one a second in
s/it), Megatron's "elapsed time per iteration (ms)", tokens/s. The real case is
real/lightning-straggler-slowdown.log (make_real_logs.py: Lightning DDP on Gloo, rank 1 slow from
the middle of the epoch on); the slow test makes it again.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ncclcheck.explain.engine import explain
from ncclcheck.explain.readers.throughput import FOLD, figure

LOGS = Path(__file__).resolve().parent / "data" / "logs"


def _explain(tmp_path, text: str):
    log = tmp_path / "train.log"
    log.write_text(text, "utf-8")
    return explain([str(log)])


def _bar(rates: list[float], label: str = "Epoch 0") -> str:
    """One tqdm bar as written without a terminal: every update after a carriage return."""
    pieces = []
    for i, rate in enumerate(rates, 1):
        shown = f"{rate:.2f}it/s" if rate >= 1 else f"{1 / rate:.2f}s/it"
        pieces.append(f"{label}: {100 * i // len(rates):3d}%|###| {i}/{len(rates)} "
                      f"[00:01<00:01, {shown}, loss=0.5]")
        return_ = "\r"
    return return_ + return_.join(pieces) + "\n"


def test_a_progress_bar_that_falls_below_one_step_a_second(tmp_path):
    """it/s then s/it is one series: 6 it/s to one step every 2.5 s."""
    result = _explain(tmp_path, "starting\n" + _bar([6.0] * 20 + [0.4] * 20) + "done\n")
    root = result.root
    assert root is not None and root.signature.id == "host.throughput_fell"
    assert root.signature.category.value == "degraded"
    assert root.first.facts["fold"] == 15.0 and "s per step" in root.first.facts["after"]


def test_megatron_iteration_times_one_line_each(tmp_path):
    lines = [f" iteration {i:8d}/   10000 | consumed samples: {i * 512:10d} | elapsed time per "
             f"iteration (ms): {820.5 if i <= 30 else 4210.9:.1f} | learning rate: 1.0E-04 |"
             for i in range(1, 61)]
    root = _explain(tmp_path, "\n".join(lines) + "\n").root
    assert root is not None and root.signature.id == "host.throughput_fell"
    assert root.first.line == 31 and root.first.facts["fold"] == pytest.approx(5.1, abs=0.1)


@pytest.mark.parametrize("text", [
    _bar([2.0, 3.0] + [8.0] * 30),                           # a slow start (warm-up), then fast
    _bar([8.0] * 30 + [4.0] * 10),                           # half speed: not several-fold
    _bar([8.0] * 20) + _bar([90.0] * 10, "Validation DataLoader 0") + _bar([8.0] * 20),
    _bar([8.0, 0.5, 8.0, 0.5] * 8),                          # uneven all along
    "\n".join(f"step {i} {1200.0 if i < 5 else 300.0} tokens/s" for i in range(8)) + "\n",
], ids=["warm-up", "half speed", "another bar's rate", "uneven", "too few figures"])
def test_no_slowdown_no_finding(tmp_path, text):
    assert _explain(tmp_path, text).findings == []


def test_a_failure_outranks_a_slowdown(tmp_path):
    """A run that slowed down and then died of a named cause: the cause stands first, the
    slowdown is shown beside it."""
    text = _bar([6.0] * 20 + [0.4] * 20) + (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a "
        "total capacity of 79.15 GiB of which 4.31 MiB is free.\n")
    found = _explain(tmp_path, text).findings
    assert found[0].signature.category.value == "out_of_memory"
    assert "host.throughput_fell" in [f.signature.id for f in found]


def test_the_figures_read_as_speeds():
    assert figure("Epoch 1:  50%|#| 5/10 [00:02<00:02, 2.50it/s]")[1].speed == 2.5
    assert figure("Epoch 1:  50%|#| 5/10 [00:02<00:02, 4.00s/it]")[1].speed == 0.25
    assert figure("Epoch 1:  50%|#| 5/10 [00:02<00:02, 4.00s/it]")[0] == \
        figure("Epoch 1:  50%|#| 5/10 [00:02<00:02, 2.50it/s]")[0]
    assert figure("throughput 3512.4 tokens/s")[0].startswith("tokens/s")
    assert figure("no figure here")[1] is None and FOLD >= 3


def test_the_real_straggler_log_reads_as_degraded():
    root = explain([str(LOGS / "real" / "lightning-straggler-slowdown.log")]).root
    assert root is not None and root.signature.id == "host.throughput_fell"
    assert root.first.facts["fold"] >= FOLD


@pytest.mark.slow
def test_a_real_lightning_straggler_made_again(tmp_path):
    """The scenario run again with today's torch and Lightning: Lightning's own progress bar
    on rank 0 shows the fall."""
    sys.path.insert(0, str(LOGS / "make"))
    import make_real_logs
    text = make_real_logs.scenario_lightning_straggler()
    assert "rank 0: fit done" in text, text[-2000:]
    root = _explain(tmp_path, text).root
    assert root is not None and root.signature.id == "host.throughput_fell", text[-2000:]
