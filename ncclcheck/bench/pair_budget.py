"""A pair test that fits its share of the deadline: which all-reduces to run, from the times
the pair has agreed on so far.

A pair over a link 100 or 1,000 times slower than its peers cannot finish the sweep's message
a few times over before the deadline; if it simply ran them, its round would end with no time
at all and the slowest link of the cluster would go unmeasured. So a pair starts small
(``START_BYTES``) and grows the message ``RAMP`` times at a step while the next step, and
``MIN_TIMED`` timed iterations after it, are predicted to fit in its budget (time grows at
most linearly with size: an all-reduce costs a latency plus size / bandwidth, so scaling the
whole time overestimates). It then times up to ``iters`` all-reduces at the size it settled
on, stopping when the next one would not fit. A healthy pair reaches the full message in a
few cheap steps; a slow one is measured at a smaller message or with fewer iterations, and
says so.

Pure: every member of a pair feeds the same agreed times (the pair's slowest rank's, shared
through a one-element MAX all-reduce), so every member takes the same steps in the same order
and the collectives always match; pairs.py runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

START_BYTES = 64 * 1024  # the first step: small enough for a link 1,000 times too slow
RAMP = 4                 # each step of the ramp is this many times larger
MIN_TIMED = 2            # a step is taken only if this many timed iterations follow it in time


@dataclass(frozen=True)
class Step:
    """One all-reduce to run: its message, and whether its time counts (warm-ups do not)."""

    nbytes: int
    timed: bool


@dataclass(frozen=True)
class PairMeasurement:
    """What a pair measured: the message, its fastest timed all-reduce (the agreed time of
    the pair's slowest rank), how many were timed, and the time spent in all the steps."""

    nbytes: int
    time_s: float
    iters: int
    spent_s: float
    target_bytes: int
    target_iters: int

    @property
    def reduced(self) -> bool:
        """Measured with a smaller message or fewer iterations than the set-up asked for."""
        return self.nbytes < self.target_bytes or self.iters < self.target_iters


@dataclass
class BoundedPair:
    """The steps of one pair test within ``budget_s`` seconds (see the module docstring).

    ``next_step()`` says what to run (None when done), ``record(seconds)`` takes the agreed
    time of that step, ``result()`` is the measurement (None before any step finished)."""

    target_bytes: int
    elem: int
    iters: int
    warmup: int
    budget_s: float
    size: int = 0
    spent_s: float = 0.0
    phase: str = "ramp"
    warmups_left: int = 0
    last_s: float = 0.0
    last_bytes: int = 0
    times: list[float] = field(default_factory=list)
    _pending: Step | None = None

    def __post_init__(self) -> None:
        self.target_bytes = max(self.elem, self.target_bytes - self.target_bytes % self.elem)
        self.size = self._whole(min(self.target_bytes, START_BYTES))

    def _whole(self, nbytes: int) -> int:
        return max(self.elem, nbytes - nbytes % self.elem)

    def _fits(self, seconds: float) -> bool:
        return self.spent_s + seconds <= self.budget_s

    def next_step(self) -> Step | None:
        if self.phase == "ramp":
            self._pending = Step(self.size, timed=False)
        elif self.phase == "measure" and self.warmups_left > 0 and self._fits(self.last_s):
            self._pending = Step(self.size, timed=False)
        elif self.phase == "measure" and len(self.times) < self.iters and self._fits(self.last_s):
            self._pending = Step(self.size, timed=True)
        else:
            self.phase = "done"
            self._pending = None
        return self._pending

    def record(self, seconds: float) -> None:
        step = self._pending
        if step is None:
            raise RuntimeError("record() without a step")
        self._pending = None
        self.spent_s += seconds
        self.last_s, self.last_bytes = seconds, step.nbytes
        if step.timed:
            self.times.append(seconds)
            return
        if self.phase == "measure":
            self.warmups_left -= 1
            return
        # the ramp: grow while the next size and MIN_TIMED iterations of it fit
        if self.size < self.target_bytes:
            bigger = self._whole(min(self.target_bytes, self.size * RAMP))
            predicted = seconds * bigger / self.size
            if self._fits(predicted * (1 + MIN_TIMED)):
                self.size = bigger
                return
        self.phase = "measure"
        # the step just run at this size was its first warm-up
        self.warmups_left = max(0, self.warmup - 1) if self.size == self.target_bytes else 0

    def result(self) -> PairMeasurement | None:
        """The measurement: the fastest timed all-reduce; when none could be timed, the last
        step at the settled size stands for it (one iteration); None when nothing finished."""
        if self.times:
            return PairMeasurement(self.size, min(self.times), len(self.times), self.spent_s,
                                   self.target_bytes, self.iters)
        if self.last_bytes:
            return PairMeasurement(self.last_bytes, self.last_s, 1, self.spent_s,
                                   self.target_bytes, self.iters)
        return None
