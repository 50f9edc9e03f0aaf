"""Who printed a line: a launcher's own report of a death, told apart from the job's output.

torchrun's elastic agent, srun and slurmstepd, and mpirun print what they saw happen to the
processes they started (which one ended, with which exit code or signal, which they stopped
then) in their own words and formats. Those lines say how a process ended, never why: the
signatures read them as reports (evidence.py), and the readers that guess a cause from a
run's words (the text model, the keyword cues) leave them out, so appending a launcher's tail
to a log does not change what those readers see. Recognised by the component's own marks: the
elastic agent's module path and failure box, ``srun:``/``slurmstepd``/``pdsh@host:``
prefixes, mpirun's banners.
"""

from __future__ import annotations

import re
from functools import lru_cache

_LAUNCHER = re.compile(
    r"torch/distributed/(?:elastic/|run\.py|launcher/api\.py)|/bin/torchrun\b|"
    r"\bChildFailedError\b|Root Cause \(first observed failure\)|<NO_OTHER_FAILURES>|"
    r"^\s*(?:time|host|rank|exitcode|error_file|traceback)\s*: |"        # the failure box
    r"^\s*\[\d+\]:\s*$|^\s*Failures:\s*$|^\s*\S+ FAILED\s*$|"
    r"^\s*(?:sys\.exit\(main\(\)\)|run\(args\)|elastic_launch\(|return launch_agent\(|"
    r"raise ChildFailedError\(|return f\(\*args, \*\*kwargs\))\s*$|"  # its own traceback
    r"^\s*srun: |^\s*slurmstepd(?:-[\w.\-]+)?: |"                          # Slurm
    r"^\s*pdsh@[\w.\-]+: |"                                                # pdsh
    r"Primary job\s+terminated normally|non-zero exit code\. Per user-direction|"
    r"mpirun (?:detected|noticed) that|^\s*(?:Process name|Exit code): |"  # Open MPI
    r"the job to be terminated\. The first process to do so was:")


# A frame of the launcher's own traceback (torchrun raising ChildFailedError): the traceback
# header above it is the launcher's, not the job's.
_OWN_FRAME = re.compile(r'\s*File "[^"]*(?:torch/distributed/(?:elastic/|run\.py|launcher/api\.py)|'
                        r'/bin/torchrun)')


def launcher_frame(message: str) -> bool:
    """Whether a line is a frame of a launcher's own traceback (torchrun's), so that the
    traceback header printed just before it is the launcher's; any other line of a launcher
    (srun's "error: task 1: Exited", torchrun's "failed (exitcode: 1)") follows a traceback
    of the job that was cut there."""
    return bool(_OWN_FRAME.match(message))


# The marks that a log prefix can hold: glog's source file ("... torch/distributed/run.py:766]")
_SOURCE = re.compile(r"torch/distributed/(?:elastic/|run\.py|launcher/api\.py)")


def printed_by_launcher(line: str, message: str | None = None) -> bool:
    """Whether ``line`` is a launcher's own report (``message``: the line without the log
    prefixes that parse_line peels off, where the anchored marks are read; of the prefixes,
    only glog's source file can hold a mark)."""
    if message is None:
        return _marked(line)
    return _marked(message) or ("/distributed/" in line and bool(_SOURCE.search(line)))


@lru_cache(maxsize=8192)  # launchers and ranks repeat their lines
def _marked(text: str) -> bool:
    return bool(_LAUNCHER.search(text))
