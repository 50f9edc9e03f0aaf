"""The net family in cluster mode: every node leader dials the others on NCCL's interface
(``net.mesh``), and the first leader compares the nodes' interface names and MTUs
(``net.consistency``).

``facts.run_cluster_mesh`` is the I/O; ``mesh_checks``, ``mesh_result`` and ``consistency``
only judge what it returned.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.context import longer_timeout
from ncclcheck.model import Category, CheckResult, errored, failed, passed, skipped, warned
from ncclcheck.probes.net.facts import Facts, MeshRun
from ncclcheck.probes.spec import CheckSpec, judge

IFACE = Category.INTERFACE

MESH = CheckSpec(
    "net.mesh", "Every node reaches every other on NCCL's interface",
    (Category.CONNECTION, Category.TIMEOUT),
    fails_when="a node cannot open a TCP connection to another node's NCCL address",
    warns_when="a node leader never published its endpoint (the links to the others were "
               "tested)",
    doc="Cluster mode only; errors when the mesh itself cannot run, or when no other node "
        "leader published its endpoint within the mesh's share of --timeout, so not one link "
        "was tested (the fix names a longer --timeout).",
    order=80)
CONSISTENCY = CheckSpec(
    "net.consistency", "Nodes agree on NCCL's interface name and MTU", (IFACE,),
    warns_when="the nodes' NCCL interface names or MTUs differ",
    order=90)


@judge(MESH, CONSISTENCY)
def check_mesh(facts: Facts) -> list[CheckResult]:
    """The mesh's checks when it was gathered (always, in the probe; tests may leave it out)."""
    if facts.mesh is None:
        return []
    return mesh_checks(facts.mesh, facts.ctx.host, timeout=facts.ctx.timeout)


def mesh_checks(run: MeshRun, host: str, *, timeout: float | None = None) -> list[CheckResult]:
    """net.mesh (and, on the first leader, net.consistency) from one mesh run on ``host``;
    ``timeout`` (the command's) sizes the one suggested when the deadline left nothing tested."""
    if run.not_run is not None:
        return [skipped(MESH, run.not_run)]
    if run.outcome is None:
        return [errored(MESH, f"the mesh could not run on {host}: "
                              f"{run.error_type}: {run.error}",
                        f"Check that {run.address} can be bound on this node and "
                        "that the cluster store is still reachable.", Category.CONNECTION,
                        address=run.address, error=run.error)]
    return [mesh_result(run.outcome, timeout)] + consistency(run.outcome, run.rank)


def mesh_result(outcome: Any, timeout: float | None = None) -> CheckResult:
    details = {
        "address": outcome.me.address, "port": outcome.me.port,
        "plan": "full mesh" if outcome.full else "ring + random peers",
        "attempts": [a.to_dict() for a in outcome.attempts],
        "failures": [a.to_dict() for a in outcome.failures],
        "accepted_from": sorted(outcome.accepted),
        "rejected_connections": len(outcome.rejected),
        "nodes": {str(r): h for r, h in sorted(outcome.leaders.items())},
        "missing": outcome.missing, "late": outcome.late,
    }
    if outcome.failures:
        kinds = {"refused": "refused", "timeout": "timed out (dropped)",
                 "unreachable": "no route", "handshake": "wrong answer", "error": "failed"}
        text = "; ".join(f"-> {a.dst_host} {a.address}:{a.port} {kinds.get(a.kind, a.kind)}"
                         for a in outcome.failures)
        first = outcome.failures[0]
        fix = (f"Allow TCP from {first.src_host} ({outcome.me.address}) to {first.dst_host} "
               f"({first.address}) on all ports NCCL uses (it picks ephemeral ports): check "
               "iptables/nftables, security groups and routes on both nodes; or set "
               "NCCL_SOCKET_IFNAME to an interface on a network all nodes share.")
        return failed(MESH, f"{outcome.me.host} cannot open connections to "
                            f"{len(outcome.failures)} node(s): {text}", fix,
                      Category.CONNECTION, **details)
    if outcome.missing and not outcome.attempts:
        longer = (f"--timeout {longer_timeout(timeout)} (this run had {timeout:g})"
                  if timeout is not None else "a longer --timeout")
        return errored(MESH, f"nothing measured: no link tested, since node leader rank(s) "
                             f"{outcome.missing} never published a mesh endpoint within the "
                             "mesh's share of the deadline",
                       "See the cluster.* checks for ranks that did not report; when every "
                       f"rank reported, give the mesh more time: {longer}.",
                       Category.TIMEOUT, **details)
    if outcome.missing:
        return warned(MESH, f"node leader rank(s) {outcome.missing} never published a "
                            "mesh endpoint: their links were not tested",
                      "See the cluster.* checks for ranks that did not report; rerun with a "
                      "larger --timeout.", Category.TIMEOUT, **details)
    count = len(outcome.attempts)
    if count == 0 and len(outcome.leaders) <= 1:
        return passed(MESH, f"single node ({outcome.me.host}): no node-to-node links to "
                            "test", **details)
    return passed(MESH, f"{outcome.me.host} reached {count} node(s) on their NCCL "
                        f"interfaces ({details['plan']})", **details)


def consistency(outcome: Any, rank: int) -> list[CheckResult]:
    """Do the nodes agree on NCCL's interface name and MTU? Reported once, by the first leader."""
    endpoints = outcome.endpoints
    if not endpoints or rank != min(endpoints):
        return []
    names = {r: e.ifname for r, e in endpoints.items()}
    mtus = {r: e.mtu for r, e in endpoints.items()}
    details = {"interfaces": {f"{endpoints[r].host} (rank {r})": n for r, n in names.items()},
               "mtus": {f"{endpoints[r].host} (rank {r})": m for r, m in mtus.items()}}
    problems = []
    if len(set(names.values())) > 1:
        problems.append("NCCL interface names differ: " + ", ".join(
            f"{endpoints[r].host}={n}" for r, n in sorted(names.items())))
    if len(set(m for m in mtus.values() if m)) > 1:
        problems.append("MTUs differ: " + ", ".join(
            f"{endpoints[r].host}={m}" for r, m in sorted(mtus.items())))
    if problems:
        return [warned(CONSISTENCY, "; ".join(problems),
                       "Give every node the same NCCL_SOCKET_IFNAME (exact: =name) and the same "
                       "MTU on that network (`ip link set <if> mtu <n>`, switch config).",
                       IFACE, **details)]
    only = next(iter(names.values()))
    return [passed(CONSISTENCY, f"all {len(endpoints)} nodes use {only} with MTU "
                                f"{next(iter(mtus.values()))}", **details)]
