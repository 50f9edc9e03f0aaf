"""How wide the human-readable output may be: the one width every table renderer follows.

$COLUMNS when it holds a positive whole number, else the terminal's width when standard output
is one; else None, and each renderer keeps its own fixed layout, so output piped into a file,
a CI log or the docs' examples is the same byte for byte whatever the terminal it ran from.
A width below ``MIN_WIDTH`` is raised to it: tables need room for a check id and some words.
"""

from __future__ import annotations

import os
import sys
import textwrap
from typing import Mapping, TextIO

MIN_WIDTH = 60


def output_width(env: Mapping[str, str] | None = None,
                 stream: TextIO | None = None) -> int | None:
    """The width to fit, or None for the renderer's fixed layout (not a terminal, no COLUMNS).
    A malformed COLUMNS (empty, not a number, zero or negative) is ignored."""
    env = os.environ if env is None else env
    text = env.get("COLUMNS", "").strip()
    if text.isdigit() and int(text) > 0:
        return max(MIN_WIDTH, int(text))
    stream = sys.stdout if stream is None else stream
    try:
        if not stream.isatty():
            return None
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):  # closed, replaced or not a real file
        return None
    return max(MIN_WIDTH, columns) if columns > 0 else None


def wrap(text: str, width: int, indent: str = "", subsequent: str | None = None) -> list[str]:
    """``text`` in lines of at most ``width`` characters (a word longer than a line is split),
    the first after ``indent``, the rest after ``subsequent`` (spaces as wide as ``indent``)."""
    rest = " " * len(indent) if subsequent is None else subsequent
    room = max(width, len(indent) + 10, len(rest) + 10)
    return textwrap.wrap(text, room, initial_indent=indent,
                         subsequent_indent=rest) or [indent.rstrip()]


def fit(lines: list[str], width: int | None) -> list[str]:
    """Every line longer than ``width`` wrapped, its continuation indented two spaces past the
    line's own indent; None: the lines as they are (the fixed layout)."""
    if width is None:
        return lines
    out: list[str] = []
    for line in "\n".join(lines).split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        indent = line[:len(line) - len(line.lstrip())]
        out += wrap(line.strip(), width, indent=indent, subsequent=indent + "  ")
    return out
