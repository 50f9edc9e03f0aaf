"""A log line as the text model reads it: prefixes stripped, volatile tokens masked, words.

Launchers and loggers put their own prefixes before every line (``[rank3]:``, ``(pid=123)``,
``(RayWorker pid=1)``, ``srun:``-style labels, ``host:pid:tid [n]``, timestamps, pod names),
and the message carries numbers, addresses, paths and host names that differ in every run.
None of that says why a run failed, and a model that sees it learns the thread, not the
failure. The prefix is recognised by its shape, not from a list of the prefixes seen: a
bracketed group, a timestamp, a glog severity stamp, or a ``token:`` whose token holds a digit or
is a colon-joined ``host:pid:tid``, or glog's ``file.cpp:123]``.
"""

from __future__ import annotations

import re

MAX_PREFIXES = 10  # prefix groups peeled off one line at most

_BRACKETED = re.compile(r"\s*(?:\[[^\[\]]{0,80}\]|\([^()]{0,80}\)|<[^<>]{0,80}>):?(?:\s+|$)")
_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*"
_STAMP = re.compile(
    r"\s*(?:"
    r"\d[\d/.\-]*[T ]?\d{1,2}:\d\d(?::\d\d)?(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"  # date + time
    r"|\d{1,2}:\d\d:\d\d(?:[.,]\d+)?"                                            # time alone
    r"|\d{4}-\d\d-\d\d"                                                          # date alone
    rf"|(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,?\s+)?{_MONTH}\s+\d{{1,2}}"       # Jun 11
    r"|[A-Z]\d{4}"                                                               # glog I0611
    r"|\d{9,}(?:\.\d+)?"                                                          # epoch
    r")[:,]?(?:\s+|$)")
# ``token:`` at the head of a line: a label, host, pod or process name (holds a digit, or is
# ``host:pid:tid``), never an exception name (``RuntimeError:``) or a plain word (``error:``).
_LABEL = re.compile(r"\s*(?P<token>[^\s:\[\]()]{1,80}(?::[^\s:\[\]()]{1,80}){0,3}):(?:\s+|$)")
# NCCL's ``host:pid:tid`` (no colon after it) and glog's ``file.cpp:123]`` after its stamp.
_PROCESS = re.compile(r"\s*[^\s:\[\]()]{1,80}:\d+:\d+(?:\s+|$)")
_SOURCE = re.compile(r"\s*(?:\d+\s+)?[\w.\-/]+:\d+\](?:\s+|$)")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-fA-F]{12,}\b")
_IPV4 = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b")
_IPV6 = re.compile(r"(?<![\w:])(?:(?:[0-9a-fA-F]{1,4}:){4,7}[0-9a-fA-F]{1,4}|"
                   r"(?:[0-9a-fA-F]{1,4}:)*[0-9a-fA-F]{0,4}::(?:[0-9a-fA-F]{1,4}:)*[0-9a-fA-F]{0,4})"
                   r"(?![\w:])")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DIGITS = re.compile(r"\d+")
MAX_WORD = 30  # longer words are ids and hashes


def strip_prefix(text: str) -> str:
    """``text`` without the launcher and logger prefixes before its message."""
    pos = 0
    for _ in range(MAX_PREFIXES):
        found = (_BRACKETED.match(text, pos) or _STAMP.match(text, pos)
                 or _PROCESS.match(text, pos) or _SOURCE.match(text, pos) or _label(text, pos))
        if found is None or found.end() == pos or found.end() >= len(text.rstrip()):
            break
        pos = found.end()
    return text[pos:].strip()


def _label(text: str, pos: int) -> re.Match[str] | None:
    found = _LABEL.match(text, pos)
    if found is None:
        return None
    token = found.group("token")
    if any(c.isdigit() for c in token) or ":" in token:
        return found
    return None


def words(message: str) -> list[str]:
    """The words of a message, lower case, with addresses and hex masked and digit runs read
    as ``N`` (``eth0`` -> ``ethn``, ``mlx5_0`` -> ``mlxn_n``); numbers alone and long ids drop."""
    message = _HEX.sub(" ", message)
    message = _IPV4.sub(" ipaddr ", message)
    message = _IPV6.sub(" ipaddr ", message)
    out = []
    for word in _WORD.findall(message):
        if len(word) > MAX_WORD:
            continue
        out.append(_DIGITS.sub("n", word.lower()))
    return out


def normalized(line: str) -> str:
    """One line as a key: prefix stripped, words joined (two runs' same message compare equal)."""
    return " ".join(words(strip_prefix(line)))


# A progress bar as tqdm draws it: "Epoch 1:  50%|#####     | 4/8 [00:01<00:01, 3.2it/s, loss=0.3]"
_PROGRESS = re.compile(r"[^\r|]{0,80}?\d{1,3}%\|[^|\r]{0,120}\|[^\[\r]{0,40}\[[^\]\r]{0,200}\]|"
                       r"[^\r|]{0,80}?: *\|[^|\r]{0,120}\| *\d+/\S* *\[[^\]\r]{0,200}\]")
_ESCAPES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def without_progress(text: str) -> str:
    """``text`` without the progress bars and terminal escapes a captured console holds (the
    updates of one bar joined by carriage returns): what is left is what the line says, ""
    for a line that was only a progress bar."""
    if "|" not in text and "\r" not in text and "\x1b" not in text:
        return text
    text = _ESCAPES.sub("", text)
    shown = [part for part in text.split("\r") if part.strip()]  # the terminal's last state
    return _PROGRESS.sub(" ", shown[-1] if shown else "").strip()
