"""A progress bar on stderr while the sweep runs (never on stdout, which carries the report)."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from .sizes import format_size


class Progress:
    """Counts a size as done when every rank finished it. On a terminal the bar redraws in
    place; otherwise (CI logs) it prints one short line per size."""

    def __init__(self, sizes: list[int], nranks: int, backend: str,
                 stream: TextIO | None = None, world_size: int | None = None) -> None:
        self.sizes = sizes
        self.nranks = nranks  # ranks whose events arrive here (cluster mode: rank 0's own)
        self.world_size = world_size or nranks
        self.backend = backend
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done: dict[int, int] = {}
        self.shown = 0
        self.drawn = False

    def update(self, event: dict[str, Any]) -> None:
        if event.get("event") != "done":
            return
        rank, step = int(event["rank"]), int(event["step"])
        self.done[rank] = max(self.done.get(rank, -1), step)
        finished = min(self.done.get(r, -1) for r in range(self.nranks)) + 1
        if finished > self.shown:
            self.shown = finished
            self._draw()

    def _draw(self) -> None:
        total = len(self.sizes)
        size = format_size(self.sizes[self.shown - 1])
        if self.tty:
            width = 24
            filled = width * self.shown // max(1, total)
            bar = "#" * filled + "." * (width - filled)
            self.stream.write(f"\rbench [{bar}] {self.shown}/{total} sizes, {size} "
                              f"({self.backend}, {self.world_size} ranks)   ")
            self.drawn = True
        else:
            self.stream.write(f"bench: {self.shown}/{total} sizes done ({size}, "
                              f"{self.backend}, {self.world_size} ranks)\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self.drawn:
            self.stream.write("\n")
            self.stream.flush()


class IsolateProgress:
    """One stderr line per round of pair tests (rank 0 only): its kind, its pairs, its wall
    time and its slowest pair, so a long run of rounds shows where it is."""

    def __init__(self, hosts: list[str], mode: str, stream: TextIO | None = None) -> None:
        self.hosts = hosts
        self.mode = mode
        self.stream = stream if stream is not None else sys.stderr

    def round(self, index: int, rnd: Any, tests: list[Any], seconds: float) -> None:
        worst = min(tests, key=lambda t: t.busbw_gbps, default=None)
        slowest = "" if worst is None else (
            f"; slowest {self.hosts[worst.a]}-{self.hosts[worst.b]} "
            + (f"failed ({worst.error})" if worst.error else f"{worst.busbw_gbps:.3g} GB/s"
               + (f" ({worst.nbytes} bytes x {worst.iters} to fit its share of the time)"
                  if getattr(worst, "reduced", False) else "")))
        self.stream.write(f"bench: isolate {self.mode}: round {index + 1} ({rnd.kind}), "
                          f"{len(rnd.pairs)} pairs in {seconds:.1f} s{slowest}\n")
        self.stream.flush()
