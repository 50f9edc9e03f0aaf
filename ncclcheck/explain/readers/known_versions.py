"""Known problems of the releases a log names: NCCL's version line (and torch's error text that
repeats it), the aws-ofi-nccl plugin's banner, a "PyTorch version" line.

The preflight judges the libraries a job will load (nccl.known_issues); a post-mortem often
has only the log, which names them. When a named release is in the known-issues table
(ncclcheck/catalogue/known_issues.toml) this reader adds a note (category null) with the
symptom, the conditions, the fixed release and the source: a known-bad release is context for
whoever reads the failure, never a root cause by itself, so a clean log stays clean.
"""

from __future__ import annotations

import re

from ncclcheck.explain.notes import Note
from ncclcheck.explain.readers import Reader
from ncclcheck.explain.run import Line, Run
from ncclcheck.ncclib.version import LOG_LINE

# library -> the pattern that names its release in a log, the version in group "version"
NAMED = {
    "nccl": LOG_LINE,
    "aws-ofi-nccl": re.compile(r"aws-ofi-nccl[ -]v?(?P<version>\d+\.\d+\.\d+)"),
    "torch": re.compile(r"\bPyTorch version\s*[:=]?\s*v?(?P<version>\d+\.\d+(?:\.\d+)?)"),
}
# what a line naming each library's release holds (the patterns above need it)
MARK = {"nccl": "version", "aws-ofi-nccl": "aws-ofi-nccl", "torch": "PyTorch version"}
STATE = "known_versions"


def read_line(run: Run, line: Line) -> None:
    """Remember each (library, release) a line names, with where it was first named."""
    seen = run.state.setdefault(STATE, {})
    for library, pattern in NAMED.items():
        if MARK[library] not in line.text:
            continue  # most lines name no release: a substring test before the pattern
        for found in pattern.finditer(line.text):
            seen.setdefault((library, found.group("version")), (line.file, line.number))


def read_run(run: Run) -> None:
    """A note per known issue of a named release (the conditions are stated, not assumed)."""
    named = run.state.get(STATE, {})
    if not named:
        return
    # deferred: the known-issues table, only for a log that names a release
    from ncclcheck.catalogue.known_issues import load, version_of
    for (library, version), (file, number) in named.items():
        for issue in load().for_library(library):
            if not issue.affects(version_of(version)):
                continue
            fixed = f"fixed in {issue.fixed}" if issue.fixed else "no fixed release yet"
            run.notes.append(Note(f"known_issue.{issue.id}", (
                f"{file}:{number} names {library} {version}, which has a known issue: "
                f"{issue.title} ({issue.symptom}; {issue.scope}; {fixed}). {issue.fix} "
                f"Source: {' '.join(issue.sources)}")))


READER = Reader("known_versions", 70, line=read_line, run=read_run)
