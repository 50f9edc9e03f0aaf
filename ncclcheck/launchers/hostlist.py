"""Slurm hostlists (``gpu[01-04,07],login1``): expand them into host names.

Under srun, rank 0's host is the first name of SLURM_NODELIST (tasks are placed on nodes in
hostlist order), so the job-wide gather can find rank 0 without MASTER_ADDR. Slurm's own
``scontrol show hostnames`` is the authority and is preferred when it runs; the parser here
follows the same rules for machines without the Slurm client (a login node, a container).

Rules, as Slurm applies them:
- hosts are separated by commas or whitespace outside brackets;
- a bracket group holds comma-separated numbers and ``lo-hi`` ranges; several groups in one
  name multiply out left to right (``rack[1-2]-gpu[01-02]`` -> rack1-gpu01, rack1-gpu02, ...);
- each range is zero-padded to the width of its lower bound (``[08-11]`` -> 08 09 10 11,
  ``[9-11]`` -> 9 10 11, ``[1-010]`` -> 1 ... 10);
- duplicates are kept, in the order given.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Mapping

_RANGE = re.compile(r"(\d+)(?:-(\d+))?")


def _expand_group(body: str, text: str) -> list[str]:
    """The numbers one bracket group stands for, as zero-padded strings."""
    numbers: list[str] = []
    for part in body.split(","):
        match = _RANGE.fullmatch(part.strip())
        if not match:
            raise ValueError(f"invalid range `{part}` in hostlist `{text}`")
        low_text, high_text = match.group(1), match.group(2)
        low, high = int(low_text), int(high_text if high_text is not None else low_text)
        if high < low:
            raise ValueError(f"invalid range `{part}` in hostlist `{text}`: end before start")
        numbers += [str(n).zfill(len(low_text)) for n in range(low, high + 1)]
    return numbers


def _expand_item(item: str, text: str) -> list[str]:
    """One host expression, e.g. ``rack[1-2]-gpu[01,03]``, into its names."""
    pieces: list[list[str]] = []
    position = 0
    for match in re.finditer(r"\[([^\[\]]*)\]", item):
        pieces.append([item[position:match.start()]])
        pieces.append(_expand_group(match.group(1), text))
        position = match.end()
    rest = item[position:]
    if "[" in rest or "]" in rest:
        raise ValueError(f"unbalanced bracket in hostlist `{text}`")
    pieces.append([rest])
    return ["".join(combo) for combo in itertools.product(*pieces)]


def _split_items(text: str) -> list[str]:
    """Top-level items: split on commas and whitespace that are outside brackets."""
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced bracket in hostlist `{text}`")
        if depth == 0 and (char == "," or char.isspace()):
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise ValueError(f"unbalanced bracket in hostlist `{text}`")
    items.append("".join(current))
    return [item for item in items if item]


def expand(hostlist: str) -> list[str]:
    """Every host name in a Slurm hostlist, in Slurm's order. Raises ValueError when malformed."""
    hosts: list[str] = []
    for item in _split_items(hostlist):
        hosts += _expand_item(item, hostlist)
    return hosts


def first_host(hostlist: str) -> str | None:
    """The first host of a hostlist (rank 0's node under srun's default placement)."""
    hosts = expand(hostlist)
    return hosts[0] if hosts else None


@dataclass(frozen=True)
class ExpandedHostlist:
    """A hostlist's host names and what expanded them: ``scontrol`` or ``parser``.

    ``note`` says why scontrol was not used when it was not (absent, failed, timed out).
    """

    hostlist: str
    hosts: tuple[str, ...]
    source: str
    note: str | None = None

    @property
    def first(self) -> str | None:
        return self.hosts[0] if self.hosts else None


def _scontrol_hostnames(scontrol: str, hostlist: str, timeout: float,
                        env: Mapping[str, str] | None) -> tuple[list[str] | None, str | None]:
    """Hosts from ``scontrol show hostnames``, or (None, why not)."""
    try:
        done = subprocess.run([scontrol, "show", "hostnames", hostlist], capture_output=True,
                              text=True, timeout=timeout,
                              env=dict(env) if env is not None else None)
    except subprocess.TimeoutExpired:
        return None, f"`scontrol show hostnames` did not answer within {timeout:g} s"
    except OSError as exc:
        return None, f"cannot run scontrol: {exc}"
    hosts = done.stdout.split()
    # scontrol reports an invalid hostlist on stderr and still exits 0.
    if done.returncode != 0 or (not hosts and done.stderr.strip()):
        first_line = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"scontrol show hostnames failed: {first_line}"
    return hosts, None


def expand_hostlist(hostlist: str, *, scontrol: str | None = None, timeout: float = 5.0,
                    env: Mapping[str, str] | None = None) -> ExpandedHostlist:
    """Expand with Slurm's ``scontrol show hostnames`` when it is installed and answers in
    ``timeout`` seconds, else with :func:`expand`. ``scontrol`` overrides the binary looked up
    on PATH; pass ``""`` to use the parser only. Raises ValueError when both fail to expand.

    scontrol reads slurm.conf (SLURM_CONF) even for this local operation; without one it
    retries for up to a minute, hence the short deadline.
    """
    path = shutil.which("scontrol", path=(env or os.environ).get("PATH")) if scontrol is None \
        else scontrol
    note = "scontrol is not installed" if scontrol is None else "scontrol not used"
    if path and hostlist.startswith("-"):
        note = "a hostlist starting with `-` would be read by scontrol as an option"
    elif path:
        hosts, note = _scontrol_hostnames(path, hostlist, timeout, env)
        if hosts is not None:
            return ExpandedHostlist(hostlist, tuple(hosts), "scontrol")
    return ExpandedHostlist(hostlist, tuple(expand(hostlist)), "parser", note)
