"""The job's --timeout, split once into the phases of cluster mode.

Timeline for ``--timeout T`` (seconds since each process started):
  0 .. node join end a node's other ranks look for their leader's store (then rank 0's)
  0 .. join end      other ranks wait for rank 0's store (then, alone, check themselves)
  0 .. T - reserve   connect to the store, run the probe families, publish the report
  .. T - 2 margins   a node leader waits for its node's reports, then delivers them
  .. T - margin      rank 0 waits for every rank's report, then aggregates and prints
  T + grace          other ranks stop waiting for rank 0's verdict and print their own
                     report; everything is over by T + 5 s
Every phase reads its end from one ``JobClock``, made once per process from the context.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

CLIENT_GRACE_S = 2.5  # other ranks wait this long past their own deadline for rank 0
PROBE_SHARE = 0.3  # of --timeout, kept for a rank's own checks when it cannot join


@dataclass(frozen=True)
class JobClock:
    started: float  # time.monotonic() when the command started
    timeout: float

    @property
    def reserve_s(self) -> float:
        """Time kept back from the probes for publishing and gathering."""
        return min(5.0, max(0.5, 0.1 * self.timeout))

    @property
    def margin_s(self) -> float:
        """Time kept back from rank 0's gather for aggregating and printing."""
        return min(2.0, max(0.25, 0.05 * self.timeout))

    @property
    def probe_budget_s(self) -> float:
        """The timeout the probe families run under (from the same start)."""
        return max(0.1, self.timeout - self.reserve_s)

    @property
    def end(self) -> float:
        return self.started + self.timeout

    @property
    def gather_end(self) -> float:
        """Monotonic time at which rank 0 stops waiting for reports."""
        return self.end - self.margin_s

    def left(self, until: float | None = None) -> float:
        return max(0.0, (self.end if until is None else until) - time.monotonic())

    def connect_s(self, hosts_store: bool) -> float:
        """How long joining the store may take; rank 0 keeps its margin for the report."""
        return max(0.5, self.left() - (self.margin_s if hosts_store else 0.0))

    @property
    def join_end(self) -> float:
        """Monotonic time at which a rank stops waiting for rank 0's store and checks itself
        alone: late enough for a slow rank 0, early enough to run its own families."""
        return self.started + max(0.5, self.timeout - self.reserve_s - PROBE_SHARE * self.timeout)

    @property
    def node_join_end(self) -> float:
        """Monotonic time at which a rank stops looking for its node leader's store and joins
        rank 0's itself: half the join window, so that there is time left to do so."""
        return self.started + max(0.5, 0.5 * (self.join_end - self.started))

    @property
    def relay_end(self) -> float:
        """Monotonic time at which a node leader stops waiting for its node's ranks and
        delivers their summary: a margin before rank 0 stops waiting for it."""
        return self.gather_end - self.margin_s

    def gather_end_wall(self) -> float:
        """``gather_end`` as wall-clock time, which the other ranks can read from the store."""
        return time.time() + self.left(self.gather_end)

    def verdict_wait_s(self, rank0_gather_end_wall: float | None = None) -> float:
        """Until this rank's own deadline plus a grace, never longer: a rank that gets no
        verdict prints its own report, and must do so within --timeout + 5 s. (Rank 0's
        deadline is no reason to wait longer; a rank 0 that started much later needs a
        larger --timeout.)"""
        return self.left() + CLIENT_GRACE_S
