"""Streaming scan: find the few lines worth a regex without looking at every line in Python.

A log is read in fixed-size blocks (constant memory, whatever the file or line length). In
each block, one multi-literal search (prefilter.py) finds the signatures' literals; only the
lines around those hits are decoded and handed on. NCCL INFO lines feed the NCCL
summary, up to a cap per file, since everything it reports is printed at communicator init.
"""

from __future__ import annotations

import re
from bisect import insort
from dataclasses import dataclass
from functools import partial
from typing import BinaryIO, Callable, Collection, Iterable, Iterator

from ncclcheck.explain.context import CONTEXT_TOKENS
from ncclcheck.explain.gate import Gate
from ncclcheck.explain.lines import GOES_ON
from ncclcheck.explain.prefilter import LiteralIndex

BLOCK = 8 << 20            # bytes read at a time
MAX_LINE = 64 << 10        # longest text kept for one line (the part around the hit)
MAX_INFO_LINES = 10_000    # NCCL INFO lines per file given to the summary
MAX_CONTEXT_LINES = 2_000  # launch / setting lines per file given to the context
MAX_ERROR_LINES = 2_000    # error-looking lines per file given to the keyword fallback
MAX_RATE_LINES = 1_000     # step-time / throughput lines per file (the file's tail adds more)
GATE, INFO, CONTEXT, ERROR, RATE = 1, 2, 8, 16, 32  # why a line is a candidate (bit flags)
KINDS = GATE | INFO | CONTEXT | ERROR | RATE
# Words of an error line (fallback.py scores their category cues when no signature matched).
ERROR_TOKENS = (b"rror", b"RROR", b"ailed", b"FAIL", b"ailure", b"xception", b"WARN", b"Killed",
                b"ignal", b"SIG", b"core dumped", b"Abort", b"timed out", b"refused", b"atal",
                b"ATAL")
INFO_TOKENS = (b"NCCL INFO", b"NCCL version")
# Words of a step-time or throughput line (readers/throughput.py reads how fast the run went).
RATE_TOKENS = (b"it/s", b"s/it", b"samples/s", b"tokens/s", b"tok/s", b"ms/step", b"ms/it",
               b"per iteration", b"step_time", b"steps/s", b"img/s", b"images/s")
TOKENS = INFO_TOKENS + CONTEXT_TOKENS + ERROR_TOKENS + RATE_TOKENS  # worth handing on
LAST_ERROR = b"Last error:"
NEXT = 4                   # the line was taken because the one above goes on
REST, QUOTED = 1, 2        # a block ends on a header that goes on: any, torch's "Last error:"
OVERLAP = 1024             # bytes kept across a cut inside one huge line (longer than a literal)
HEAD_LINES = 60            # a file's first lines, kept for the text model (the launch, settings)
TAIL_LINES = 200           # a file's last lines, kept for the text model (how it ended)


@dataclass
class Candidate:
    """A line that passed the prefilter: its number in the file, its text, the lines before it."""

    number: int
    text: str
    gated: bool                      # holds a literal: worth matching against the catalogue
    info: bool                       # an NCCL INFO / version line (for the summary)
    before: Callable[[int], list[str]]
    rest_of: int = 0                 # the line whose message this one may finish (0: none)
    context: bool = False            # may name a setting or launch option (context.py)
    error: bool = False              # may be an error line (fallback.py)
    rate: bool = False               # may say how fast the run went (readers/throughput.py)
    kinds: int = 0                   # the flags above as bits (GATE | INFO | ...): who reads it
    last_error: bool = False         # the rest of torch's "Last error:": NCCL's last warning


class Scanner:
    """Yields the candidate lines of one stream."""

    def __init__(self, index: LiteralIndex, block: int = BLOCK, gate: Gate | None = None) -> None:
        self.index = index
        self.block = block
        self.gate = gate  # leaves out lines holding only a common literal (gate.py)
        self._year_known: Callable[[], bool] = lambda: False
        self._noisy: frozenset[int] = frozenset()  # literals common in this file so far
        self._context_left = MAX_CONTEXT_LINES
        self._error_left = MAX_ERROR_LINES
        self._rate_left = MAX_RATE_LINES
        self._head: list[tuple[int, bytes]] = []
        self._tail: list[tuple[int, bytes]] = []

    def edges(self) -> list[tuple[int, str]]:
        """The first HEAD_LINES and last TAIL_LINES lines of the stream last read (all of a
        short file), numbered: where a failed run's log says how it started and how it ended,
        in whatever words, for the text model."""
        seen, out = set(), []
        for number, raw in self._head + self._tail:
            if number not in seen:
                seen.add(number)
                out.append((number, raw[:MAX_LINE].decode("utf-8", "replace").rstrip("\r")))
        return out

    def _keep_edges(self, body: bytes, line_base: int) -> None:
        if len(self._head) < HEAD_LINES:
            pos, number = 0, line_base
            while len(self._head) < HEAD_LINES and pos < len(body):
                end = body.find(b"\n", pos)
                end = len(body) if end < 0 else end
                self._head.append((number, body[pos:min(end, pos + MAX_LINE)]))
                pos, number = end + 1, number + 1
        last: list[tuple[int, int]] = []  # (start, end) of the block's last lines, backwards
        end = len(body) - 1 if body.endswith(b"\n") else len(body)
        while len(last) < TAIL_LINES and end > 0:
            start = body.rfind(b"\n", 0, end) + 1
            last.append((start, end))
            end = start - 1
        if not last:
            return
        lines_in_body = body.count(b"\n") + (0 if body.endswith(b"\n") else 1)
        first_number = line_base + lines_in_body - len(last)
        block_tail = [(first_number + i, body[a:min(b, a + MAX_LINE)])
                      for i, (a, b) in enumerate(reversed(last))]
        self._tail = (self._tail + block_tail)[-TAIL_LINES:]

    def lines(self, stream: BinaryIO,
              year_known: Callable[[], bool] = lambda: False) -> Iterator[Candidate]:
        """The candidates of ``stream``; ``year_known`` says whether the reader has seen the
        log's year already (until then, a line with a full date is never left out)."""
        self._year_known = year_known
        self._noisy = frozenset()
        line_base = 1          # number of the first line in the current buffer
        carry = b""
        info_left = MAX_INFO_LINES
        self._context_left = MAX_CONTEXT_LINES
        self._error_left = MAX_ERROR_LINES
        self._rate_left = MAX_RATE_LINES
        self._head, self._tail = [], []
        pending_next = 0   # the previous block ended on a header that goes on (REST, QUOTED)
        while True:
            data = stream.read(self.block)
            final = not data
            buf = carry + data if data else carry
            if not buf:
                return
            if final:
                body, carry = buf, b""
            else:
                cut = buf.rfind(b"\n")
                if cut < 0:
                    if len(buf) < self.block:
                        carry = buf
                        continue
                    # One line longer than a block: scan this piece, keep a small overlap so a
                    # literal split across the boundary is still seen; no newline, so the
                    # line number does not move.
                    body, carry = buf, buf[-OVERLAP:]
                    for cand in self._block(body, line_base, 0, 0)[0]:
                        yield cand
                    continue
                body, carry = buf[:cut + 1], buf[cut + 1:]
            cands, pending_next, info_left = self._block(body, line_base, pending_next, info_left)
            self._keep_edges(body, line_base)
            yield from cands
            line_base += body.count(b"\n")
            if final:
                return

    def _block(self, body: bytes, line_base: int, first_line_wanted: int,
               info_left: int) -> tuple[list[Candidate], int, int]:
        starts: dict[int, int] = {}
        header_of: dict[int, int] = {}  # a NEXT line's start -> the line it may finish
        quoted: set[int] = set()  # starts of lines that follow torch's "Last error:"
        if first_line_wanted:
            starts[0] = GATE | NEXT
            header_of[0] = line_base - 1
            if first_line_wanted == QUOTED:
                quoted.add(0)
        literal_starts, present = self._literal_lines(body)
        for start in literal_starts:
            starts[start] = starts.get(start, 0) | GATE
        if info_left > 0:
            for token in INFO_TOKENS:
                if token in present:
                    self._collect(body, token, starts, INFO, limit=info_left)
        for token in CONTEXT_TOKENS:
            if self._context_left > 0 and token in present:
                self._context_left -= self._collect(body, token, starts, CONTEXT,
                                                    limit=self._context_left)
        for token in ERROR_TOKENS:
            if self._error_left > 0 and token in present:
                self._error_left -= self._collect(body, token, starts, ERROR,
                                                  limit=self._error_left)
        for token in RATE_TOKENS:
            if self._rate_left > 0 and token in present:
                self._rate_left -= self._collect(body, token, starts, RATE,
                                                 limit=self._rate_left)
        out: list[Candidate] = []
        if not starts:
            return out, False, info_left
        counted_to, number = 0, line_base
        pending_next = 0
        ordered = sorted(starts)
        index = 0
        queued = -1  # a line taken because the one above goes on: read before ordered[index]
        while queued >= 0 or index < len(ordered):
            if queued >= 0:
                start, queued = queued, -1
            else:
                start = ordered[index]
                index += 1
            number += body.count(b"\n", counted_to, start)
            counted_to = start
            end = body.find(b"\n", start)
            end = len(body) if end < 0 else end
            raw = body[start:min(end, start + MAX_LINE)]
            why = starts[start]
            if why & INFO:
                info_left -= 1
            out.append(Candidate(number, raw.decode("utf-8", "replace").rstrip("\r"),
                                 bool(why & GATE), bool(why & INFO), partial(_before, body, start),
                                 header_of.get(start, 0), bool(why & CONTEXT), bool(why & ERROR),
                                 bool(why & RATE), why & KINDS, start in quoted))
            if why & GATE and GOES_ON.search(raw):
                nxt = _rest_of(body, start, end + 1)
                header_of.setdefault(nxt, number)  # a line is the rest of one message
                last_error = raw.rstrip().endswith(LAST_ERROR)
                if last_error:
                    quoted.add(nxt)
                if nxt >= len(body):
                    pending_next = QUOTED if last_error else REST
                elif nxt not in starts and nxt == end + 1:  # the next start in order: next line
                    starts[nxt] = GATE | NEXT
                    queued = nxt
                elif nxt not in starts:  # after other printers' lines: in its place in order
                    starts[nxt] = GATE | NEXT
                    insort(ordered, nxt)
                else:
                    starts[nxt] |= GATE | NEXT
        return out, pending_next, info_left

    def _literal_lines(self, body: bytes) -> tuple[list[int], Collection[bytes]]:
        """Where the text of each line holding a literal starts (the line's start, or for a very
        long line a window that keeps the hit in view), less what the gate leaves out; and
        which tokens the block holds (Hyperscan names them in the same pass; with another
        engine every token may occur, and each token's own search tells)."""
        if not hasattr(self.index, "hits"):
            lines = _group(body, ((end, 0) for end in self.index.ends(body)))
            return [start for start, *_ in lines], TOKENS
        present: list[bytes] = []
        hits = self.index.hits(body, present)
        if getattr(self.index, "tokens", ()) != TOKENS:
            present = list(TOKENS)
        lines = _group(body, hits)
        if self.gate is not None:
            self._noisy |= self.gate.noisy(hits)  # common once, common for the rest of the file
            if self._noisy:
                lines = self.gate.keep(body, lines, self._noisy, MAX_LINE, self._year_known())
        return [start for start, *_ in lines], present

    @staticmethod
    def _collect(body: bytes, token: bytes, starts: dict[int, int], why: int,
                 limit: int | None = None) -> int:
        """Mark the lines holding ``token`` (at most ``limit``); returns how many."""
        found = body.find(token)
        taken = 0
        while found >= 0:
            # The line's start, or for a very long line a window that keeps the hit in view.
            start = max(body.rfind(b"\n", 0, found) + 1, found - MAX_LINE // 2)
            starts[start] = starts.get(start, 0) | why
            taken += 1
            if limit is not None and taken >= limit:
                return taken
            end = body.find(b"\n", found)
            if end < 0:
                return taken
            found = body.find(token, end)
        return taken


def _group(body: bytes, hits: Iterable[tuple[int, int]]) -> list[tuple[int, int, int, set[int]]]:
    """Literal hits (end, id) in order, as lines: (text start, line start, line end, ids)."""
    lines: list[tuple[int, int, int, set[int]]] = []
    find, rfind, size, half = body.find, body.rfind, len(body), MAX_LINE // 2
    line_end = -1
    ids: set[int] = set()
    for end, literal_id in hits:
        if end > line_end:  # the first hit of a line places the line's window
            line_end = find(b"\n", end)
            if line_end < 0:
                line_end = size
            line_start = rfind(b"\n", 0, end) + 1
            ids = {literal_id}
            lines.append((line_start if end - half < line_start else end - half, line_start,
                          line_end, ids))
        else:
            ids.add(literal_id)
    return lines


# Who printed a line, where a combined log says so: torchrun's [rank3]: or [default3]:, srun -l's
# "3: ", NCCL's host:pid (its thread apart).
_PRINTER = re.compile(rb"\s*(?:\[(rank\d+)\]:|\[([A-Za-z_]+\d+)\]:|(\d{1,6}): |([\w.-]+:\d+):\d+ \[)")
REST_WITHIN = 8  # lines of other printers looked past for the rest of a message


def _printer(line: bytes) -> bytes | None:
    found = _PRINTER.match(line)
    return None if found is None else next(g for g in found.groups() if g is not None)


def _rest_of(body: bytes, start: int, nxt: int) -> int:
    """Where the rest of the message on the line at ``start`` begins: the next line of the
    same printer (none named, or the same rank or host:pid), past as many as REST_WITHIN
    lines of others in a log that several ranks print into; else the next line."""
    size = len(body)
    if nxt >= size:
        return nxt
    header = _printer(body[start:start + 80])
    at = nxt
    for _ in range(REST_WITHIN):
        if _printer(body[at:at + 80]) == header:
            return at
        end = body.find(b"\n", at)
        if end < 0 or end + 1 >= size:
            return nxt
        at = end + 1
    return nxt


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").rstrip("\r")


def _before(body: bytes, start: int, n: int) -> list[str]:
    """Up to n lines before ``start`` in the same block (for multi-line reports)."""
    window_start = start
    for _ in range(n):
        if window_start <= 0:
            break
        window_start = body.rfind(b"\n", 0, window_start - 1) + 1
    chunk = body[window_start:start][-MAX_LINE:]
    return [_decode(line) for line in chunk.split(b"\n")[:-1]]
