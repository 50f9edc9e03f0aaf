"""Precedence is declared, never positional.

Which signature claims a line that several match, and which finding is the root cause, come
from the entries' fields (claim level, ``refines``, ``priority``; matcher.py, findings.py),
never from the file an entry sits in or its place there. Here the catalogue's entries are
shuffled within and across files (new files, new names) and every finding must stay the same:
on every log the project has, and on logs made here from the catalogue's examples (mixed,
prefixed and joined in ways no log in the corpus shows).
"""

from __future__ import annotations

import ast
import random
import re
from pathlib import Path

import pytest

from ncclcheck.catalogue import Catalogue, Signature, load, shipped_folder
from ncclcheck.explain import engine, prepared as prepared_module
from ncclcheck.explain.infer import CAUSE_RULES, SETUP_RULES
from ncclcheck.explain.hangs import HANG_RULES
from ncclcheck.explain.readers.throughput import RULE as THROUGHPUT_FELL
from ncclcheck.explain.readers.watchdog_lag import RULE as WATCHDOG_LAG
from ncclcheck.hang.facts import RULES as SNAPSHOT_RULES
from ncclcheck.explain.signals import SIGNAL_RULES
from ncclcheck.explain.matcher import Matcher
from ncclcheck.explain.prepared import prepared

REPO = Path(__file__).resolve().parents[1]
LOGS = REPO / "tests" / "data" / "logs"
EXPLAIN = REPO / "ncclcheck" / "explain"
_ENTRY = re.compile(r"^\[\[signature\]\]$", re.M)
MAX_FILE_LINES = 1500
CATALOGUE = load()


def _entries() -> list[str]:
    """Every [[signature]] entry's text, from every catalogue file."""
    out = []
    for path in sorted(shipped_folder().iterdir(), key=lambda p: p.name):
        text = path.read_text("utf-8")
        starts = [m.start() for m in _ENTRY.finditer(text)] + [len(text)]
        out += [text[a:b].rstrip() + "\n" for a, b in zip(starts, starts[1:])]
    return out


def _permuted(folder: Path, order: list[str], files: int, seed: int) -> Path:
    """The entries in ``order``, dealt into ``files`` files whose names sort in a new order."""
    folder.mkdir()
    rng = random.Random(seed)
    names = [f"{rng.randrange(16**6):06x}_part" for _ in range(files)]
    chunks: dict[str, list[str]] = {name: [] for name in names}
    for index, entry in enumerate(order):
        chunks[names[index % files]].append(entry)
    for name, items in chunks.items():
        (folder / f"{name}.toml").write_text("\n".join(items), "utf-8")
    return folder


def _corpus_logs() -> list[Path]:
    logs = sorted(LOGS.glob("world/*/*.log")) + sorted(LOGS.glob("real/*.log"))
    logs += sorted(LOGS.glob("written/*.log")) + sorted(LOGS.glob("clean/*.log"))
    return logs + sorted(p for p in LOGS.glob("written/*") if p.is_dir())


_PREFIXES = ("", "[rank3]:", "[default2]:", "node7:2211:2290 [3] ", "2026-06-11 11:44:19 ",
             "(RayWorker pid=123) ", "srun: ", "0: ", "[1,2]<stderr>:")


def _made_logs(folder: Path) -> list[Path]:
    """Logs the corpus does not have: each example alone, examples mixed behind launcher
    prefixes, and pairs of examples joined into one line (overlaps no real log shows)."""
    rng = random.Random(21)
    examples = [sig.example for sig in CATALOGUE.signatures]
    texts = [example + "\n" for example in examples]
    for _ in range(150):
        lines = [rng.choice(_PREFIXES) + rng.choice(examples)
                 for _ in range(rng.randint(2, 7))]
        texts.append("\n".join(lines) + "\n")
    for _ in range(200):
        first, second = rng.sample(examples, 2)
        texts.append(f"{rng.choice(_PREFIXES)}{first} | {second}\n")
    folder.mkdir()
    paths = []
    for index, text in enumerate(texts):
        path = folder / f"made-{index:04d}.log"
        path.write_text(text, "utf-8")
        paths.append(path)
    return paths


def _explained(logs: list[Path], catalogue: Catalogue | None = None) -> list[dict]:
    return [engine.explain([str(log)], catalogue=catalogue).to_dict() for log in logs]


@pytest.mark.slow  # the whole corpus read twice over (15 s): in the full suite, not the quick loop
def test_shuffling_the_catalogue_changes_no_finding(tmp_path):
    logs = _corpus_logs() + _made_logs(tmp_path / "made")
    assert len(logs) > 1000
    before = _explained(logs)
    assert sum(bool(e["findings"]) for e in before) > 800  # the logs do give findings
    entries = _entries()
    assert len(entries) == len(CATALOGUE.signatures)
    rng = random.Random(7)
    shuffled = entries[:]
    rng.shuffle(shuffled)
    for seed, (order, files) in enumerate([(entries[::-1], 1), (shuffled, 5)]):
        permuted = load(_permuted(tmp_path / f"permuted{seed}", order, files, seed))
        assert [s.id for s in permuted.signatures] != [e.split('"')[1] for e in entries]
        after = _explained(logs, permuted)
        moved = [(str(log), [f["id"] for f in a["findings"]], [f["id"] for f in b["findings"]])
                 for log, a, b in zip(logs, before, after) if a != b]
        assert not moved, moved[:5]


class _Recording(Matcher):
    """A matcher that keeps every message it was asked about."""

    seen: set[str] = set()

    def match(self, message):
        _Recording.seen.add(message)
        return super().match(message)


def test_every_overlap_the_corpus_and_the_examples_show_is_declared(monkeypatch, tmp_path):
    """Where two signatures of one claim level both match a line and neither refines the other,
    their priorities must differ: the catalogue says which wins, the id does not have to."""
    _Recording.seen = set()
    monkeypatch.setattr(prepared_module, "Matcher", _Recording)
    _explained(_corpus_logs() + _made_logs(tmp_path / "made")[:len(CATALOGUE.signatures)])
    matcher = prepared().matcher()
    undeclared = []
    for message in sorted(_Recording.seen):
        found = matcher.claimants(message)
        refined = {r for index, _ in found for r in matcher._refines[index]}
        standing = [matcher.signatures[i] for i, _ in found
                    if matcher.signatures[i].id not in refined]
        if len(standing) > 1 and standing[0].priority == standing[1].priority:
            undeclared.append((standing[0].id, standing[1].id, message[:160]))
    assert len(_Recording.seen) > 1000
    assert not undeclared, undeclared


def test_a_refining_signature_claims_the_line_in_either_order():
    specific = CATALOGUE.signature("nccl.cuda_out_of_memory")
    general = CATALOGUE.signature("nccl.cuda_failure")
    assert general.id in specific.refines and specific.priority <= 100
    line = "include/alloc.h:185 NCCL WARN Cuda failure 'out of memory'"
    for order in ([specific, general], [general, specific]):
        assert prepared().matcher(order).match(line)[0].id == specific.id
    # ... and a chain of refinements holds through a signature left out of the matcher.
    assert prepared().matcher([general]).match(line)[0].id == general.id


def test_levels_come_before_everything_else():
    broad = [s for s in CATALOGUE.signatures if s.broad]
    last = [s for s in CATALOGUE.signatures if s.last_resort]
    assert broad and {s.id for s in last} == {"python.exception_about_ranks",
                                              "python.uncaught_exception"}
    # A specific signature of the lowest priority beats the catch-all of a higher one.
    line = "RuntimeError: Address already in use"
    low = CATALOGUE.signature("python.address_in_use")
    catch_all = CATALOGUE.signature("python.uncaught_exception")
    assert prepared().matcher([catch_all, low]).match(line)[0].id == low.id


def test_every_rule_of_infer_is_declared_by_one_signature():
    declared = [s.rule for s in CATALOGUE.inferred_signatures if s.rule]
    assert sorted(declared) == sorted(set(declared))
    assert set(declared) == (set(SETUP_RULES) | set(CAUSE_RULES) | set(SIGNAL_RULES)
                             | set(HANG_RULES.values()) | {WATCHDOG_LAG, THROUGHPUT_FELL}
                             | set(SNAPSHOT_RULES.values()))
    assert not [s.id for s in CATALOGUE.signatures if s.rule and not s.inferred]


def test_explains_code_names_no_signature_by_its_id():
    """Rules and tiers reach signatures through declared fields, never an id written in code."""
    ids = set(CATALOGUE.by_id)
    found = []
    for path in sorted(EXPLAIN.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Constant) and node.value in ids:
                found.append(f"{path.name}:{node.lineno}: {node.value}")
    assert not found


def test_catalogue_files_are_small_and_list_their_entries_by_id():
    files = sorted(shipped_folder().iterdir(), key=lambda p: p.name)
    assert len(files) >= 6
    for path in files:
        text = path.read_text("utf-8")
        assert text.count("\n") <= MAX_FILE_LINES, path.name
        ids = re.findall(r'^id = "([^"]+)"', text, re.M)
        assert ids == sorted(ids), f"{path.name}: entries out of id order"


@pytest.mark.parametrize("entry, error", [
    ('refines = ["no.such_signature"]', "does not have"),
    ('refines = ["test.b"]', "refines itself"),
    ("sometimes = true", "unknown field"),
    ('rule = "versions_differ"', "only an inferred signature"),
    ("broad = true\nlast_resort = true", "two different levels"),
])
def test_a_catalogue_that_cannot_be_read_one_way_is_refused(tmp_path, entry, error):
    body = ('[[signature]]\nid = "test.{id}"\ncategory = "other"\ntitle = "t"\n{extra}\n'
            'patterns = ["some literal text {id}"]\nmeaning = "m"\nfix = "f"\n'
            'example = "some literal text {id}"\n')
    (tmp_path / "a.toml").write_text(
        body.format(id="a", extra=entry) + "\n"
        + body.format(id="b", extra='refines = ["test.a"]' if "test.b" in entry else ""))
    with pytest.raises(ValueError, match=error):
        load(tmp_path)


def test_a_signature_is_the_same_object_wherever_it_is_read_from():
    sig = CATALOGUE.signature("nccl.invalid_rank")
    assert isinstance(sig, Signature) and sig in CATALOGUE.line_signatures
    assert sig.id in CATALOGUE.files["nccl_setup"] and load().signature(sig.id) is sig
