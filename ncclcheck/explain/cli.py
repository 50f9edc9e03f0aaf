"""The body of `ncclcheck explain` (the click command in ncclcheck/cli.py stays a few lines).

Every line it says on stderr begins with ``ncclcheck explain: `` and, when it is about one
input, names it next (``ncclcheck explain: PATH: why``).
"""

from __future__ import annotations

import gc
import os
import socket
import sys
from typing import Any

from ncclcheck.cluster.drain import REASON_LIMIT, DrainPlan, describe, drain_nodes
from ncclcheck.explain.docs import catalogue_table
from ncclcheck.explain.engine import explain_sources
from ncclcheck.explain.reader import (InputError, gather, input_notes, nothing_readable,
                                      screen)
from ncclcheck.report import render
from ncclcheck.report.formats import EXPLANATION

PREFIX = "ncclcheck explain: "
DRAIN_TIMEOUT_S = 10.0  # for every scontrol call together


def _say(line: str) -> None:
    print(PREFIX + line, file=sys.stderr)


def run_explain(paths: list[str], fmt: str, exit_code: bool, list_catalogue: bool,
                usage_error: type[Exception], on_fail: str | None = None,
                started: float | None = None) -> int:
    """Print the explanation (or the catalogue); return the exit code. ``started``: when this
    process started for the command (the command line's own run, which exits right after);
    None for a caller's run in a process that goes on."""
    if list_catalogue:
        print(catalogue_table())
        return 0
    if not paths and sys.stdin.isatty():
        raise usage_error("no log given: pass PATH ... or pipe a log into `ncclcheck explain -`")
    try:
        inputs = gather(paths)
        screened = screen(inputs.sources, inputs.unread)
        ended = nothing_readable(screened, [])
        if ended is None:
            result = explain_sources(screened.readable, dumps=screened.dumps,
                                     snapshots=screened.snapshots)
            ended = nothing_readable(screened, result.unread)
    except InputError as exc:  # a path refused before anything was read
        ended = str(exc)
    if ended is not None:
        _say(ended)
        return 2
    result.unread[:0] = screened.unread
    for unread in result.unread:
        _say(unread.text)
    for note in input_notes(paths, screened):
        _say(note)
    document = result.to_dict()
    if on_fail == "drain":
        _say(drain_verdict(document))
    print(render(EXPLANATION, document, fmt))
    if started is not None:
        # What explain loaded (the catalogue, the knowledge tables, the model) stays alive to
        # the end: the collector's last passes at exit would only rescan it, which cost a
        # small log's run a fifth of its time. Frozen, it goes with the process. Only here,
        # where nothing runs after: a caller's own process would keep it for good.
        gc.freeze()
    return 1 if exit_code and result.failed else 0


def drain_verdict(document: dict[str, Any]) -> str:
    """``--on-fail drain``: drain the hosts the verdict names (this host under its Slurm node
    name), with the root cause as the reason; what was done, in one line."""
    verdict = document.get("verdict") or {}
    if not verdict.get("drain"):
        return "--on-fail drain: no host named at fault by a root cause: nothing drained"
    root = document["findings"][0]
    reason = " ".join(f"ncclcheck: {root['id']}: {root['title']}".split())[:REASON_LIMIT]
    here, node = socket.gethostname(), os.environ.get("SLURMD_NODENAME")
    plans = [DrainPlan(node if node and host in (here, here.split(".")[0]) else host, reason,
                       (root["id"],)) for host in verdict["drain"]]
    result = drain_nodes(plans, timeout=DRAIN_TIMEOUT_S, env=os.environ)
    return describe(result).removeprefix("ncclcheck: ")
