"""explain's second reader: prefix stripping, masking, the text model, signals, hypotheses.

The model's weights are read with the standard library at run time; where a test compares them
with scikit-learn's own predictions it trains a tiny model in the test (scikit-learn is in the
test extra). No GPU is involved anywhere here.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from ncclcheck.explain.engine import explain, literal_index
from ncclcheck.explain.model_reading import MAX_HYPOTHESES
from ncclcheck.report.explanation import render_markdown, render_table
from ncclcheck.explain.normalize import strip_prefix, words
from ncclcheck.explain.scan import HEAD_LINES, TAIL_LINES, Scanner
from ncclcheck.explain.signals import signal_of
from ncclcheck.explain import textmodel
from ncclcheck.explain.textmodel import CLEAN, MODEL_FILE, NONE, Linear, TextModel, load_model
from ncclcheck.model import Category

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
WORLD = ROOT / "tests" / "data" / "logs" / "world"

# Messages a prefix is put in front of; each must come back whole.
MESSAGES = (
    "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269",
    "NCCL WARN Invalid rank requested : 6/4",
    "Traceback (most recent call last):",
    "torch.distributed.DistBackendError: NCCL error",
    "error: Node failure on gpu-node",
    "ValueError: world size 8 != 4",
    "Watchdog caught collective operation timeout",
    "ERROR failed (exitcode: -9) local_rank: 0",
)


def _host(rng: random.Random) -> str:
    stem = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
    return f"{stem}{rng.choice(['-', '', '.'])}{rng.randint(0, 9999)}"


def _prefix(rng: random.Random) -> str:
    """One launcher or logger prefix of a randomly chosen shape, with random contents."""
    n, pid = rng.randint(0, 4095), rng.randint(1, 4_000_000)
    stamp = (f"{rng.randint(2019, 2026)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
             f"{rng.choice(['T', ' '])}{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
             f"{rng.randint(0, 59):02d}{rng.choice(['', '.123', ',456', '.123456Z'])}")
    word = rng.choice(["Worker", "RayWorker", "TrainTrainable", "default", "trainer", "node"])
    shapes = [
        f"[rank{n}]:", f"[{word}{n}]:", f"({word} pid={pid})", f"(pid={pid})",
        f"{_host(rng)}:{pid}:{rng.randint(1, 99999)} [{n % 8}]", f"{n}:",
        f"[{stamp}]", stamp, f"{_host(rng)}:",
        f"I{rng.randint(1, 12):02d}{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:00:01.{pid % 1000:03d} "
        f"{pid} ProcessGroupNCCL.cpp:{n}]",
        f"[{rng.choice('IWEF')} {word}.cpp:{n}]",
        f"Jun {rng.randint(1, 28)} 11:44:19",
        f"{word.lower()}-{rng.randint(0, 9)}{rng.choice('abcdef')}{rng.randint(10, 99)}-x{n}:",
        f"<{word}-{n}>",
    ]
    return rng.choice(shapes)


@pytest.mark.parametrize("seed", range(40))
def test_generated_prefixes_are_stripped_whatever_their_shape_and_contents(seed):
    rng = random.Random(seed)
    for message in MESSAGES:
        prefix = " ".join(_prefix(rng) for _ in range(rng.randint(1, 4)))
        assert strip_prefix(f"{prefix} {message}") == message, prefix


@pytest.mark.parametrize("message", MESSAGES)
def test_a_message_without_prefix_is_left_whole(message):
    assert strip_prefix(message) == message


def test_words_mask_addresses_numbers_and_ids():
    line = ("connect to 10.1.2.3:29500 failed 0xdeadbeef on eth0 and mlx5_0 after 30000 ms, "
            "peer fe80::1:2:3 id 9f86d081884c7d659a2feaa0c55ad015")
    assert words(line) == ["connect", "to", "ipaddr", "failed", "on", "ethn", "and", "mlxn_n",
                           "after", "ms", "peer", "ipaddr", "id"]


def test_the_shipped_model_is_small_and_names_only_the_taxonomy():
    assert MODEL_FILE.stat().st_size < 2 * 1024 * 1024
    model = load_model()
    assert model is not None
    categories = {c.value for c in Category}
    assert CLEAN in model.classes and set(model.classes) - {CLEAN} <= categories
    assert 0 < model.threshold < 1
    assert model.meta["trained_on"] == "world dev split"


def test_the_shipped_model_is_flat_and_a_small_log_parses_only_its_own_rows():
    """Loading parses no feature's weights; reading a log parses the rows of its features only
    (a 1 KB log needs a few hundred of the model's ~10,000)."""
    stored = json.loads(MODEL_FILE.read_bytes())
    assert all(isinstance(row, str) for row in stored["features"].values())
    assert all(isinstance(row, str) for row in stored["lines"]["features"].values())
    model = TextModel.from_dict(stored)
    assert model.run.rows.parsed == 0 and model.lines.rows.parsed == 0
    log = WORLD / "dev" / "c32-003-torchelastic-etcdstore-needs-newer-torch.log"
    text = explain([str(log)], None).text
    reading = model.read(text)
    assert reading.confident() == "version_mismatch"
    bag = text.bag()
    assert 0 < model.run.rows.parsed <= len(bag) < len(model.run.rows) // 10
    assert 0 < model.lines.rows.parsed <= len(bag)


@pytest.mark.parametrize("row", [[6.0639, [[1, -0.0967], [19, 0.5148]]], [1.0, []],
                                 [2.5e-05, [[0, -0.0], [3, 1e-05], [7, 12.3456]]]])
def test_a_flat_row_reads_back_as_the_trained_row(row):
    flat_row = textmodel.flat_row(row)
    assert isinstance(flat_row, str)
    assert textmodel.Rows({"f": flat_row})["f"] == textmodel.Rows({"f": row})["f"]
    assert textmodel.Rows({"f": flat_row})["f"] == (row[0], dict(row[1]))


def test_flattening_a_trained_model_changes_no_reading(tmp_path):
    """The shipped form reads every bag as the trained form does, bit for bit."""
    trained = {"classes": [CLEAN, "shared_memory"], "bias": [0.1, -1.0], "threshold": 0.5,
               "signature_precision": {}, "meta": {}, "mix": 0.5,
               "features": {"frobnicator": [1.25, [[1, 8.0]]], "exploded": [0.3, [[1, 2.0]]],
                            "fine": [2.0, [[0, 3.0], [1, -0.5]]], "idle": [0.7, []]},
               "lines": {"classes": [NONE, "shared_memory"], "bias": [1.0, -2.0],
                         "features": {"frobnicator": [1.0, [[1, 8.0]]]}}}
    shipped = tmp_path / "model.json"
    shipped.write_text(json.dumps(textmodel.flat(trained)))
    flat_model, model = load_model(str(shipped)), TextModel.from_dict(trained)
    for bag in ({"frobnicator", "idle"}, {"fine", "exploded", "unseen"}, set()):
        assert flat_model.run.probabilities(bag) == model.run.probabilities(bag)
        assert flat_model.lines.probabilities(bag) == model.lines.probabilities(bag)


def test_reading_a_log_never_imports_torch_or_scikit_learn(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("[rank1]: RuntimeError: something nobody wrote a signature for\n" * 10)
    code = ("import sys; from ncclcheck.explain.engine import explain; "
            f"r = explain([{str(log)!r}]); "
            "print([m for m in ('torch', 'sklearn', 'scipy', 'numpy') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def _tiny_model(threshold: float = 0.5) -> TextModel:
    """A model written by hand: 'frobnicator' means shared_memory."""
    return TextModel.from_dict({
        "classes": [CLEAN, "shared_memory"], "bias": [0.0, -1.0], "threshold": threshold,
        "signature_precision": {"decisive": 0.9, "other": 0.4}, "meta": {},
        "features": {"frobnicator": [1.0, [[1, 8.0]]], "exploded": [1.0, [[1, 2.0]]],
                     "all": [1.0, [[0, 3.0]]], "fine": [1.0, [[0, 3.0]]]}})


def test_a_confident_reading_is_the_root_cause_and_is_marked_as_the_models(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("starting the job\nFATAL the frobnicator exploded while quuxing\n")
    result = explain([str(log)], _tiny_model()).to_dict()
    root = result["findings"][0]
    assert root["id"] == "model.shared_memory" and root["category"] == "shared_memory"
    assert "model" in root["title"] and "statistical reading" in root["explanation"]
    assert root["line"] == 2 and "frobnicator" in root["facts"]["evidence"][0]["text"]
    lead = result["hypotheses"][0]
    assert lead["confidence"] == pytest.approx(root["facts"]["probability"], abs=0.01)
    assert {k: lead[k] for k in ("category", "source", "evidence")} == {
        "category": "shared_memory", "source": "model",
        "evidence": [{"file": str(log), "line": 2,
                      "text": "FATAL the frobnicator exploded while quuxing"}]}


def test_the_model_never_reads_a_log_without_a_failure_line(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("the frobnicator exploded while quuxing\nall fine\n")
    result = explain([str(log)], _tiny_model()).to_dict()
    assert result["findings"] == [] and result["hypotheses"] == []


def test_below_the_threshold_the_model_abstains_and_its_guesses_are_hypotheses(tmp_path):
    """A failure line and a reading too weak for a root cause: no finding (the exit code says
    nothing was found), but the model's likeliest failures as hypotheses and a note naming the
    line, so a reader is pointed somewhere instead of nowhere."""
    log = tmp_path / "run.log"
    log.write_text("starting\nFATAL the frobnicator exploded while quuxing\n")
    result = explain([str(log)], _tiny_model(threshold=0.99999))
    data = result.to_dict()
    assert data["findings"] == [] and result.failed is False
    assert [(h["category"], h["source"]) for h in data["hypotheses"]] == [("shared_memory", "model")]
    assert 0 < data["hypotheses"][0]["confidence"] < 0.99999
    assert data["hypotheses"][0]["evidence"][0]["line"] == 2
    assert [n["id"] for n in data["notes"]] == ["explain.unexplained_failure",
                                                 "explain.collect_next"]
    assert f"{log}:2 shows the run failed (FATAL the frobnicator" in data["notes"][0]["text"]
    table = render_table(data)
    assert "No known failure found." in table and "A model's guesses" in table
    assert "1. shared_memory" in table
    assert "## A model's guesses" in render_markdown(data)


def test_a_decisive_signature_keeps_the_root_cause_and_leads_the_hypotheses():
    log = WORLD / "dev" / "c1-003-torchrun-c10d-bind-errno98-29400.log"
    result = explain([str(log)]).to_dict()
    root = result["findings"][0]
    hyps = result["hypotheses"]
    assert root["category"] == "port_in_use" and not root["id"].startswith("model.")
    assert hyps[0]["category"] == "port_in_use" and hyps[0]["source"] == "signature"
    assert 1 <= len(hyps) <= MAX_HYPOTHESES
    assert len({h["category"] for h in hyps}) == len(hyps)
    assert all(0 <= h["confidence"] <= 1 for h in hyps)
    assert [h["confidence"] for h in hyps[1:]] == sorted((h["confidence"] for h in hyps[1:]),
                                                         reverse=True)


@pytest.mark.parametrize("line, signal", [
    ("torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: 0", 9),
    ("Signal 9 (SIGKILL) received by PID 4242", 9),
    ("Process 3 terminated with signal SIGBUS", 7),
    ("mpirun noticed that process rank 1 with PID 77 on node n1 exited on signal 7 (Bus error).", 7),
    ("srun: error: node1: task 0: Exited with exit code 137", 9),
    ("Killed", 9),
    ("/bin/bash: line 1: 4242 Bus error (core dumped) python train.py", 7),
    ("subprocess.CalledProcessError: Command 'x' returned non-zero exit status 134.", 6),
    ("died with <Signals.SIGSEGV: 11>.", 11),
    ("=   KILLED BY SIGNAL: 9 (Killed)", 9),
    # DeepSpeed's launcher (world/dev/c15-004)
    ("[ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'train.py'] exits with "
     "return code = -9", 9),
    ("exits with return code = 1", None),
    ("exited with code 1", None),
    ("rank 9 of 16 joined", None),
])
def test_a_signal_is_read_in_any_of_its_wordings(line, signal):
    assert signal_of(line) == signal


def test_sigkill_in_a_log_that_speaks_of_memory_reads_as_host_memory(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(
        "[INFO] [utils.py:838:see_memory_usage] CPU Virtual Memory:  used = 58.43 GB, percent = 97.6%\n"
        "torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) "
        "local_rank: 0 (pid: 14447) of binary: /usr/bin/python\n")
    root = explain([str(log)], None).to_dict()["findings"][0]
    assert root["id"] == "host.killed_by_sigkill" and root["category"] == "out_of_memory"
    assert root["facts"]["signal_name"] == "SIGKILL" and root["line"] == 2


def test_a_bare_sigkill_stays_a_crash():
    """tests/data/logs/real: a rank killed with kill -9 by the test that recorded the log."""
    log = ROOT / "tests" / "data" / "logs" / "real" / "netns-two-nodes-killed-rank.log"
    root = explain([str(log)], None).to_dict()["findings"][0]
    assert root["category"] == "rank_crashed"


def test_sigbus_in_any_wording_reads_as_shared_memory(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("torch.distributed.elastic.multiprocessing.api: [ERROR] failed "
                   "(exitcode: -7) local_rank: 0 (pid: 1016) of binary: /usr/bin/python3\n")
    root = explain([str(log)], None).to_dict()["findings"][0]
    assert root["id"] == "host.signal_bus_error" and root["category"] == "shared_memory"


def test_the_scanner_keeps_a_files_first_and_last_lines_across_blocks(tmp_path):
    lines = [f"step {i} loss 0.{i}" for i in range(1000)]
    path = tmp_path / "long.log"
    path.write_text("\n".join(lines) + "\n")
    scanner = Scanner(literal_index(), block=512)
    with path.open("rb") as stream:
        list(scanner.lines(stream))
    kept = scanner.edges()
    expected = [(i + 1, lines[i]) for i in range(HEAD_LINES)] + \
               [(i + 1, lines[i]) for i in range(1000 - TAIL_LINES, 1000)]
    assert kept == expected


def test_a_short_file_is_kept_whole(tmp_path):
    path = tmp_path / "short.log"
    path.write_text("a\nb\nc")
    scanner = Scanner(literal_index())
    with path.open("rb") as stream:
        list(scanner.lines(stream))
    assert scanner.edges() == [(1, "a"), (2, "b"), (3, "c")]


# -- training (scikit-learn, the test extra) -------------------------------------------------

def _trainer():
    pytest.importorskip("sklearn")
    sys.path.insert(0, str(SCRIPTS))
    import train_explain_model
    return train_explain_model


def test_the_training_script_refuses_any_log_outside_dev():
    trainer = _trainer()
    for entry in ({"path": "test/c1-001-x.log", "split": "test"},
                  {"path": "dev/../test/c1-001-x.log", "split": "dev"},
                  {"path": "dev/c1-001-x.log", "split": "test"}):
        with pytest.raises(trainer.TestSplitRefused):
            trainer.dev_path(entry)


def test_run_time_reading_equals_scikit_learns_predictions():
    trainer = _trainer()
    rng = random.Random(7)
    vocab = [f"w{i}" for i in range(40)]
    labels = ["", "timeout", "interface", "cuda"]
    bags = [sorted(set(rng.sample(vocab, 8)) | {f"k{labels.index(lab)}"})
            for lab in labels for _ in range(6)]
    y = [lab for lab in labels for _ in range(6)]
    vectorizer, model = trainer.fit(bags, y, 3.0)
    shipped = TextModel.from_dict(json.loads(json.dumps(
        trainer.export(vectorizer, model, 0.5, {}, {}, min_weight=0.0))))
    for bag in bags[:10] + [["w1", "w2", "unseen"]]:
        want = dict(zip(model.classes_, model.predict_proba(vectorizer.transform([bag]))[0]))
        scores = shipped.scores(set(bag))
        top = max(scores)
        total = sum(2.718281828459045 ** (s - top) for s in scores)
        got = {c: 2.718281828459045 ** (s - top) / total for c, s in zip(shipped.classes, scores)}
        assert got == pytest.approx(want, abs=2e-3)


@pytest.mark.exhaustive
def test_the_shipped_model_is_what_the_training_script_makes():
    trainer = _trainer()
    fresh = trainer.train(quiet=True)
    shipped = json.loads(MODEL_FILE.read_bytes())
    assert fresh["classes"] == shipped["classes"]
    assert fresh["threshold"] == shipped["threshold"]
    assert set(fresh["features"]) == set(shipped["features"])


# -- the line reading ------------------------------------------------------------------------

def _two_reader_model(mix: float) -> TextModel:
    """By hand: the run reading leans to timeout; the line reading knows that a line with
    'frobnicator' is shared_memory's deciding line and a line with 'stalled' timeout's."""
    return TextModel.from_dict({
        "classes": [CLEAN, "shared_memory", "timeout"], "bias": [0.0, 0.0, 1.0],
        "threshold": 0.3, "signature_precision": {}, "meta": {}, "mix": mix,
        "features": {"error": [1.0, [[1, 0.5], [2, 0.5]]]},
        "lines": {"classes": [NONE, "shared_memory", "timeout"], "bias": [2.0, -2.0, -2.0],
                  "features": {"frobnicator": [1.0, [[1, 8.0]]], "stalled": [1.0, [[2, 5.0]]],
                               "step": [1.0, [[0, 1.0]]]}}})


def test_the_line_reading_shows_the_deciding_line_and_keeps_a_distribution(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("step 1 ok\nERROR the frobnicator exploded\nstep 2 stalled\nstep 3 ok\n")
    text = explain([str(log)], None).text
    model = _two_reader_model(0.5)
    reading = model.read(text)
    probs = dict(reading.probabilities)
    assert sum(probs.values()) == pytest.approx(1.0)
    assert reading.top[0] == "shared_memory"  # the line reading outweighs the run's lean
    assert reading.evidence["shared_memory"][0].text == "ERROR the frobnicator exploded"
    assert reading.evidence["timeout"][0].text == "step 2 stalled"
    # the mixture, by hand: half the run reading, half each category's likeliest line
    run = dict(zip(model.classes, model.run.probabilities(text.bag())))
    best = {c: max(model.lines.probabilities(set(f))[i] for *_, f in text.lines)
            for i, c in enumerate(model.lines.classes) if c != NONE}
    scale = max(1.0, sum(best.values()))
    assert probs["timeout"] == pytest.approx(0.5 * run["timeout"] + 0.5 * best["timeout"] / scale)
    assert probs[CLEAN] == pytest.approx(0.5 * run[CLEAN] + 0.5 * (1 - sum(best.values()) / scale))
    # without the line reading, the run reading alone decides
    assert _two_reader_model(0.0).read(text).top[0] == "timeout"


def test_the_training_script_reads_every_signature_example():
    trainer = _trainer()
    from ncclcheck.catalogue import load
    examples = trainer.catalogue_examples()
    wanted = [s for s in load().signatures if s.example and not s.warning]
    assert len(examples) == len(wanted) > 100
    assert {label for _, label in examples} <= {c.value for c in Category}


def test_run_time_line_reading_equals_scikit_learns_predictions():
    trainer = _trainer()
    rng = random.Random(11)
    vocab = [f"w{i}" for i in range(30)]
    rows = []
    for n in range(24):
        label = ["timeout", "interface", "cuda", CLEAN][n % 4]
        lines = [(f"line {j}", sorted(rng.sample(vocab, 5))) for j in range(4)]
        if label != CLEAN:
            lines.append((f"decides {label}", sorted(set(rng.sample(vocab, 3)) | {f"k{label}"})))
        rows.append({"label": label, "lines": lines,
                     "deciding": f"decides {label}" if label != CLEAN else ""})
    examples = [(["kcuda", "w1"], "cuda"), (["ktimeout"], "timeout")]
    vectorizer, model = trainer.fit_lines(rows, examples)
    assert set(model.classes_) == {NONE, "timeout", "interface", "cuda"}
    shipped = Linear.from_dict(json.loads(json.dumps(
        trainer.export_linear(vectorizer, model, min_weight=0.0))))
    for _, feats in rows[0]["lines"] + rows[1]["lines"]:
        want = dict(zip(model.classes_, model.predict_proba(vectorizer.transform([feats]))[0]))
        got = dict(zip(shipped.classes, shipped.probabilities(set(feats))))
        assert got == pytest.approx(want, abs=2e-3)
    per_log = trainer.line_reading((vectorizer, model), rows[:2])
    assert per_log[1]["interface"] == pytest.approx(max(
        shipped.probabilities(set(f))[shipped.classes.index("interface")]
        for _, f in rows[1]["lines"]), abs=2e-3)
