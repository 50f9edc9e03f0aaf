"""How a process died, whatever printed it: signals and exit codes read with their context.

A rank that dies from a signal leaves the same fact in many wordings: torchrun's
``exitcode: -9`` and ``Signal 9 (SIGKILL) received``, a shell's ``Killed`` and exit status
137, a container's ``OOMKilled``, MPI's ``exited on signal 9``, Python's ``Signals.SIGKILL``.
Read in any of those (a negative exit code is a signal, an exit status above 128 is 128 plus
one), the signal says more than "a rank crashed" to whoever knows what sends it: the kernel's
OOM killer and a container's memory limit send SIGKILL; a bus error in a container is almost
always a full ``/dev/shm``. When the signatures leave the failure unexplained (nothing found,
only consequences, or a crash that names no reason) and a rank died from one of those, the
cause is inferred from the signal and the lines around it: SIGKILL reads as the host's memory
(the finding says whether the log shows the OOM killer, speaks of memory, or says nothing of
who sent it); a scheduler that stops a job says so in lines of its own (a time limit, a
preemption), and those, a CUDA out-of-memory or another cause named in the log win.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from typing import Callable

from ncclcheck.catalogue import Catalogue, Signature, load
from ncclcheck.catalogue.facts import signal_name
from ncclcheck.explain.evidence import Role, Weight
from ncclcheck.explain.findings import Findings, Hit
from ncclcheck.explain.normalize import strip_prefix
from ncclcheck.explain.textmodel import LogText

SIGKILL, SIGBUS = 9, 7
# A signal by name, by number after a word that introduces one, or as a negative exit code
# (Python's and torchrun's convention) or an exit status above 128 (the shell's and
# containers').
_BY_NAME = re.compile(r"\bSIG(?P<name>HUP|INT|QUIT|ILL|ABRT|BUS|FPE|KILL|SEGV|PIPE|TERM)\b")
_BY_NUMBER = re.compile(r"\b(?:signal|Signal|SIGNAL)[:\s]+(?P<number>\d{1,2})\b")
_NEGATIVE_EXIT = re.compile(r"\b(?:exit(?:s|ed)?(?: with)?(?:[ _]?code|[ _]status)?|"
                            r"return(?:ed)?(?: with)? code)\s*[:=]?\s*\(?\s*-(?P<number>\d{1,2})\b",
                            re.I)
_STATUS = re.compile(r"\b(?:exit(?:ed)?(?: with)?(?:[ _]?code|[ _]status)|return code|"
                     r"exitCode)\s*[:=]?\s*(?P<status>1[3-5]\d)\b", re.I)
_WORDS = ((re.compile(r"^(?:\S+:\s*)?Killed\b|\bKilling subprocess\b|\bOOMKilled\b"), SIGKILL),
          (re.compile(r"\bBus error\b"), SIGBUS))
# What else the log says about memory: the OOM killer, a container limit, a GPU that ran out.
_OOM_KILLER = re.compile(r"oom[-_ ]?kill|Out of memory: Kill|Memory cgroup out of memory|"
                         r"OOMKilled|invoked oom-killer|exceeded (?:its )?memory limit", re.I)
_GPU_OOM = re.compile(r"CUDA out of memory|cudaErrorMemoryAllocation|out of memory on device",
                      re.I)
_SHM = re.compile(r"/dev/shm|shared memory|\bshm\b", re.I)
_MEMORY = re.compile(r"\bmemory\b|\bRSS\b|\bOOM\b|MemoryError|\bswap\b|\bmem(?:ory)?[ _]usage|"
                     r"\b\d+(?:\.\d+)?\s?[GM]i?B\b", re.I)


@dataclass(frozen=True)
class Death:
    """A process that died from a signal, where it was read, and what the log says around it."""

    signal: int
    file: str
    line: int
    text: str
    oom_killer: bool = False
    gpu_oom: bool = False
    shm: bool = False
    memory: bool = False  # the log speaks of host memory (usage figures, RSS, OOM, swap)
    context_at: tuple[str, int] | None = None  # (file, line): the first line giving the context


def signal_of(message: str) -> int | None:
    """The signal a line says a process died from, in any of the common wordings."""
    named = _BY_NAME.search(message)
    if named:
        return int(signal.Signals["SIG" + named.group("name")])
    for pattern in (_BY_NUMBER, _NEGATIVE_EXIT):
        found = pattern.search(message)
        if found:
            return int(found.group("number"))
    status = _STATUS.search(message)
    if status:
        return int(status.group("status")) - 128
    for pattern, number in _WORDS:
        if pattern.search(message):
            return number
    return None



def deaths(text: LogText) -> list[Death]:
    """Every signal death the log's kept lines show, each with the memory context of the run."""
    where: dict[str, tuple[str, int]] = {}  # each context -> the first (file, line) showing it
    found: list[tuple[int, str, int, str]] = []
    for file, number, line, _ in text.lines:
        message = strip_prefix(line)
        for name, pattern in (("oom_killer", _OOM_KILLER), ("gpu_oom", _GPU_OOM), ("shm", _SHM),
                              ("memory", _MEMORY)):
            if name not in where and pattern.search(message):
                where[name] = (file, number)
        sig = signal_of(message)
        if sig is not None:
            found.append((sig, file, number, line))
    oom_killer, gpu_oom, shm, memory = (name in where for name in
                                        ("oom_killer", "gpu_oom", "shm", "memory"))
    context = next((where[name] for name in ("oom_killer", "shm", "memory") if name in where),
                   None)
    return [Death(sig, file, number, line, oom_killer, gpu_oom, shm, memory, context)
            for sig, file, number, line in found]


def _killed(deaths_: list[Death]) -> Death | None:
    """A rank killed with SIGKILL while no GPU ran out of memory: the host's memory, most
    likely. The kernel's OOM killer and a container's or job's memory limit send SIGKILL; a
    scheduler stopping a job says so in lines of its own (a time limit, a preemption, a node
    failure), which name that cause instead. On the world corpus's dev split 4 of the 5 logs
    with a SIGKILL were a host running out of memory, 2 of them with no word of memory."""
    for death in deaths_:
        if death.signal == SIGKILL and not death.gpu_oom:
            return death
    return None


def _bus_error(deaths_: list[Death]) -> Death | None:
    for death in deaths_:
        if death.signal == SIGBUS:
            return death
    return None


# Each rule is named by the inferred signature that declares ``rule = "<name>"``.
SIGNAL_RULES: dict[str, Callable[[list[Death]], Death | None]] = {
    "killed_by_sigkill": _killed,
    "bus_error": _bus_error,
}


def add_signal_cause(hits: Findings, text: LogText, catalogue: Catalogue | None = None) -> None:
    """Add the cause a signal death implies, weighed as reasoned: it stands over a crash that
    names no reason, a generic error and the consequences, never over a message that names the
    cause (arbiter.py). The rules' signatures are ``catalogue``'s (the shipped one when None)."""
    found = deaths(text)
    for rule, reads in SIGNAL_RULES.items():
        death = reads(found)
        if death is None:
            continue
        sig: Signature = (load() if catalogue is None else catalogue).by_rule(rule)
        if any(f.role is Role.CAUSE and f.signature.category == sig.category
               for f in hits.by_id.values()):
            return  # a finding already says so, with its own line
        facts = {"signal": death.signal, "signal_name": signal_name(death.signal),
                 "line": death.line,
                 "context": ("the log shows the OOM killer" if death.oom_killer else
                             "the log mentions shared memory" if death.shm else
                             "the log speaks of host memory" if death.memory else
                             "no line says who sent it" if death.signal == SIGKILL else "")}
        if death.context_at is not None:  # the line that shows that context
            facts["context_line"] = death.context_at[1]
            if death.context_at[0] != death.file:
                facts["context_file"] = death.context_at[0]
        hits.add(Hit(sig, facts, death.file, death.line, death.text[:300], None, None, None,
                     hits.hits, inferred_from={"file": death.file, "line": death.line,
                                               "text": death.text[:300]},
                     weight=Weight.REASONED))
        return
