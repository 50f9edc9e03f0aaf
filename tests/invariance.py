"""Does explain's root cause stay put when a log takes another shape? Over the whole corpus.

Every log with a known root cause (the world corpus's failing logs, dev and test, and the
project's own corpus's logs with a root) is explained as it is and after each transformation
(logshapes.py, logtails.py); a move is a root cause whose category differs from the one read
on the original (a different signature id is counted apart). What benchmarks/
explain_invariance.py reports and tests/test_explain_invariance.py bounds.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import logshapes
import logtails
from ncclcheck.explain.engine import explain
from ncclcheck.explain.findings import Finding
from ncclcheck.explain.textmodel import TextModel, load_model

LOGS = Path(__file__).resolve().parent / "data" / "logs"
SPLITS = ("dev", "test", "own")
LAUNCHER_FILE = "launcher.out"  # a per-rank folder gets the launcher's tail as a file of its own


@dataclass(frozen=True)
class Case:
    """One log (a file, or a folder of per-rank files) and the corpus part it belongs to."""

    path: Path
    split: str  # dev | test (world corpus) | own (tests/data/logs/index.toml)
    category: str  # the labelled root cause's category


def _index(path: Path) -> list[dict]:
    return tomllib.loads(path.read_text("utf-8"))["log"]


def cases(split: str = "all") -> list[Case]:
    """Every log with a known root cause, in index order: world dev, world test, own."""
    found = [Case(LOGS / "world" / e["path"], e["split"], e["category"])
             for e in _index(LOGS / "world" / "index.toml") if e["category"]]
    found += [Case(LOGS / e["path"], "own", e["category"])
              for e in _index(LOGS / "index.toml") if e["root"]]
    return [c for c in found if split in ("all", c.split)]


@dataclass(frozen=True)
class Transform:
    """``apply(text, keep, whole)``: one file's text in another shape (``keep``: the 1-based
    lines the root cause was read from, which a cut must leave; ``whole``: every file of the
    case, for what the log as a whole names: a per-rank folder's NCCL version); ``tail`` is set
    for an appended launcher tail, which a per-rank folder gets as a file of its own."""

    name: str
    apply: Callable[[str, Collection[int], str], str]
    tail: str | None = None


def transforms() -> list[Transform]:
    """Every transformation, tails first (the order the figures are printed in)."""
    found = [Transform(f"tail:{name}",
                       lambda text, keep, whole, t=tail: logtails.append_tail(text, t),
                       tail=tail) for name, tail in logtails.load().items()]
    found += [Transform(f"prefix:{style}",
                        lambda text, keep, whole, s=style: logshapes.prefixed(text, s))
              for style in logshapes.PREFIXES]
    found += [
        Transform("interleave", lambda text, keep, whole: logshapes.interleave(
            text, version=logshapes.nccl_version(whole))),
        Transform("fold", lambda text, keep, whole: logshapes.fold_repeats(text)),
        Transform("wrap80", lambda text, keep, whole: logshapes.wrap(text, 80)),
        Transform("cut", lambda text, keep, whole: logshapes.cut_middle(text, keep)),
        Transform("cut-count", lambda text, keep, whole: logshapes.cut_middle(text, keep,
                                                                               count=True)),
    ]
    return found


@dataclass(frozen=True)
class Reading:
    """explain's root cause: its category and signature id ("" when none), and the lines the
    reading rests on, per file name (a cut must leave them)."""

    category: str
    id: str
    lines: dict[str, frozenset[int]] = field(default_factory=dict, compare=False)


def read(path: Path, model: TextModel | None) -> Reading:
    found = explain([str(path)], model)
    findings, root = found.findings, found.root
    if root is None:
        return Reading("", "")
    return Reading(root.signature.category.value, root.signature.id, evidence(path, findings))


def evidence(path: Path, findings: list[Finding]) -> dict[str, frozenset[int]]:
    """The 1-based lines of each file that any finding's signature matches (a duplicate rank
    is two lines, a signature can require another), and the lines the root cause was read
    and inferred from: its own, the context lines its facts name (``line1``,
    ``context_line``), the lines a model's reading weighed most (``evidence``)."""
    lines: dict[str, set[int]] = {}
    root = next(f for f in findings if f.root_cause).first
    read_from = [{"file": root.file, "line": root.line}, root.inferred_from or {}]
    for key, value in root.facts.items():
        if isinstance(value, int) and (key.startswith("line") or key.endswith("_line")):
            read_from.append({"file": root.facts.get(key.replace("line", "file"), root.file),
                              "line": value})
    read_from += [e for e in root.facts.get("evidence", ()) if isinstance(e, dict)]
    for where in read_from:
        if where.get("line"):
            lines.setdefault(Path(where["file"]).name, set()).add(int(where["line"]))
    for source in _files(path):
        text = source.read_bytes().decode("utf-8", "replace")
        for number, line in enumerate(logshapes.split(text), 1):
            if any(f.signature.match(line) is not None for f in findings):
                lines.setdefault(source.name, set()).add(number)
    return {name: frozenset(found) for name, found in lines.items()}


def _files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]


def reshaped(case: Case, transform: Transform, before: Reading, folder: Path) -> Path | None:
    """The case's log in ``transform``'s shape under ``folder`` (file names kept: explain reads
    ranks from them), or None when the transformation leaves it as it was."""
    target = folder / case.path.name
    changed = False
    texts = {source: source.read_bytes().decode("utf-8", "surrogateescape")  # bytes as they are
             for source in _files(case.path)}
    whole = "".join(texts.values())
    for source, text in texts.items():
        out = target / source.relative_to(case.path) if case.path.is_dir() else target
        out.parent.mkdir(parents=True, exist_ok=True)
        if transform.tail is not None and case.path.is_dir():
            new = text
        else:
            new = transform.apply(text, before.lines.get(source.name, frozenset()), whole)
        changed |= new != text
        out.write_bytes(new.encode("utf-8", "surrogateescape"))
    if transform.tail is not None and case.path.is_dir():
        (target / LAUNCHER_FILE).write_text(transform.tail, "utf-8")
        changed = True
    return target if changed else None


@dataclass
class Tally:
    """One transformation's figures over some cases."""

    logs: Counter = field(default_factory=Counter)  # per split
    changed: Counter = field(default_factory=Counter)  # logs the transformation changed
    right: Counter = field(default_factory=Counter)  # logs whose original root cause was right
    moves: list[tuple[Case, Reading, Reading]] = field(default_factory=list)  # category moved
    id_moves: list[tuple[Case, Reading, Reading]] = field(default_factory=list)  # same category


def compare(chosen: Iterable[Case], shapes: list[Transform],
            model: TextModel | None | str = "shipped") -> dict[str, Tally]:
    """Per transformation, how often the root cause moves over ``chosen``. The cases are read
    in one forked process per core (each log and its shapes apart from the others), and
    tallied in their order, as read one by one."""
    reader = load_model() if isinstance(model, str) else model
    cases_list = list(chosen)
    tallies = {t.name: Tally() for t in shapes}
    shared = (cases_list, shapes, reader)
    workers = min(len(cases_list), os.cpu_count() or 1)
    if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                 initializer=_share, initargs=(shared,)) as pool:
            readings = list(pool.map(_readings, range(len(cases_list)), chunksize=8))
    else:
        _share(shared)
        readings = [_readings(index) for index in range(len(cases_list))]
    for case, (before, afters) in zip(cases_list, readings):
        for transform, after in zip(shapes, afters):
            tally = tallies[transform.name]
            tally.logs[case.split] += 1
            tally.right[case.split] += before.category == case.category
            if after is not None:
                tally.changed[case.split] += 1
                if after.category != before.category:
                    tally.moves.append((case, before, after))
                elif after.id != before.id:
                    tally.id_moves.append((case, before, after))
    return tallies


_SHARED: tuple = ()  # a reading process's cases, shapes and model (set once per process)


def _share(shared: tuple) -> None:
    global _SHARED
    _SHARED = shared


def _readings(index: int) -> tuple[Reading, list[Reading | None]]:
    """A case's reading, and its reading in each shape (None where the shape changes nothing)."""
    cases_list, shapes, reader = _SHARED
    case = cases_list[index]
    before = read(case.path, reader)
    afters: list[Reading | None] = []
    with tempfile.TemporaryDirectory(prefix="invariance-") as tmp:
        for transform in shapes:
            folder = Path(tmp) / "log"
            path = reshaped(case, transform, before, folder)
            afters.append(None if path is None else read(path, reader))
            shutil.rmtree(folder, ignore_errors=True)
    return before, afters


def moves_by_split(tally: Tally) -> Counter:
    return Counter(case.split for case, _, _ in tally.moves)


def moves_from_right(tally: Tally) -> int:
    """Moves away from a root cause that was right (the labelled category)."""
    return sum(before.category == case.category for case, before, _ in tally.moves)


def moves_from_nothing(tally: Tally) -> int:
    """Moves from no root cause at all to one (a new line now gives explain something)."""
    return sum(not before.category for _, before, _ in tally.moves)
