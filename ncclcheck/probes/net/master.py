"""The net family's MASTER_ADDR / MASTER_PORT checks: where the store lives and whether it can
be reached.

Pure judgement of ``MasterFacts`` (resolution, route, the port's state on the master, one
connection attempt from a worker), all gathered by ``facts.gather_facts``.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.catalogue import catalogue_fix
from ncclcheck.model import Category, CheckResult, failed, passed, skipped, warned
from ncclcheck.probes.net.facts import Facts, MasterFacts, PortFromWorker, PortOnMaster
from ncclcheck.probes.spec import CheckSpec, judge

IFACE = Category.INTERFACE

MASTER_ADDR = CheckSpec(
    "net.master_addr", "MASTER_ADDR resolves and is reachable",
    (Category.NAME_RESOLUTION, Category.CONNECTION, IFACE),
    fails_when="MASTER_ADDR does not resolve, resolves to loopback in a multi-node "
               "job, is not this host on rank 0, or has no route",
    warns_when="the store and NCCL would use different networks",
    order=60)
MASTER_PORT = CheckSpec(
    "net.master_port", "MASTER_PORT is free on the master, open from workers",
    (Category.PORT_IN_USE, Category.CONNECTION, Category.CONFIGURATION),
    fails_when="MASTER_PORT is not a port number (1-65535), another process holds "
               "the port, or a worker's connection is refused (in cluster mode), "
               "dropped or unroutable",
    warns_when="the port lies in the ephemeral range, or nothing listens yet outside "
               "cluster mode",
    order=70)


@judge(MASTER_ADDR, MASTER_PORT)
def check_master(facts: Facts) -> list[CheckResult]:
    """Both checks when MASTER_ADDR or MASTER_PORT was looked at (not with --local alone)."""
    if facts.master is None:
        return []
    return [check_master_addr(facts, facts.master), check_master_port(facts, facts.master)]


def check_master_addr(facts: Facts, master: MasterFacts) -> CheckResult:
    if not master.address:
        return skipped(MASTER_ADDR,
                       "MASTER_ADDR is not set (single process, or the launcher sets it "
                       "later)", master_addr=None)
    res = master.resolution
    assert res is not None
    details: dict[str, Any] = {"master_addr": master.address, "resolved": res.addresses,
                               "families": res.families, "is_this_host": master.local,
                               "must_host_store": master.hosts_store, "role_known":
                               master.role is not None}
    if not res.ok:
        return failed(MASTER_ADDR,
                      f"MASTER_ADDR={master.address} does not resolve on {facts.ctx.host}: "
                      f"{res.error}",
                      f"Set MASTER_ADDR to the rank-0 node's IP address, or make "
                      f"{master.address!r} resolve on every node (DNS, /etc/hosts).",
                      Category.NAME_RESOLUTION, error=res.error, **details)
    shown = ", ".join(f"{a} ({f})" for f, a in res.addresses)
    wrong_host = _wrong_host(facts, master, shown, details)
    if wrong_host is not None:
        return wrong_host
    return _master_route(facts, master, shown, details)


def _wrong_host(facts: Facts, master: MasterFacts, shown: str,
                details: dict[str, Any]) -> CheckResult | None:
    """A failure when MASTER_ADDR points at the wrong node for this one's role, else None."""
    res = master.resolution
    assert res is not None
    loopback = all(ip.startswith("127.") or ip == "::1" for _, ip in res.addresses)
    if master.role is True and not master.local:
        return failed(MASTER_ADDR,
                      f"this node must host the store (rank 0), but MASTER_ADDR="
                      f"{master.address} resolves to {shown}, not an address of this host",
                      f"Set MASTER_ADDR to this node's address ("
                      f"{facts.bootstrap.address if facts.bootstrap else 'its IP'}) on every rank, "
                      f"or start rank 0 on {master.address}.", Category.NAME_RESOLUTION, **details)
    if facts.multi_node and loopback:
        mine = facts.bootstrap.address if facts.bootstrap and master.hosts_store else None
        return failed(MASTER_ADDR,
                      f"multi-node job, but MASTER_ADDR={master.address} resolves to "
                      f"loopback ({shown}): other nodes look for the store on themselves",
                      f"Set MASTER_ADDR to the rank-0 node's routable address or host name "
                      f"(e.g. {mine or '<node-0 IP>'}).", Category.NAME_RESOLUTION, **details)
    if master.role is False and master.local and facts.multi_node:
        return failed(MASTER_ADDR, f"MASTER_ADDR={master.address} is this host, but rank 0 runs on "
                                   "another node",
                      "Export the same MASTER_ADDR (the rank-0 node) on every node.",
                      Category.NAME_RESOLUTION, **details)
    return None


def _master_route(facts: Facts, master: MasterFacts, shown: str,
                  details: dict[str, Any]) -> CheckResult:
    """The route to the master against NCCL's interface: the store and NCCL should share it."""
    route = master.route
    details["route_interface"] = route.name if route else None
    nccl = facts.bootstrap.name if facts.bootstrap else None
    details["nccl_interface"] = nccl
    details["route_is_nccl_interface"] = bool(route and nccl and route.name == nccl)
    where = ("this host" if master.local else f"via {route.name}" if route else "no route")
    summary = f"MASTER_ADDR={master.address} -> {shown}; {where}"
    if route is None and not master.local:
        return failed(MASTER_ADDR,
                      f"MASTER_ADDR={master.address} -> {shown}: no route from this host",
                      "Add a route to the rank-0 node or set MASTER_ADDR to an address on a "
                      "network this node is attached to.", Category.CONNECTION, **details)
    if (not master.local and facts.multi_node and route is not None and nccl
            and route.name != nccl):
        return warned(MASTER_ADDR,
                      f"{summary}, but NCCL will use {nccl}: the store and NCCL run over "
                      "different networks",
                      f"Make both paths work, or set NCCL_SOCKET_IFNAME={route.name} "
                      f"(and GLOO_SOCKET_IFNAME={route.name}) to use the network that reaches "
                      "the master.", IFACE, **details)
    if nccl:
        summary += f"; NCCL uses {nccl}"
    return passed(MASTER_ADDR, summary, **details)


def check_master_port(facts: Facts, master: MasterFacts) -> CheckResult:
    port = master.port
    if port is None:
        raw = facts.env.get("MASTER_PORT")
        if raw is not None:  # judged here too: `ncclcheck net` runs without the ranks family
            return failed(MASTER_PORT,
                          f"MASTER_PORT={raw!r} is not a TCP port number (1-65535): torch's "
                          "env:// rendezvous cannot listen on or dial it",
                          "Set MASTER_PORT to a free TCP port number between 1024 and 65535 "
                          "(e.g. 29500), the same on every rank.", Category.CONFIGURATION,
                          master_port=raw)
        return skipped(MASTER_PORT, "MASTER_PORT is not set", master_port=None)
    details: dict[str, Any] = {"master_port": port, "master_addr": master.address}
    if master.address and master.resolution and not master.resolution.ok:
        return skipped(MASTER_PORT,
                       f"port {port} not checked: MASTER_ADDR does not resolve", **details)
    if master.on_master is not None:
        return judge_port_on_master(port, master.on_master, details)
    assert master.from_worker is not None
    return judge_port_from_worker(facts.ctx.host, facts.ctx.cluster is not None, master, port,
                                  master.from_worker, details)


def judge_port_on_master(port: int, seen: PortOnMaster, details: dict[str, Any]) -> CheckResult:
    """The port where the store will listen: held by a stranger fails, ephemeral warns."""
    state, low_high = seen.state, seen.ephemeral_range
    details.update(free=state.free, bind_error=state.error, ephemeral_range=low_high,
                   in_ephemeral_range=seen.in_ephemeral_range,
                   holders=[{"pid": h.pid, "name": h.name, "cmdline": h.cmdline,
                             "address": h.address, "relation": h.relation}
                            for h in state.holders])
    ours = [h for h in state.holders if h.relation]
    strangers = [h for h in state.holders if not h.relation]
    if not state.free and (strangers or not ours):
        who = ", ".join(h.describe() for h in strangers) or "a process this user cannot see"
        here = (f"Here: stop that process, or choose another MASTER_PORT on every rank (e.g. "
                f"MASTER_PORT={seen.suggestion}).")
        return failed(MASTER_PORT, f"MASTER_PORT={port} is already in use on this host by {who}",
                      catalogue_fix("torch.store_port_in_use", here, {"port": port}),
                      Category.PORT_IN_USE, signature="torch.store_port_in_use", **details)
    if not state.free:
        summary = f"MASTER_PORT={port} is held by {ours[0].relation} ({ours[0].describe()})"
    else:
        summary = f"MASTER_PORT={port} is free to bind on this host"
    if seen.in_ephemeral_range and state.free and low_high:
        return warned(MASTER_PORT,
                      f"{summary}, but it lies in the ephemeral range "
                      f"{low_high[0]}-{low_high[1]}: an outgoing connection can take it first",
                      f"Choose MASTER_PORT outside {low_high[0]}-{low_high[1]} (e.g. "
                      f"MASTER_PORT={seen.suggestion}), or reserve it: sysctl -w "
                      f"net.ipv4.ip_local_reserved_ports={port}.", Category.PORT_IN_USE, **details)
    return passed(MASTER_PORT, summary, **details)


def judge_port_from_worker(host: str, in_cluster: bool, master: MasterFacts, port: int,
                           seen: PortFromWorker, details: dict[str, Any]) -> CheckResult:
    """One connection from a worker: refused warns outside cluster mode (the job may not have
    started yet), every other failure fails."""
    result, address, timeout = seen.result, seen.address, seen.timeout
    details.update(kind=result.kind, seconds=round(result.seconds, 3), error=result.error,
                   connect_timeout_s=timeout)
    target = f"{master.address}:{port}" + (f" ({address})" if address != master.address else "")
    if result.ok:
        return passed(MASTER_PORT, f"{target} accepts TCP connections from {host} "
                                   f"({result.seconds * 1000:.0f} ms)", **details)
    if result.kind == "refused":
        summary = f"{target} refused the connection: nothing listens there"
        fix = (f"Start rank 0 on {master.address} with MASTER_PORT={port}, and check that every "
               "rank uses the same MASTER_ADDR and MASTER_PORT.")
        if not in_cluster:
            return warned(MASTER_PORT, summary + " (yet: fine if the job has not started)", fix,
                          Category.CONNECTION, **details)
        return failed(MASTER_PORT, summary, fix, Category.CONNECTION, **details)
    if result.kind == "timeout":
        return failed(MASTER_PORT, f"{target} did not answer within {timeout:.1f} s: packets are "
                                   "dropped on the way (firewall, security group)",
                      f"Allow TCP port {port} from this node to {master.address} (iptables / "
                      "firewalld / cloud security group).", Category.CONNECTION, **details)
    if result.kind == "unreachable":
        return failed(MASTER_PORT, f"{target}: no route to the master ({result.error})",
                      f"Route this node to {master.address}, or set MASTER_ADDR to an address "
                      "on a network both nodes share.", Category.CONNECTION, **details)
    return failed(MASTER_PORT, f"{target}: connect failed ({result.error})",
                  f"Check that TCP port {port} on {master.address} is reachable from this node.",
                  Category.CONNECTION, **details)
