"""The catalogue's signatures, line by line: which signature claims a line, and its facts.

The first reader of every line: the others ask who claimed it (a consequence is not read by
the guessers). A message that goes on below its line (torch's "Last error:" echo, an
exception header with its reason on the next line) is matched with the line after it; facts a
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
from ncclcheck.explain.scan import Candidate

# torchrun's failure report puts time, host and rank on the lines before "exitcode".
_BLOCK_FIELD = re.compile(r"^\s*(?P<key>time|host|rank)\s*:\s*(?P<value>\S+)")
_HOST_FACTS = ("node", "hostname")
_RANK_FACTS = ("task",)
CONTINUES_WITHIN = 8  # lines between a message's header and its rest, other ranks' included


def read_line(run: Run, line: Line) -> None:
    if not line.candidate.gated:
        return
    state = run.state.setdefault(("signatures", line.file), {})
    message = line.info.message
    matched = run.matcher.match(message)
    speaker = (line.info.rank, line.info.host)
    if matched is None and line.candidate.continues:
        above = _above(state, speaker, line.number)
        if above is not None:
            matched = run.matcher.match_continued(above, message)
    # a message a signature read on its own line is whole: the line below is not its rest
    # (a last resort, an exception no signature knows, may still go on to name its cause)
    whole = matched is not None and matched[0].claim_level != LAST_RESORT
    headers = state.setdefault("above", {})
    headers[speaker] = None if whole else (message, line.number)
    state["last"] = speaker
    if matched is None:
        return
    sig, facts = matched
    line.claim = matched
    _add_context(sig, facts, line.info, line.candidate)
    hits = run.findings
    hits.add(Hit(sig, facts, line.file, line.number, excerpt(line.text, sig),
                 _rank(line.info, facts, line.file_rank), _host(line.info, facts),
                 line.info.time, hits.hits))


def _above(state: dict[str, Any], speaker: tuple, number: int) -> str | None:
    """The message a continuation line may finish: the last one its own printer (rank, host)
    left open, so that another rank's line printed in between (a combined log of several
    ranks) does not cut it off; for a line that names no printer, the last one left open.
    Only a few lines back: a message goes on directly below its header."""
    headers = state.get("above", {})
    held = headers.get(speaker)
    if held is None and speaker == (None, None):
        held = headers.get(state.get("last"))
    if held is None or number - held[1] > CONTINUES_WITHIN:
        return None
    return held[0]


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
