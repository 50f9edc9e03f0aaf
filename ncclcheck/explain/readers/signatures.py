"""The catalogue's signatures, line by line: which signature claims a line, and its facts.

The first reader of every line: the others ask who claimed it (a consequence is not read by
the guessers). A message that goes on below its line (torch's "Last error:" echo, an
exception header with its reason on the next line) is matched with the line the scanner names
as its rest (the next one, or in a log several ranks print into, the next of its printer); facts a
torchrun failure block prints above its ``exitcode`` line (time, host, rank) are read there.
"""

from __future__ import annotations

import re
from typing import Any

from ncclcheck.catalogue import LAST_RESORT, Signature
from ncclcheck.explain.excerpt import excerpt
from ncclcheck.explain.findings import Hit
from ncclcheck.explain.lines import LineInfo, stamp_in
from ncclcheck.explain.readers import GATE, Reader
from ncclcheck.explain.run import Line, Run
from ncclcheck.explain.scan import REST_WITHIN, Candidate

# torchrun's failure report puts time, host and rank on the lines before "exitcode".
_BLOCK_FIELD = re.compile(r"^\s*(?P<key>time|host|rank)\s*:\s*(?P<value>\S+)")
_HOST_FACTS = ("node", "hostname")
_RANK_FACTS = ("task",)


def read_line(run: Run, line: Line) -> None:
    if not line.candidate.gated:
        return
    state = run.state.setdefault(("signatures", line.file), {})
    message = line.info.message
    matched = run.matcher.match(message)
    # messages left open, by the scanner's line number: the scanner says which line goes on
    # which (the next line, or past other ranks' lines the next one of the same printer)
    open_headers = state.setdefault("open", {})
    number = line.candidate.number
    if matched is None and line.candidate.rest_of in open_headers:
        matched = run.matcher.match_continued(open_headers[line.candidate.rest_of], message)
    # a message a signature read on its own line is whole: the line below is not its rest
    # (a last resort, an exception no signature knows, may still go on to name its cause)
    if matched is None or matched[0].claim_level == LAST_RESORT:
        open_headers[number] = message
    for gone in [n for n in open_headers if n < number - REST_WITHIN]:
        del open_headers[gone]
    if matched is None:
        return
    sig, facts = matched
    line.claim = matched
    _add_context(sig, facts, line.info, line.candidate)
    hits = run.findings
    hits.add(Hit(sig, facts, line.file, line.number, excerpt(line.text, sig),
                 _rank(line.info, facts, line.file_rank), _host(line.info, facts),
                 line.info.time, hits.hits))


def _add_context(sig: Signature, facts: dict[str, Any], info: LineInfo, cand: Candidate) -> None:
    """Facts printed on lines before the match (torchrun's failure block)."""
    if "exitcode" not in cand.text:
        return
    for text in reversed(cand.before(6)):
        field_match = _BLOCK_FIELD.match(text)
        if field_match is None:
            if text.strip().startswith("[") or "Root Cause" in text or "Failures:" in text:
                break
            continue
        key, value = field_match.group("key"), field_match.group("value")
        if key == "rank" and value.isdigit():
            facts.setdefault("rank", int(value))
        elif key == "host":
            facts.setdefault("hostname", value)
        elif key == "time" and info.time is None:
            info.time = stamp_in(text)


def _rank(info: LineInfo, facts: dict[str, Any], file_rank: int | None) -> int | None:
    if info.rank is not None:
        return info.rank
    for key in ("rank",) + _RANK_FACTS:
        value = facts.get(key)
        if isinstance(value, int):
            return value
    return file_rank


def _host(info: LineInfo, facts: dict[str, Any]) -> str | None:
    if info.host:
        return info.host
    for key in _HOST_FACTS:
        value = facts.get(key)
        if isinstance(value, str):
            return value
    return None


READER = Reader("signatures", 0, line=read_line,
                kinds=GATE)
