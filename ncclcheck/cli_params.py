"""Click parameter types that refuse bad values at parse time, so that a command with a bad
value exits 2 with one line before it does any work."""

from __future__ import annotations

import math
import os
import tempfile
from typing import Any

import click

# A week: longer than any preflight, and far inside what time and threading functions accept.
TIMEOUT_MAX_S = 7 * 24 * 3600.0


class FiniteSeconds(click.ParamType):
    """A finite number of seconds in [minimum, maximum]; nan, inf and out-of-range values are
    refused with the range they must fall in."""

    name = "SECONDS"

    def __init__(self, minimum: float, maximum: float = TIMEOUT_MAX_S) -> None:
        self.minimum = minimum
        self.maximum = maximum

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            seconds = math.nan
        if not math.isfinite(seconds) or not self.minimum <= seconds <= self.maximum:
            self.fail(f"{value!r} is not a number of seconds from {self.minimum:g} to "
                      f"{self.maximum:g}", param, ctx)
        return seconds


class FiniteFloat(click.FloatRange):
    """click.FloatRange that also refuses nan and inf (FloatRange lets nan through)."""

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def unwritable_reason(path: str) -> str | None:
    """Why ``path`` cannot be written as a file, found by trying (root passes os.access checks
    that a real write fails, e.g. on /proc or a read-only mount); None when it can be."""
    if not path:
        return "the path is empty"
    if os.path.isdir(path):
        return "it is a directory"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"the directory {folder} does not exist"
    try:
        if os.path.exists(path):
            with open(path, "ab"):  # append mode: the file's content is left as it is
                pass
        else:
            # A file of our own next to it, never the path itself: the ranks of one node may
            # check the same path at once (and one may already be writing it).
            handle, probe = tempfile.mkstemp(prefix=".ncclcheck-probe-", dir=folder)
            os.close(handle)
            os.unlink(probe)
    except OSError as exc:
        return exc.strerror or str(exc)
    except ValueError as exc:  # e.g. an embedded NUL
        return str(exc)
    return None


class WritablePath(click.ParamType):
    """An output FILE (--junit, --plot, --prom-file) checked by a real write attempt at parse
    time, so a bad path fails at once instead of after the probes ran."""

    name = "FILE"

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        path = os.fsdecode(value)
        reason = unwritable_reason(path)
        if reason:
            self.fail(f"cannot write {path!r}: {reason}", param, ctx)
        return path


writable_path = WritablePath()
