"""Where one process's stacks come from, chosen once per process, best first: py-spy (from
outside, nothing asked of the process), torch's debug server (the process answers, no ptrace
rights needed), the armed hook (the process writes them on a signal). Each way that fails says
why and what would make it work; the process's record keeps every such line.

A way is chosen on the first sample and kept for the others, so that samples compare alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ncclcheck.hang import debugserver, pyspy, trigger
from ncclcheck.hang.model import Problem, ThreadStack
from ncclcheck.hang.procstate import uid_of

PYSPY, DEBUG_SERVER, ARMED = "py-spy", "debug-server", "armed"


@dataclass
class Reader:
    """How this process's stacks are read, and what each read brought beside them."""

    pid: int
    way: str | None = None
    server: debugserver.DebugServer | None = None
    marker: trigger.Marker | None = None
    problems: list[Problem] = field(default_factory=list)
    fr: bytes | None = None          # the newest flight-recorder dump the process gave
    gone: bool = False

    def read(self, timeout: float, avoid_ports: set[int], armed_folder: str | None,
             spy: str | None) -> list[ThreadStack]:
        """Every thread's stack now ([] when no way works; the reasons are in ``problems``)."""
        if self.way == PYSPY or self.way is None:
            threads = self._pyspy(timeout, spy)
            if threads or self.way == PYSPY or self.gone:
                return threads
        if self.way in (DEBUG_SERVER, None):
            threads = self._server(timeout, avoid_ports)
            if threads or self.way == DEBUG_SERVER:
                return threads
        if self.way in (ARMED, None):
            return self._armed(timeout, armed_folder)
        return []

    def _pyspy(self, timeout: float, spy: str | None) -> list[ThreadStack]:
        result = pyspy.dump(self.pid, timeout, spy, uid_of(self.pid))
        if result.threads:
            self.way = PYSPY
            return result.threads
        self.gone = result.gone
        if result.problem and self.way is None:
            self.problems.append(result.problem)
        return []

    def _server(self, timeout: float, avoid_ports: set[int]) -> list[ThreadStack]:
        if self.server is None and self.way is None:
            self.server = debugserver.find(self.pid, avoid_ports, min(timeout, 2.0))
        if self.server is None:
            return []
        threads = self.server.stacks(timeout)
        if threads:
            self.way = DEBUG_SERVER
        elif self.way is None:
            self.problems.append(Problem("torch's debug server did not answer with stacks"))
        return threads

    def _armed(self, timeout: float, folder: str | None) -> list[ThreadStack]:
        if self.marker is None:
            self.marker = trigger.find_marker(self.pid, folder)
        if self.marker is None:
            if self.way is None:
                self.problems.append(Problem(
                    "not armed: no marker of this process in the armed folder",
                    "add `from ncclcheck.hang import arm; arm()` at the top of the training "
                    "script, or launch it as `torchrun ... -m ncclcheck.hang.armed train.py` "
                    "(it then writes its own stacks on a signal)"))
                self.way = "none"
            return []
        answer = trigger.ask(self.marker, timeout)
        if answer.threads:
            self.way = ARMED
            self.fr = answer.fr or self.fr
            return answer.threads
        if answer.problem and self.way is None:
            self.problems.append(answer.problem)
            self.way = "none"
        return []
