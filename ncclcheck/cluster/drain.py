"""``--on-fail drain``: take the nodes the failing checks are about out of Slurm's scheduling.

Site health checks (NHC, gcm, aznhc) drain a bad node with a reason so no new job lands on it
and an admin sees why in ``sinfo -R``. The plan is pure (which nodes, which reason) and never
reaches beyond the nodes the failing checks name; running ``scontrol`` is a separate step with
a deadline, and what it did comes back as data the report can show.

Which node a failing check is about:
- the hosts in its ``details.slow_nodes``, when it has that list (``bench.isolate``: rank 0
  reports it, but it is about the slow nodes only; an empty list, a slow link alone, drains
  nothing);
- else its ``host`` (every result of a rank carries one in cluster mode);
- else its ``rank``, through the job's rank -> host map;
- else, for a job-wide check, the hosts it names in ``details.odd_hosts`` or
  ``details.hosts``, and the ranks it names in ``details.ranks``.
A failing check that names no node drains nothing (it is listed as such).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Mapping

from ncclcheck.model import CheckResult, Status

from .ranges import parse_ranges

ON_FAIL_ACTIONS = ("drain",)  # what --on-fail can do: only drain, only under Slurm
REASON_LIMIT = 200  # characters; sinfo -R shows the start, scontrol keeps the rest
_PREFIX = "ncclcheck: "


@dataclass(frozen=True)
class DrainPlan:
    """One node to drain, the reason Slurm will show, and the checks behind it."""

    node: str
    reason: str
    checks: tuple[str, ...]


@dataclass
class DrainAction:
    """What happened when draining one node."""

    node: str
    reason: str
    checks: list[str]
    drained: bool
    message: str = ""
    command: list[str] = field(default_factory=list)


@dataclass
class DrainResult:
    """Everything ``--on-fail drain`` did: the nodes drained (or not, and why), and the failing
    checks that named no node and so drained nothing."""

    actions: list[DrainAction] = field(default_factory=list)
    unplaced_checks: list[str] = field(default_factory=list)
    note: str | None = None

    @property
    def drained_nodes(self) -> list[str]:
        return [a.node for a in self.actions if a.drained]

    @property
    def ok(self) -> bool:
        return all(a.drained for a in self.actions)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def drain_reason(checks: Iterable[CheckResult], limit: int = REASON_LIMIT) -> str:
    """``ncclcheck: <id>: <summary>`` for the first failing check, ``(+N more: ids)`` for the
    rest, cut to ``limit`` characters at a word boundary with ``...``."""
    checks = list(checks)
    if not checks:
        raise ValueError("a drain reason needs at least one failing check")
    first, rest = checks[0], checks[1:]
    tail = ""
    if rest:
        ids = sorted({c.id for c in rest} - {first.id})
        more = f": {', '.join(ids)}" if ids else ""
        tail = f" (+{len(rest)} more{more})"
    head = _one_line(f"{_PREFIX}{first.id}: {first.summary}")
    if len(head) + len(tail) <= limit:
        return head + tail
    if len(tail) > limit // 2:
        tail = f" (+{len(rest)} more)"
    room = max(limit - len(tail) - 3, len(_PREFIX))
    cut = head[:room]
    if " " in cut[len(_PREFIX):]:
        cut = cut[:cut.rindex(" ")]
    return cut.rstrip(" :;,") + "..." + tail


def _hosts_named(check: CheckResult, rank_hosts: Mapping[int, str]) -> list[str]:
    named = check.details.get("slow_nodes")
    if isinstance(named, list):
        return list(dict.fromkeys(h for h in named if isinstance(h, str) and h))
    if check.host:
        return [check.host]
    if check.rank is not None:
        return [rank_hosts[check.rank]] if check.rank in rank_hosts else []
    hosts: list[str] = []
    for key in ("odd_hosts", "hosts"):
        value = check.details.get(key)
        if isinstance(value, list):
            hosts += [h for h in value if isinstance(h, str) and h]
    ranks = check.details.get("ranks")
    if isinstance(ranks, list):
        hosts += [rank_hosts[r] for r in ranks if isinstance(r, int) and r in rank_hosts]
    return list(dict.fromkeys(hosts))


def plan_drain(*, checks: Iterable[CheckResult], rank_hosts: Mapping[int, str] | None = None,
               node_names: Mapping[str, str] | None = None,
               limit: int = REASON_LIMIT) -> tuple[list[DrainPlan], list[str]]:
    """The nodes to drain for the failing checks (status ``fail`` only: an ``error`` is a check
    that could not run, not evidence against the node), and the ids of failing checks that
    name no node. ``node_names`` maps a host name to its Slurm node name where they differ
    (e.g. ``SLURMD_NODENAME`` for this host)."""
    rank_hosts = rank_hosts or {}
    node_names = node_names or {}
    per_node: dict[str, list[CheckResult]] = {}
    unplaced: list[str] = []
    for check in checks:
        if check.status is not Status.FAIL:
            continue
        hosts = _hosts_named(check, rank_hosts)
        if not hosts:
            unplaced.append(check.id)
        for host in hosts:
            per_node.setdefault(node_names.get(host, host), []).append(check)
    plans = [DrainPlan(node, drain_reason(found, limit), tuple(dict.fromkeys(c.id for c in found)))
             for node, found in per_node.items()]
    return plans, unplaced


Runner = Callable[..., subprocess.CompletedProcess]


def drain_nodes(plans: Iterable[DrainPlan], *, timeout: float = 10.0,
                scontrol: str | None = None, env: Mapping[str, str] | None = None,
                run: Runner = subprocess.run) -> DrainResult:
    """Run ``scontrol update nodename=X state=drain reason=...`` for each plan, all within
    ``timeout`` seconds. Nothing is drained when scontrol is not installed (the result says so)."""
    plans = list(plans)
    result = DrainResult()
    path = scontrol or shutil.which("scontrol", path=(env or {}).get("PATH") if env else None)
    if not path:
        result.note = "scontrol is not installed: no node drained"
        result.actions = [DrainAction(p.node, p.reason, list(p.checks), False, result.note)
                          for p in plans]
        return result
    deadline = time.monotonic() + timeout
    for plan in plans:
        command = [path, "update", f"nodename={plan.node}", "state=drain", f"reason={plan.reason}"]
        left = deadline - time.monotonic()
        action = DrainAction(plan.node, plan.reason, list(plan.checks), False, command=command)
        result.actions.append(action)
        if left <= 0:
            action.message = f"not attempted: the {timeout:g} s deadline had passed"
            continue
        try:
            done = run(command, capture_output=True, text=True, timeout=left,
                       env=dict(env) if env is not None else None)
        except subprocess.TimeoutExpired:
            action.message = f"scontrol did not answer within {timeout:g} s"
            continue
        except OSError as exc:
            action.message = f"cannot run scontrol: {exc}"
            continue
        action.drained = done.returncode == 0
        action.message = _one_line(done.stderr or done.stdout) or (
            "drained" if action.drained else f"scontrol exited {done.returncode}")
    return result


def drain_failing_nodes(*, checks: Iterable[CheckResult],
                        rank_hosts: Mapping[int, str] | None = None,
                        node_names: Mapping[str, str] | None = None, timeout: float = 10.0,
                        env: Mapping[str, str] | None = None) -> DrainResult:
    """``--on-fail drain`` in one call: plan from the report's checks, then drain."""
    plans, unplaced = plan_drain(checks=checks, rank_hosts=rank_hosts, node_names=node_names)
    result = drain_nodes(plans, timeout=timeout, env=env)
    result.unplaced_checks = unplaced
    return result


def rank_hosts_of(report_context: Mapping[str, Any]) -> dict[int, str]:
    """rank -> host from a job report's ``context.cluster.ranks_by_host`` (empty outside
    cluster mode, where every result carries this host)."""
    by_host = (report_context.get("cluster") or {}).get("ranks_by_host") or {}
    return {rank: host for host, ranks in by_host.items()
            for rank in (parse_ranges(ranks) if isinstance(ranks, str) else ranks)
            if isinstance(rank, int)}


def drain_for_report(report: Any, env: Mapping[str, str], timeout: float = 10.0) -> DrainResult:
    """``--on-fail drain`` for a finished report: the nodes its failing checks name, with this
    host mapped to its Slurm node name (SLURMD_NODENAME) where the two differ."""
    host = str(report.context.get("host") or "")
    node = env.get("SLURMD_NODENAME")
    node_names = {host: node} if host and node else {}
    return drain_failing_nodes(checks=report.checks, rank_hosts=rank_hosts_of(report.context),
                               node_names=node_names, timeout=timeout, env=env)


def describe(result: DrainResult) -> str:
    """One stderr line saying what ``--on-fail drain`` did."""
    parts = [f"drained {a.node} ({a.reason})" if a.drained
             else f"could not drain {a.node}: {a.message}" for a in result.actions]
    if result.unplaced_checks:
        parts.append(f"no node named by {', '.join(result.unplaced_checks)}")
    if not result.actions and not result.unplaced_checks:
        parts.append("no failing check: nothing drained")
    return "ncclcheck: --on-fail drain: " + "; ".join(parts)
