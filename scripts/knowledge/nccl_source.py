"""Reading NCCL's C++ source for its log calls: every ``WARN("...")``, ``INFO(FLAGS, "...")``,
``TRACE(FLAGS, "...")`` (and the ``INFO_LOC``/``TRACE_LOC``/``TRACE_CALL`` forms) whose format
is a string literal, with the file it sits in and whether it sits in a macro's body.

A small scanner, not a C parser: comments are blanked, the macro's arguments split at the top
level, adjacent string literals joined, ``PRIu64``-style macros turned into their conversion
and any other identifier inside the format (a macro parameter such as ``"Call to " name``)
into ``%s``, the value it stands for being unknown.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

# macro -> index of the format argument, and the level it prints at
CALLS: dict[str, tuple[int, str]] = {
    "WARN": (0, "WARN"), "INFO": (1, "INFO"), "TRACE": (1, "TRACE"), "TRACE_CALL": (0, "CALL"),
    "INFO_LOC": (1, "INFO"), "TRACE_LOC": (1, "TRACE"), "INFO_LOC_FN": (4, "INFO"),
    "TRACE_LOC_FN": (4, "TRACE"),
}


def call_regex(macros: dict[str, tuple[int, str]]) -> re.Pattern[str]:
    """Where a call of one of ``macros`` starts: its name and opening parenthesis."""
    return re.compile(r"\b(" + "|".join(sorted(macros, key=len, reverse=True)) + r")\s*\(")


CALL = call_regex(CALLS)
# INFO_LOC* print their call site first ("%s:%d (%s) " fmt), from 2.2x on
LOC_PREFIX = "%s:%d (%s) "
SOURCE = re.compile(r"^src/.+\.(cc|cu|h|cpp|c|hpp|cuh)$")
PRI = {"PRId64": "ld", "PRIi64": "ld", "PRIu64": "lu", "PRIx64": "lx", "PRIX64": "lX",
       "PRId32": "d", "PRIu32": "u", "PRIx32": "x", "PRIuPTR": "lu", "PRIxPTR": "lx"}
ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "r": "\r", "0": "\0"}


@dataclass(frozen=True)
class Call:
    level: str
    format: str
    flags: str  # INFO/TRACE subsystem flags as written (NCCL_INIT|NCCL_NET), "" for WARN
    in_macro: bool  # inside a #define: printed with the file that uses the macro


def git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True,
                          text=True, check=True, errors="replace").stdout


def source_files(git_dir: Path, tag: str) -> list[str]:
    names = git(git_dir, "ls-tree", "-r", "--name-only", tag, "src").splitlines()
    return [n for n in names if SOURCE.match(n)]


def blank_comments(text: str) -> str:
    """The text with every comment replaced by spaces (newlines kept); strings untouched."""
    out, i, n = list(text), 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out[i:j] = [ch if ch == "\n" else " " for ch in text[i:j]]
            i = j
        else:
            i += 1
    return "".join(out)


def split_args(text: str, start: int) -> list[str] | None:
    """The top-level arguments of the call whose '(' is at ``start``."""
    args, depth, i, begin, n = [], 0, start + 1, start + 1, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                args.append(text[begin:i])
                return args
            depth -= 1
        elif c == "," and depth == 0:
            args.append(text[begin:i])
            begin = i + 1
        i += 1
    return None


TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([A-Za-z_]\w*)|(\\\n))', re.S)


def unescape(body: str) -> str:
    return re.sub(r"\\(x[0-9a-fA-F]{1,2}|.)",
                  lambda m: chr(int(m[1][1:], 16)) if m[1][0] == "x" else ESCAPES.get(m[1], m[1]),
                  body)


def literal(arg: str) -> str | None:
    """The format an argument spells with string literals and macros, None if it is not one."""
    parts, pos, literals = [], 0, 0
    arg = arg.strip()
    while pos < len(arg):
        m = TOKEN.match(arg, pos)
        if not m:
            return None
        if m[1] is not None:
            parts.append(unescape(m[1]))
            literals += 1
        elif m[2] is not None:
            parts.append(PRI.get(m[2], "%s"))
        pos = m.end()
    return "".join(parts) if literals else None


def in_define(text: str, pos: int) -> bool:
    start = text.rfind("\n", 0, pos) + 1
    while start > 1 and text[start - 2] == "\\":
        start = text.rfind("\n", 0, start - 1) + 1
    return text[start:pos].lstrip().startswith("#")


def calls(text: str, macros: dict[str, tuple[int, str]] | None = None) -> list[Call]:
    """The log calls of one source file; ``macros`` (name -> format argument, level) for a
    program logging through macros of its own (a net plugin's), NCCL's by default."""
    clean = blank_comments(text)
    found = []
    macros = macros or CALLS
    pattern = CALL if macros is CALLS else call_regex(macros)
    for m in pattern.finditer(clean):
        index, level = macros[m[1]]
        args = split_args(clean, m.end() - 1)
        if args is None or len(args) <= index:
            continue
        fmt = literal(args[index])
        if fmt is None or not fmt.strip():
            continue
        if m[1].endswith(("_LOC", "_LOC_FN")):
            fmt = LOC_PREFIX + fmt
        flags = "" if index == 0 else re.sub(r"\s+|\(|\)|NCCL_|unsigned long", "", args[0])
        found.append(Call(level, fmt, flags, in_define(clean, m.start())))
    return found
