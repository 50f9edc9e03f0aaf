"""What the software's own enumerations say about one log line.

A line from a run nobody here has seen often still names what failed: an errno name or its
strerror text, a getaddrinfo error, a CUDA error name or string, an NCCL result text, an ibverbs
work-completion status, an NCCL log line whose printed source file (``transport/net_ib.cc:123``)
or format says which subsystem speaks, or a torch / Lightning message. The tables behind this
(``knowledge/*.json``) are generated from that software (scripts/knowledge/), complete, each
entry with a category of the taxonomy; this module only looks lines up in them.

``lookup(line)`` returns every hit, most specific first: an NCCL format matched on an NCCL line,
an exact name (``ECONNREFUSED``, ``cudaErrorMemoryAllocation``, ``IBV_WC_RETRY_EXC_ERR``), a
number in its context (``[Errno 111]``, ``errno: 98``, ``status=12`` of a completion, NCCL's
``-> 2``), a text, then NCCL's file and message tag. A line that holds no word of any table
costs one word scan and two set intersections.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

from ncclcheck.catalogue.knowledge_index import (CONVERSION, NAMED, TABLES, WORD, Candidate,
                                                 Index, format_regex, index, table)

__all__ = ["CONVERSION", "TABLES", "Hit", "NcclLine", "best", "format_regex", "lookup",
           "parse_nccl", "quoted", "quotes_no_failure", "table"]

HOW = ("format", "name", "number", "text", "file", "tag")  # most specific first
SOURCE = r"[\w./+-]+\.(?:cc|cu|h|cpp|c|hpp|cuh)"
NCCL_LINE = re.compile(rf"(?:(?P<file>{SOURCE}):(?P<line>\d+) (?:\((?P<func>[^)\s]*)\) )?\W{{0,4}})?"
                       r"NCCL (?P<level>WARN|INFO|TRACE|CALL)\b ?(?P<msg>.*)")
LOC = re.compile(rf"(?P<file>{SOURCE}):(?P<line>\d+)\b")
TAG = re.compile(r"([A-Z]\w*(?:/\w+)*)\s?:\s")
NUMBERS = re.compile(r"\[Errno (?P<py>-?\d+)\]|\berrno\s*[:=]?\s*(?P<errno>\d+)|"
                     r"gai error:?\s*(?P<gai>-?\d+)|(?:\bstatus=|with error )(?P<wc>\d+)|"
                     r"(?:Cuda failure|CUDA error|cuda error)\s*:?\s*(?P<cuda>\d+)", re.I)
NUMBER_GATE = re.compile(r"rrno|gai error|status=|with error |uda failure|uda error|UDA error")
RESULT = re.compile(r"-> (\d+)(?: \(|$| \[)")


@dataclass(frozen=True)
class Hit:
    """One table entry a line matched."""

    table: str  # errno, eai, cuda, nccl_result, ibverbs, nccl_formats, net_plugin_formats, ...
    key: str  # the name, text, message or NCCL format matched (for file/tag: the file or tag)
    category: str
    component: str  # nccl, glibc, cuda, torch, gloo, ibverbs, lightning
    how: str  # format, name, number, text, file or tag
    entry: Mapping[str, Any]  # the table's entry (for file/tag: {"file"/"tag": ..., ...})
    level: str | None = None  # on an NCCL line: WARN, INFO, TRACE or CALL
    file: str | None = None  # on an NCCL line: the source file it names

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "key": self.key, "category": self.category,
                "component": self.component, "how": self.how, "level": self.level,
                "file": self.file}


@dataclass(frozen=True)
class NcclLine:
    """An NCCL log line's parts: ``host:pid:tid [dev] file:line [(func)] NCCL WARN message``."""

    level: str
    message: str
    file: str | None  # src/-relative, from the WARN prefix or an INFO_LOC message
    line: int | None
    function: str | None


def _source(path: str) -> str:
    return path.rpartition("src/")[2] if "src/" in path else path.lstrip("./")


def parse_nccl(line: str) -> NcclLine | None:
    """The parts of an NCCL log line; None when the line is not one."""
    if "NCCL " not in line:
        return None
    m = NCCL_LINE.search(line)
    if m is None:
        return None
    message = m["msg"].rstrip()
    file, number, func = m["file"], m["line"], m["func"]
    if file is None and (loc := LOC.match(message)):
        file, number = loc["file"], loc["line"]
    return NcclLine(m["level"], message, _source(file) if file else None,
                    int(number) if number else None, func)


def _component(name: str, entry: Mapping[str, Any]) -> str:
    return entry.get("component") or table(name)["component"]


def _category(name: str, entry: Mapping[str, Any], low: str) -> str:
    for category, words in (entry.get("context") or {}).items():
        if any(word.lower() in low for word in words):
            return category
    return entry["category"]


def _hit(name: str, key: str, entry: Mapping[str, Any], how: str, low: str,
         nccl: NcclLine | None, category: str | None = None) -> Hit:
    return Hit(name, key, category or _category(name, entry, low), _component(name, entry), how,
               entry, nccl.level if nccl else None, nccl.file if nccl else None)


def _macro_category(entry: Mapping[str, Any], nccl: NcclLine | None, idx: Index) -> str | None:
    """A format of a checks.h macro is printed with the file that uses the macro: that file's
    subsystem says more than the macro's words, unless it says nothing (other)."""
    if not entry.get("macro") or nccl is None or nccl.file is None:
        return None
    category = _file_category(nccl.file, idx, by_folder=False)
    return category if category and category != "other" else None


def _numbers(line: str, low: str, nccl: NcclLine | None, idx: Index) -> list[Hit]:
    found = []
    keys: list[tuple[str, int]] = []
    if NUMBER_GATE.search(line):
        for m in NUMBERS.finditer(line):
            if m["py"] is not None:
                n = int(m["py"])
                keys.append(("errno", n) if n >= 0 else ("eai", n))
            elif m["errno"] is not None:
                keys.append(("errno", int(m["errno"])))
            elif m["gai"] is not None:
                keys.append(("eai", int(m["gai"])))
            elif m["wc"] is not None and "completion" in low:
                keys.append(("ibverbs:wc_status", int(m["wc"])))
            elif m["cuda"] is not None:
                keys.append(("cuda:runtime", int(m["cuda"])))
    if nccl is not None and (m := RESULT.search(nccl.message)) and int(m[1]) > 0:
        keys.append(("nccl_result", int(m[1])))
    for key in keys:
        entry = idx.by_number.get(key)
        if entry is not None and not entry.get("ok"):
            name = key[0].split(":")[0]
            found.append(_hit(name, entry["name"], entry, "number", low, nccl))
    return found


def _candidates(words: list[str], idx: Index) -> list[Candidate]:
    text = idx.anchors["text"]
    return [c for w in text.keys() & words for c in idx.candidates(text[w])]


@lru_cache(maxsize=8192)
def _formats(level: str, message: str) -> tuple[Candidate, ...]:
    """The NCCL formats of this level that a message matches; NCCL repeats its messages
    (each rank, each channel), so a message is matched once."""
    idx = index()
    formats = idx.anchors.get(level, {})
    low = message.lower()
    words = WORD.findall(low)
    found = [c for w in formats.keys() & words for c in idx.candidates(formats[w])]
    found.extend(idx.candidates(idx.bare.get(level, ())))
    return tuple(c for c in found if c.matches(low, message))


def _file_category(file: str, idx: Index, by_folder: bool = True) -> str | None:
    """The category NCCL's source ``file`` (src/-relative) is filed under, by its subsystem;
    ``by_folder``: a file the table does not list takes its folder's category."""
    return (idx.files.get(file) or next((c for p, c in idx.file_rules if re.search(p, file)), None)
            or (idx.folders.get(file.rpartition("/")[0]) if by_folder else None))


def named_by_its_words(hit: Hit) -> bool:
    """Whether an NCCL format's category comes from its own words, not from the file that
    prints it: "Duplicate GPU detected" in init.cc (a file of no subsystem), "Address already
    in use" in a socket file. Such a message names a failure; one filed by its file alone
    ("NET/IB : No device found", in net_ib.cc) names where it was printed."""
    if hit.table != "nccl_formats" or hit.how != "format":
        return False
    file = hit.entry.get("file")
    return bool(file) and hit.category != _file_category(file, index())


def _nccl_origin(nccl: NcclLine, idx: Index, low: str) -> list[Hit]:
    found = []
    if nccl.file is not None:
        category = _file_category(nccl.file, idx)
        if category is not None:
            found.append(Hit("nccl_formats", nccl.file, category, "nccl", "file",
                             {"file": nccl.file}, nccl.level, nccl.file))
    message = LOC.sub("", nccl.message, count=1).lstrip(" (") if nccl.file else nccl.message
    if (m := TAG.match(message)) and m[1] in idx.tags:
        found.append(Hit("nccl_formats", m[1], idx.tags[m[1]], "nccl", "tag", {"tag": m[1]},
                         nccl.level, nccl.file))
    return found


def lookup(line: str, nccl_level: str | None = None) -> list[Hit]:
    """Everything the tables say about one log line, most specific first (see HOW); [] when
    they say nothing. ``nccl_level``: the line is known to be an NCCL message of that level
    though it carries no NCCL prefix (torch's "Last error:" echo of NCCL's last warning)."""
    idx = index()
    low = line.lower()
    words = WORD.findall(low)
    nccl = parse_nccl(line)
    if nccl is None and nccl_level is not None:
        nccl = NcclLine(nccl_level, line.strip(), None, None, None)
    named = idx.names.keys() & words
    candidates = _candidates(words, idx)
    if not (named or candidates or nccl or NUMBER_GATE.search(line)):
        return []
    hits: list[tuple[int, int, Hit]] = []
    for word in named:
        for name, table_name, entry in idx.names[word]:
            if name in line:
                hits.append((HOW.index("name"), -len(name),
                             _hit(table_name, name, entry, "name", low, nccl)))
    for hit in _numbers(line, low, nccl, idx):
        hits.append((HOW.index("number"), 0, hit))
    matched = [c for c in candidates if c.matches(low)]
    if nccl is not None:
        matched.extend(_formats(nccl.level, nccl.message))
    for c in matched:
        how = "format" if c.level is not None else "text"
        same_file = nccl is not None and c.entry.get("file") == nccl.file
        rank = c.literal + (2000 if same_file else 0) + (1000 if c.entry.get("macro") else 0)
        hits.append((HOW.index(how), -rank, _hit(c.table, c.key, c.entry, how, low, nccl,
                                                 _macro_category(c.entry, nccl, idx))))
    if nccl is not None:
        hits.extend((HOW.index(h.how), 0, h) for h in _nccl_origin(nccl, idx, low))
    hits.sort(key=lambda t: (t[0], t[1]))
    seen: set[tuple[str, str, str]] = set()
    found = [hit for _, _, hit in hits
             if (hit.table, hit.key, hit.how) not in seen
             and not seen.add((hit.table, hit.key, hit.how))]
    return _quoted_first(found)


# What a quoted error of an enumeration says beyond "a call of that library failed".
_BROAD = frozenset({"cuda", "other", "ok"})


def _quoted_first(hits: list[Hit]) -> list[Hit]:
    """A format of a checks.h macro ("Cuda failure %d '%s'") says only that a call failed,
    in the subsystem of the file that printed it. A CUDA error it quotes that names a failure
    of its own ('out of memory', 'peer access is not supported') says what, whichever file
    printed it; one that says no more ('invalid argument') leaves the file's subsystem first,
    as does a system call's errno in a subsystem's file (ibv_modify_qp timing out is the
    verbs transport's). Where the macro's file says nothing, the error it quotes speaks."""
    if not hits or not (hits[0].how == "format" and hits[0].entry.get("macro")):
        return hits
    macro_says = hits[0].category not in _BROAD
    quoted_error = next((h for h in hits if h.table in NAMED and h.category not in _BROAD
                         and h.table != "nccl_result"
                         and (h.table == "cuda" or not macro_says)), None)
    if quoted_error is None:
        return hits
    return [quoted_error, *(h for h in hits if h is not quoted_error)]


def best(line: str) -> Hit | None:
    """The most specific hit, or None."""
    hits = lookup(line)
    return hits[0] if hits else None


@lru_cache(maxsize=4096)  # ranks repeat their messages: one lookup per distinct line
def quoted(line: str, table_name: str) -> Hit | None:
    """The most specific entry of the table ``table_name`` the line holds (a message that
    quotes a CUDA error: the error's own entry, not the file or format that printed it)."""
    return next((hit for hit in lookup(line) if hit.table == table_name), None)


@lru_cache(maxsize=None)
def _no_failures(table_name: str) -> tuple[str, ...]:
    """The texts of the entries ``table_name`` files as no failure (ok), lower case; the
    index leaves them out, a line that holds one being no failure."""
    return tuple(e["text"].lower() for e in table(table_name)["entries"]
                 if e.get("ok") and e.get("text"))


def quotes_no_failure(line: str, table_name: str) -> bool:
    """Whether ``line`` quotes an entry of ``table_name`` filed as no failure (a verbs event
    such as a GID table change) and none filed as a failure."""
    low = line.lower()
    return (any(text in low for text in _no_failures(table_name))
            and quoted(line, table_name) is None)
