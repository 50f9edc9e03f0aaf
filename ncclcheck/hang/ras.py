"""NCCL's RAS report (NCCL >= 2.24), where its client ``ncclras`` is on the PATH: which ranks
of which communicators are missing, unresponsive or dead, and which ranks are behind in
collective counts.

RAS sees what Python stacks cannot: a rank whose process is alive but whose NCCL has stopped
answering, and a dead process on a node nobody snapshotted. Its client prints a text report
(every release) and, from 2.28.7, JSON (``-f json``); both are read here, as NCCL's
documentation shows them, and JSON is asked for first. The report covers the whole job, from
any node.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from typing import Any

_PROCESS = re.compile(r"Process (\d+) on node (\S+) managing GPUs? ([\d, ]+)")
_RANK_LINE = re.compile(r"Rank (\d+) -- GPU (\d+) managed by process (\d+) on node (\S+)")
_MISSING = re.compile(r"The missing ranks?: ([\d,\s-]+)")
_GROUP = re.compile(r"^(\d+) ranks? ha(?:s|ve) (.+)$")
_COMM = re.compile(r"^#(\d+-\d+) \((\w+)\) (\S+)")
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+([\d-]+)\s+(\d+)\s+(\d+)\s+([A-Z_]+)"
                  r"\s+([A-Z_]+)\s*$")
_SECTION = re.compile(r"^\s*(Job summary|Communicators.*|Errors|Warnings)\s*$")


@dataclass
class RasRank:
    """A rank (or a process) RAS names."""

    rank: int | None
    host: str | None
    pid: int | None
    gpu: int | None = None
    why: str = "missing"       # missing, unresponsive, dead; for outliers what RAS says of them
    comm: str | None = None    # the communicator ("#0-0", or its hash in JSON)
    size: int | None = None    # that communicator's size, where the report gives it


@dataclass
class RasReport:
    """What RAS said, reduced to what a verdict can use; ``raw`` keeps its text or JSON."""

    form: str                                   # "json" or "text"
    communicators: list[dict[str, Any]] = field(default_factory=list)
    missing: list[RasRank] = field(default_factory=list)       # per communicator
    dead: list[RasRank] = field(default_factory=list)          # processes declared dead
    outliers: list[RasRank] = field(default_factory=list)      # ranks of a MISMATCH's minority
    warnings: list[str] = field(default_factory=list)

    def missing_ranks(self, world_size: int | None = None) -> list[int]:
        """Ranks missing from a communicator of the whole job (its size is the world size, or
        unknown): a rank of a smaller communicator is numbered in that communicator only."""
        return sorted({m.rank for m in self.missing if m.rank is not None
                       and (world_size is None or m.size in (None, world_size))})

    def to_dict(self) -> dict[str, Any]:
        return {"form": self.form, "communicators": self.communicators,
                "missing": [asdict(m) for m in self.missing],
                "dead": [asdict(d) for d in self.dead],
                "outliers": [asdict(b) for b in self.outliers], "warnings": self.warnings}


def _numbers(text: str) -> list[int]:
    """'3, 5-7' -> [3, 5, 6, 7]."""
    out: list[int] = []
    for part in re.split(r"[,\s]+", text.strip()):
        low, dash, high = part.partition("-")
        if low.isdigit() and (not dash or high.isdigit()):
            out.extend(range(int(low), int(high if dash else low) + 1))
    return out


def parse_text(text: str) -> RasReport:
    """The client's text report (``ncclras`` / ``ncclras -v``)."""
    report = RasReport("text")
    section = entry = comm = says = ""
    indent: int | None = None
    for raw in text.splitlines():
        if not raw.strip() or set(raw.strip()) <= {"="}:
            continue
        heading = _SECTION.match(raw)
        if heading:
            section, entry, indent = heading.group(1).split("...")[0].strip(), "", None
            continue
        row = _ROW.match(raw)
        if section == "Communicators" and row:
            report.communicators.append({
                "id": f"#{row.group(1)}", "group": int(row.group(1)),
                "comms": int(row.group(2)), "size": int(row.group(5)),
                "status": row.group(7), "errors": row.group(8)})
            continue
        if section not in ("Errors", "Warnings"):
            continue
        depth = len(raw) - len(raw.lstrip())
        line = raw.strip()
        if indent is None or depth <= indent:  # an entry's heading: DEAD, #0-0 (hash) MISMATCH
            indent = depth
            found = _COMM.match(line)
            entry, comm, says = (found.group(3), f"#{found.group(1)}", "") if found else (
                line, "", "")
            if section == "Warnings" and not found:
                report.warnings.append(line)
            continue
        group = _GROUP.match(line)
        if group:
            says = line
            continue
        _detail(report, section, entry, comm, says, line)
    return report


def _size_of(report: RasReport, comm: str) -> int | None:
    """A communicator's size from the summary table (``#0-1`` is in group 0)."""
    group = comm.lstrip("#").partition("-")[0]
    sizes = [c["size"] for c in report.communicators if str(c.get("group")) == group]
    return sizes[0] if len(sizes) == 1 else None


def _detail(report: RasReport, section: str, entry: str, comm: str, says: str,
            line: str) -> None:
    """One indented line under an entry of the Errors or Warnings section."""
    process = _PROCESS.search(line)
    if process:
        gpus = _numbers(process.group(3))
        item = RasRank(None, process.group(2), int(process.group(1)), gpus[0] if gpus else None,
                       "dead" if entry == "DEAD" else "unresponsive")
        (report.dead if entry == "DEAD" else report.missing).append(item)
        return
    missing = _MISSING.search(line)
    if missing:
        size = _size_of(report, comm)
        report.missing.extend(RasRank(rank, None, None, None, "missing", comm or None, size)
                              for rank in _numbers(missing.group(1)))
        return
    rank_line = _RANK_LINE.search(line)
    if rank_line and entry == "MISMATCH":
        report.outliers.append(RasRank(int(rank_line.group(1)), rank_line.group(4),
                                       int(rank_line.group(3)), int(rank_line.group(2)),
                                       says or "outlier", comm or None, _size_of(report, comm)))
        return
    if section == "Warnings" and comm:
        report.warnings.append(f"{comm}: {line}")


def parse_json(text: str) -> RasReport:
    """The client's JSON report (``ncclras -f json``, NCCL >= 2.28.7)."""
    data = json.loads(text)
    if not isinstance(data, dict) or "communicators" not in data:
        raise ValueError("not a RAS JSON report")
    report = RasReport("json")
    for n, comm in enumerate(data.get("communicators") or []):
        ident = str(comm.get("hash") or f"#{n}")
        report.communicators.append({"id": ident, "size": comm.get("size"),
                                     "ranks": comm.get("ranks_count"),
                                     "missing": comm.get("missing_ranks_count")})
        for item in comm.get("missing_ranks") or []:
            status = item.get("status") or {}
            why = "dead" if status.get("considered_dead") else (
                "unresponsive" if status.get("unresponsive") else "missing")
            report.missing.append(RasRank(item.get("rank"), item.get("host"), item.get("pid"),
                                          item.get("cuda_dev"), why, ident, comm.get("size")))
        totals = {r.get("rank"): sum((r.get("collective_counts") or {}).values())
                  for r in comm.get("ranks") or [] if isinstance(r.get("rank"), int)}
        if totals and len(set(totals.values())) > 1:
            top = max(totals.values())
            for r in comm.get("ranks") or []:
                if totals.get(r.get("rank"), top) < top:
                    report.outliers.append(RasRank(
                        r.get("rank"), r.get("host"), r.get("pid"), r.get("cuda_dev"),
                        f"launched {totals[r.get('rank')]} collectives where others "
                        f"launched {top}", ident, comm.get("size")))
    timeouts = (data.get("ras") or {}).get("timeouts_count")
    if timeouts:
        report.warnings.append(f"{timeouts} communication timeouts while gathering data")
    return report


def query(timeout: float, address: str | None = None) -> tuple[RasReport | None, str | None]:
    """Ask RAS through ``ncclras`` (JSON first, then text); (report, None), or (None, why not)
    — None, None when ncclras is not installed."""
    client = shutil.which("ncclras")
    if client is None:
        return None, None
    where: list[str] = []
    if address:
        host, _, port = address.rpartition(":")
        where = (["-h", host] if host else []) + (["-p", port] if port.isdigit() else [])
    seconds = str(max(1, int(timeout)))
    last = ""
    for extra, parse in ((["-f", "json"], parse_json), (["-v"], parse_text)):
        try:
            done = subprocess.run([client, *where, "-t", seconds, *extra], capture_output=True,
                                  text=True, timeout=timeout + 2, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return None, f"ncclras did not answer within {timeout:.0f} s"
        except OSError as exc:
            return None, f"ncclras could not run: {exc.strerror or exc}"
        if done.returncode == 0 and done.stdout.strip():
            try:
                return parse(done.stdout), None
            except ValueError:
                last = "unreadable output"
                continue
        last = " ".join((done.stderr or done.stdout).split())[:200] or f"exit {done.returncode}"
    return None, f"ncclras: {last} (NCCL < 2.24, RAS disabled, or no NCCL communicator here)"
