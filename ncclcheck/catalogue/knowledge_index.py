"""The knowledge tables (``knowledge/*.json``) read and indexed for looking lines up.

The tables are generated from the software's own enumerations and messages (errno and
getaddrinfo codes, CUDA, NCCL and ibverbs error codes, NCCL's log formats, torch's and
Lightning's messages; see scripts/knowledge/). Reading them costs a few tens of milliseconds, so
nothing is read at import: ``table()`` reads one table on first use and ``index()`` builds, once,
what makes a lookup cheap: a dict of exact names, and for every text, message or format one
*anchor*, its rarest word, so that a line is matched only against the entries whose anchor is
among its words. No regular expression of an entry is compiled until a line reaches it.

Choosing the anchors reads every entry's words and took most of that time, so they are
chosen once, when the tables change, and kept in ``knowledge_index.json`` (written by
``scripts/compile_catalogue.py``, with a digest of the tables; a test fails while it is stale,
and a run that finds it stale chooses them again itself). An entry is made a ``Candidate`` when
a line first holds its anchor, so a start reads only the tables a log's lines need.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Mapping

from ncclcheck.catalogue.compiled import FOLDER, digest

TABLES = ("errno", "eai", "cuda", "nccl_result", "ibverbs", "nccl_formats", "net_plugin_formats",
          "torch", "lightning")
FORMATS = ("nccl_formats", "net_plugin_formats")  # printf formats printed through NCCL's logger
KNOWLEDGE_DIR = "knowledge"  # under ncclcheck/catalogue/: one <table>.json per table
COMPILED_INDEX = "knowledge_index.json"  # under ncclcheck/catalogue/: the anchors chosen
NAMED = ("errno", "eai", "cuda", "nccl_result", "ibverbs")  # entries with a `name`
# printf conversions (NCCL, Gloo) and {} / {name} fields (fmt, f-strings, str.format)
CONVERSION = re.compile(r"%[-+ #0']*(\*|\d+)?(?:\.(\*|\d+))?(hh|h|ll|l|L|z|j|t|q)?"
                        r"([diouxXeEfFgGaAcspn%])")
PLACEHOLDER = re.compile(CONVERSION.pattern + r"|\{[^{}]*\}")
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
# A short text says what it means only beside these words (lower case, any of them).
CONTEXT: dict[str, tuple[str, ...]] = {
    "cuda": ("cuda",),
    "nccl_result": ("nccl",),
    "ibverbs": ("net/ib", "ibv", "verbs", "rdma", "mlx", "completion", "async event",
                "infiniband"),
}
MIN_LITERAL = 8  # a text with fewer literal characters is matched by its name only
MIN_FORMAT = 3  # an NCCL format with fewer ("%s: %s") says nothing of its own
LOC_PREFIX = "%s:%d (%s) "  # what INFO_LOC puts before its format: says nothing either
WILDCARD = {"d": r"-?\d+", "i": r"-?\d+", "u": r"\d+", "o": r"[0-7]+", "x": r"[0-9a-fA-F]+",
            "X": r"[0-9a-fA-F]+", "c": r".", "s": r".*?", "p": r"(?:0x[0-9a-fA-F]+|\(nil\))",
            "n": "", "%": "%"}
FLOAT = r"[-+]?(?:[\d.]+(?:[eE][-+]?\d+)?|inf|nan)"


@lru_cache(maxsize=None)
def table(name: str) -> Mapping[str, Any]:
    """One table as committed: its header and ``entries`` (nccl_formats' rows as dicts)."""
    if name not in TABLES:
        raise KeyError(f"no knowledge table {name!r}; the tables are {', '.join(TABLES)}")
    path = FOLDER / KNOWLEDGE_DIR / f"{name}.json"
    data = json.loads(path.read_text("utf-8"))
    if "columns" in data:
        data["entries"] = [dict(zip(data["columns"], row)) for row in data["entries"]]
    return MappingProxyType(data)


def format_regex(fmt: str) -> str:
    """An NCCL format's first printed line as a regular expression over a line's message:
    each printf conversion becomes a wildcard of what it prints, the rest is literal."""
    first = next((part for part in fmt.split("\n") if part.strip()), "")
    out, pos = [], 0
    for m in CONVERSION.finditer(first):
        out.append(re.escape(first[pos:m.start()]))
        out.append(WILDCARD.get(m[4], FLOAT))
        pos = m.end()
    out.append(re.escape(first[pos:]))
    return "^" + "".join(out).replace(r"\ ", " ")


def telling_line(template: str, first: bool = False) -> str:
    """The line of a multi-line template a log line can show: the first (an NCCL format, as
    its regex does; a message, as an exception's line shows it), or for a message whose first
    line says too little, the one with the most literal text."""
    lines = [ln for ln in template.split("\n") if ln.strip()] or [""]
    if first or len(PLACEHOLDER.sub("", lines[0]).strip()) >= MIN_LITERAL:
        return lines[0]
    return max(lines, key=lambda ln: len(PLACEHOLDER.sub("", ln)))


def chunks(line: str) -> tuple[str, ...]:
    """The literal pieces of one template line, lower case, in order."""
    return tuple(p.strip().lower() for p in PLACEHOLDER.split(line)[::5] if p and p.strip())


@dataclass(eq=False)
class Candidate:
    """One entry that a line holding its anchor word may match."""

    table: str
    entry: Mapping[str, Any]
    key: str  # the text, message or format matched
    line: str  # the line of it that is matched
    pieces: tuple[str, ...]
    literal: int  # literal characters: the more, the more specific
    context: tuple[str, ...] = ()
    level: str | None = None  # an NCCL format's level
    compiled: re.Pattern[str] | None = field(default=None, repr=False)

    def matches(self, low: str, message: str | None = None) -> bool:
        """Whether the line (lower case) holds the pieces in order; an NCCL format must also
        match the line's message (original case) from its start."""
        if self.context and not any(word in low for word in self.context):
            return False
        pos = 0
        for piece in self.pieces:
            pos = low.find(piece, pos)
            if pos < 0:
                return False
            pos += len(piece)
        if self.level is None:
            return True
        if message is None:
            return False
        if self.compiled is None:
            self.compiled = re.compile(format_regex(self.key))
        return self.compiled.match(message) is not None


@dataclass(frozen=True)
class Index:
    names: Mapping[str, tuple[tuple[str, str, Mapping[str, Any]], ...]]  # lower -> (name, ...)
    anchors: Mapping[str, Mapping[str, tuple[int, ...]]]  # "text"/NCCL level -> word -> entries
    bare: Mapping[str, tuple[int, ...]]  # NCCL level -> formats with no word to anchor on
    by_number: Mapping[tuple[str, int], Mapping[str, Any]]  # (table[:kind], number) -> entry
    files: Mapping[str, str]  # NCCL source file -> category
    file_rules: tuple[tuple[str, str], ...]  # (path pattern, category) for a file not listed
    folders: Mapping[str, str]  # NCCL source folder whose files agree -> category
    tags: Mapping[str, str]  # NCCL message tag ("NET/IB") -> category
    entries: tuple[tuple[str, int], ...]  # what anchors and bare number: (table, entry's place)
    _made: dict[int, Candidate] = field(default_factory=dict, repr=False, compare=False)

    @property
    def made(self) -> int:
        """How many entries were made candidates so far (a line makes those of its anchors)."""
        return len(self._made)

    def candidates(self, numbers: tuple[int, ...]) -> list[Candidate]:
        """The candidates of these entries, each made on first use and kept."""
        made = self._made
        found = []
        for n in numbers:
            c = made.get(n)
            if c is None:
                name, place = self.entries[n]
                c = made[n] = _candidate(name, table(name)["entries"][place])
            found.append(c)
        return found


def _words(piece: str, first: bool, last: bool) -> list[str]:
    """The whole words of a literal piece (a word cut by a placeholder is not whole)."""
    words = WORD.findall(piece)
    if words and not first and piece[:1].isalnum():
        words = words[1:]
    if words and not last and piece[-1:].isalnum():
        words = words[:-1]
    return [w.lower() for w in words]


def _candidate(name: str, entry: Mapping[str, Any]) -> Candidate:
    """What a line is matched against for one entry of table ``name``."""
    if name in NAMED:
        text = entry["text"]
        if name == "nccl_result":
            text = text.split(" (")[0]
        return Candidate(name, entry, text, text, (text.lower(),), len(text),
                         CONTEXT.get(name, ()))
    if name in FORMATS:
        line = telling_line(entry["format"], first=True)
        pieces = chunks(line)
        return Candidate(name, entry, entry["format"], line, pieces, sum(map(len, pieces)),
                         level=entry["level"])
    line = telling_line(entry["message"])
    pieces = chunks(line)
    return Candidate(name, entry, entry["message"], line, pieces, sum(map(len, pieces)))


def _text_candidates() -> list[tuple[tuple[str, int], Candidate]]:
    """Every entry a line may match by its text, with its table and place in it."""
    found = []
    for name in NAMED + ("torch", "lightning") + FORMATS:
        for place, entry in enumerate(table(name)["entries"]):
            if name in NAMED and (entry.get("ok") or not entry.get("text")):
                continue
            found.append(((name, place), _candidate(name, entry)))
    return [(where, c) for where, c in found
            if c.literal >= (MIN_FORMAT if c.level else MIN_LITERAL)
            and (c.level is None or len(chunks(c.line.removeprefix(LOC_PREFIX))) > 0)]


def _anchor_words(candidate: Candidate) -> list[str]:
    pieces = PLACEHOLDER.split(candidate.line)[::5]
    return [w for i, p in enumerate(pieces) for w in _words(p, i == 0, i == len(pieces) - 1)]


def choose_anchors() -> dict[str, Any]:
    """Every text entry's anchor, its rarest whole word (what knowledge_index.json holds):
    ``entries`` as (table, place), ``anchors`` level -> word -> entry numbers, ``bare`` level
    -> the NCCL formats without a word."""
    candidates = _text_candidates()
    words = [set(_anchor_words(c)) for _, c in candidates]
    frequency = Counter(w for ws in words for w in ws)
    anchors: dict[str, dict[str, list[int]]] = {}
    bare: dict[str, list[int]] = {}
    for n, ((_, c), found) in enumerate(zip(candidates, words)):
        if found:
            anchor = min(found, key=lambda w: (frequency[w], -len(w), w))
            anchors.setdefault(c.level or "text", {}).setdefault(anchor, []).append(n)
        elif c.level is not None:
            bare.setdefault(c.level, []).append(n)
    return {"entries": [list(where) for where, _ in candidates], "anchors": anchors,
            "bare": bare}


def tables_digest() -> str:
    """The digest of the knowledge tables as they are now (what the anchors were chosen from)."""
    folder = FOLDER / KNOWLEDGE_DIR
    return digest((name, (folder / f"{name}.json").read_bytes()) for name in TABLES)


def compiled_anchors() -> dict[str, Any]:
    """What knowledge_index.json holds for the tables as they are now."""
    return {"digest": tables_digest(), "generated_by": "python scripts/compile_catalogue.py",
            **choose_anchors()}


def _anchors() -> Mapping[str, Any]:
    """The committed anchors while they were chosen from these tables, else chosen now."""
    try:
        data = json.loads((FOLDER / COMPILED_INDEX).read_bytes())
    except FileNotFoundError:
        data = {}
    return data if data.get("digest") == tables_digest() else choose_anchors()


@lru_cache(maxsize=None)
def index() -> Index:
    names: dict[str, list[tuple[str, str, Mapping[str, Any]]]] = {}
    by_number: dict[tuple[str, int], Mapping[str, Any]] = {}
    for name in NAMED:
        for entry in table(name)["entries"]:
            kind = f"{name}:{entry.get('kind') or entry.get('api') or ''}".rstrip(":")
            by_number.setdefault((kind, entry["number"]), entry)
            if not entry.get("ok"):
                names.setdefault(entry["name"].lower(), []).append((entry["name"], name, entry))
    chosen = _anchors()
    formats = table("nccl_formats")
    folders: dict[str, set[str]] = {}
    for path, category in formats["files"].items():
        folders.setdefault(path.rpartition("/")[0], set()).add(category)
    return Index(MappingProxyType({k: tuple(v) for k, v in names.items()}),
                 MappingProxyType({level: MappingProxyType({k: tuple(v) for k, v in found.items()})
                                   for level, found in chosen["anchors"].items()}),
                 MappingProxyType({k: tuple(v) for k, v in chosen["bare"].items()}),
                 MappingProxyType(by_number), formats["files"],
                 tuple((p, c) for p, c in formats["file_rules"]),
                 MappingProxyType({k: next(iter(v)) for k, v in folders.items()
                                   if k and len(v) == 1}), formats["tags"],
                 tuple((name, place) for name, place in chosen["entries"]))
