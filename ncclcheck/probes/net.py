"""The net family: interfaces, the interface NCCL and Gloo will pick, MASTER_ADDR / MASTER_PORT,
and (cluster mode) the node-to-node mesh.

Node scope: in cluster mode only each node's leader runs it. The interface prediction is pure
(ncclcheck.network.interfaces); this module only gathers the facts and judges them.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any, Sequence

from ncclcheck.context import ProbeContext
from ncclcheck.network.interfaces import (Interface, NcclPrediction, SocketChoice, dead_entries,
                                  explain_nccl_choice,
                                  find, gloo_interface_names, ifname_setting, list_ib_ports,
                                  list_interfaces, predict_gloo_interfaces, predict_nccl_bootstrap,
                                  propose_ifname, tp_interface_name, IfList,
                                  socket_family)
from ncclcheck.launchers import Layout, read_layout
from ncclcheck.ncclib.config_files import nccl_environment
from ncclcheck.ncclib.wheel import installed_nccl_version
from ncclcheck.network.master import (Resolution, check_port, ephemeral_range, is_local_address,
                              reach, reserved_ports, resolve, route_interface)
from ncclcheck.explain.catalogue import catalogue_fix
from ncclcheck.model import Category, CheckResult, errored, failed, passed, skipped, warned
from ncclcheck.registry import CheckSpec

IFACE = Category.INTERFACE
NO_IFACE_SIG = "nccl.no_socket_interface"  # catalogue signature for NCCL finding no interface
NO_INTERFACE = "Bootstrap : no socket interface found"


@dataclass
class Facts:
    """What every check reads, gathered once."""

    ctx: ProbeContext
    env: dict[str, str]  # the process environment plus nccl.conf values
    layout: Layout
    interfaces: list[Interface]
    nccl: NcclPrediction
    bootstrap: SocketChoice | None
    gloo: list[SocketChoice | None]
    hostname: str
    hostname_resolution: Resolution
    nccl_version: str | None
    multi_node: bool

    @property
    def gloo_first(self) -> SocketChoice | None:
        return self.gloo[0] if self.gloo else None


def probe(ctx: ProbeContext) -> list[CheckResult]:
    facts = gather_facts(ctx)
    results = [
        check_interfaces(facts),
        check_infiniband(ctx),
        check_nccl_interface(facts),
        check_gloo_interface(facts),
    ]
    if tp_interface_name(facts.env) is not None:
        results.append(check_tp_interface(facts))
    master = MasterFacts.collect(facts)
    results += [check_master_addr(facts, master), check_master_port(facts, master)]
    results += cluster_checks(facts)
    return results


# --------------------------------------------------------------------------------------------
# facts
# --------------------------------------------------------------------------------------------
def nccl_rules_version(ctx: ProbeContext) -> str | None:
    """The version of the libnccl this job would load, read from the file (never loaded),
    else from the wheel's metadata; None applies the newest rules."""
    if ctx.options.net.nccl_version:
        return str(ctx.options.net.nccl_version)
    try:
        from ncclcheck.ncclib import discover
        winner = discover(ctx.env).winner
        if winner is not None and winner.version:
            return winner.version
    except Exception:  # discovery is a refinement; the wheel metadata still answers
        pass
    return installed_nccl_version()


def is_multi_node(ctx: ProbeContext, layout: Layout) -> bool:
    """Does the job span several nodes? Flags first, then the launcher, then the session."""
    nodes = ctx.nodes or layout.num_nodes
    if nodes:
        return nodes > 1
    if layout.node_rank:
        return True
    local = layout.local_world_size
    if local is None and (ctx.env.get("LOCAL_WORLD_SIZE") or "").strip().isdigit():
        local = int(ctx.env["LOCAL_WORLD_SIZE"])
    if layout.world_size and local:
        return layout.world_size > local
    if ctx.cluster is not None:
        return len(ctx.cluster.node_leaders(timeout=min(2.0, ctx.remaining() / 10))) > 1
    return False


def gather_facts(ctx: ProbeContext) -> Facts:
    env = nccl_environment(ctx.env)
    layout, _ = read_layout(ctx.env)
    interfaces = list_interfaces()
    version = nccl_rules_version(ctx)
    hostname = socket.gethostname()
    host_res = resolve(hostname, min(3.0, max(0.2, ctx.remaining() / 10)))
    gloo = predict_gloo_interfaces(env, interfaces, [a for _, a in host_res.addresses])

    def first_address(host: str) -> str | None:  # for a NCCL_COMM_ID naming a host
        return resolve(host, min(3.0, max(0.2, ctx.remaining() / 10))).first

    return Facts(ctx, env, layout, interfaces,
                 explain_nccl_choice(env, interfaces, version, first_address),
                 predict_nccl_bootstrap(env, interfaces, version, first_address), gloo, hostname,
                 host_res, version, is_multi_node(ctx, layout))


def _listing(interfaces: Sequence[Interface]) -> str:
    return "; ".join(i.describe() for i in interfaces)


# --------------------------------------------------------------------------------------------
# interfaces
# --------------------------------------------------------------------------------------------
def check_interfaces(facts: Facts) -> CheckResult:
    usable = [i for i in facts.interfaces if i.running and i.addresses]
    shown = ", ".join(f"{i.name} {i.addresses[0].address} mtu {i.mtu}" for i in usable[:8])
    more = f" and {len(usable) - 8} more" if len(usable) > 8 else ""
    return passed("net.interfaces",
                  f"{len(facts.interfaces)} interfaces, {len(usable)} up with an address: "
                  f"{shown}{more}", interfaces=[i.to_dict() for i in facts.interfaces])


def check_infiniband(ctx: ProbeContext) -> CheckResult:
    ports = list_ib_ports(ctx.options.net.sys_infiniband or "/sys/class/infiniband")
    if not ports:
        return skipped("net.infiniband", "no InfiniBand / RoCE device (/sys/class/infiniband)",
                       ports=[])
    details = {"ports": [p.to_dict() for p in ports]}
    inactive = [p for p in ports if p.state.upper() != "ACTIVE"]
    listed = ", ".join(f"{p.device}:{p.port} {p.state} {p.link_layer or ''} {p.rate or ''}".strip()
                       for p in ports)
    if inactive:
        names = ", ".join(f"{p.device}:{p.port} ({p.state})" for p in inactive)
        active = [p for p in ports if p not in inactive]
        hca = ",".join(sorted({f"{p.device}:{p.port}" for p in active}))
        fix = (f"Bring the port(s) up (cable, switch, subnet manager: `ibstat`), or leave them out "
               f"with NCCL_IB_HCA={'=' + hca if hca else '<active HCA>'}.")
        return warned("net.infiniband", f"RDMA port(s) not active: {names}", fix,
                      Category.INFINIBAND, **details)
    return passed("net.infiniband", f"{len(ports)} RDMA port(s) active: {listed}", **details)


def _why_not(iflist: IfList, facts: Facts) -> list[str]:
    """Per interface whose name matches the user's list: why NCCL still cannot use it."""
    reasons = []
    family = facts.nccl.family
    for iface in facts.interfaces:
        if not iflist.matches(iface.name):
            continue
        if not iface.addresses:
            reasons.append(f"{iface.name} has no IP address")
        elif not iface.running:
            reasons.append(f"{iface.name} is {iface.state}")
        elif family and not any(a.family == family for a in iface.addresses):
            reasons.append(f"{iface.name} has no {'IPv6' if family == 'inet6' else 'IPv4'} "
                           f"address (NCCL_SOCKET_FAMILY={facts.env.get('NCCL_SOCKET_FAMILY')})")
    return reasons


def _choice_details(facts: Facts) -> dict[str, Any]:
    gloo = facts.gloo_first
    return {
        "nccl_interfaces": facts.nccl.names,
        "nccl_addresses": [c.address for c in facts.nccl.interfaces],
        "nccl_bootstrap": str(facts.bootstrap) if facts.bootstrap else None,
        "nccl_rule": facts.nccl.rule,
        "nccl_socket_ifname": facts.env.get("NCCL_SOCKET_IFNAME"),
        "nccl_socket_family": facts.env.get("NCCL_SOCKET_FAMILY"),
        "nccl_version": facts.nccl_version,
        "nccl_rules": ".".join(str(v) for v in facts.nccl.version),
        "gloo_interface": gloo.name if gloo else None,
        "gloo_address": gloo.address if gloo else None,
        "gloo_interfaces": [c.name if c else None for c in facts.gloo],
        "gloo_socket_ifname": facts.env.get("GLOO_SOCKET_IFNAME"),
        "multi_node": facts.multi_node,
    }


def _propose(facts: Facts) -> str:
    value = propose_ifname(facts.interfaces)
    listing = _listing([i for i in facts.interfaces if i.addresses]) or "none has an address"
    if value:
        return f"This host's interfaces: {listing}. Try NCCL_SOCKET_IFNAME={value}"
    return f"This host's interfaces: {listing}. Give one of them an address and bring it up."


def _doubtful(choice: SocketChoice, facts: Facts) -> str | None:
    """Why a multi-node job should not run on this interface, or None."""
    iface = find(facts.interfaces, choice.name)
    if iface is not None and (iface.loopback or choice.name.startswith("lo")):
        return "loopback, which no other node can reach"
    if iface is not None and iface.is_virtual_bridge:
        return "a docker / virtual bridge, which does not lead to other nodes"
    if choice.family and ":" in choice.address and choice.address.lower().startswith("fe80"):
        return "an IPv6 link-local address, which needs the same link on every node"
    if choice.address.startswith("169.254."):
        return "an IPv4 link-local address (169.254/16): no DHCP lease, no route to other nodes"
    return None


def _real_case(entry: str, interfaces: Sequence[Interface]) -> str:
    """``ETH`` -> ``eth`` when only the case keeps an entry from matching."""
    if any(i.name.startswith(entry) for i in interfaces):
        return entry
    near = next((i.name for i in interfaces if i.name.lower().startswith(entry.lower())), None)
    return near[:len(entry)] if near else entry


def check_nccl_interface(facts: Facts) -> CheckResult:
    """The predicting check: details.nccl_interfaces (NCCL's order) and details.gloo_interface."""
    details = _choice_details(facts)
    setting = ifname_setting(facts.env)
    if facts.bootstrap is None:
        if setting is not None:
            reasons = _why_not(IfList.parse(setting), facts) + [
                f"entry {entry!r} never matches: {why}"
                for entry, why in dead_entries(setting, [i.name for i in facts.interfaces])]
            because = "; ".join(reasons) if reasons else "no interface has such a name"
            summary = (f"NCCL_SOCKET_IFNAME={setting} matches no usable interface ({because}): "
                       f"NCCL will fail with '{NO_INTERFACE}'")
            fix = _propose(facts)
            down = [i.name for i in facts.interfaces
                    if IfList.parse(setting).matches(i.name) and i.addresses and not i.up]
            if down:
                fix = (f"Bring {', '.join(down)} up (`ip link set {down[0]} up`), or change "
                       f"it. {fix}")
            fix = catalogue_fix(NO_IFACE_SIG, fix, f"Here: {fix}")
            return failed("net.nccl_interface", summary, fix, IFACE, reasons=reasons,
                          signature=NO_IFACE_SIG, **details)
        family = facts.env.get("NCCL_SOCKET_FAMILY")
        summary = (f"no interface is up with an {'IPv6' if family == 'AF_INET6' else 'IP'} "
                   f"address: NCCL will fail with '{NO_INTERFACE}'")
        fix = _propose(facts)
        if socket_family(facts.env):
            fix = f"Unset NCCL_SOCKET_FAMILY={family}, or give an interface such an address. " + fix
        fix = catalogue_fix(NO_IFACE_SIG, fix, f"Here: {fix}")
        return failed("net.nccl_interface", summary, fix, IFACE, signature=NO_IFACE_SIG,
                      **details)
    boot = facts.bootstrap
    others = [n for n in facts.nccl.names if n != boot.name]
    also = f" (sockets also on {', '.join(others)})" if others else ""
    gloo = facts.gloo_first
    gloo_text = f"; Gloo: {gloo}" if gloo else ""
    summary = f"NCCL will use {boot}{also} [{facts.nccl.rule}]{gloo_text}"
    listed = IfList.parse(setting).entries if setting is not None else ()
    if len(listed) > 1 and not IfList.parse(setting).exclude and not boot.name.startswith(
            listed[0]):
        summary += " (list order is no priority: NCCL takes the kernel's order)"
    dead = dead_entries(setting, [i.name for i in facts.interfaces]) if setting is not None else []
    problem = _doubtful(boot, facts)
    if dead and not (problem and facts.multi_node):
        shown = "; ".join(f"{entry!r}: {why}" for entry, why in dead)
        fixed = ",".join(_real_case(e.strip().lstrip("=^"), facts.interfaces) for e in listed)
        return warned("net.nccl_interface", f"{summary}, but NCCL_SOCKET_IFNAME has entries that "
                                            f"never match ({shown})",
                      f"Write the list without spaces, with '^' / '=' once at the front, in the "
                      f"interfaces' exact case: NCCL_SOCKET_IFNAME="
                      f"{'^' if IfList.parse(setting).exclude else ''}"
                      f"{'=' if IfList.parse(setting).exact else ''}{fixed}", IFACE,
                      dead_entries=[e for e, _ in dead], **details)
    if problem and facts.multi_node:
        better = propose_ifname(facts.interfaces)
        fix = (f"Set NCCL_SOCKET_IFNAME to the interface that connects the nodes"
               f"{f', e.g. NCCL_SOCKET_IFNAME={better}' if better else ''} (and GLOO_SOCKET_IFNAME "
               "to the same name).")
        return warned("net.nccl_interface", f"multi-node job, but NCCL will use {boot}: {problem}",
                      fix, IFACE, **details)
    return passed("net.nccl_interface", summary, **details)


def check_gloo_interface(facts: Facts) -> CheckResult:
    details = _choice_details(facts)
    names = gloo_interface_names(facts.env)
    if names is not None:
        missing = [n for n, c in zip(names, facts.gloo) if c is None]
        if missing:
            shown = ", ".join(repr(n) for n in missing)
            summary = (f"GLOO_SOCKET_IFNAME={facts.env['GLOO_SOCKET_IFNAME']} names {shown}, which "
                       "has no IP address here: torch will raise 'Unable to find address for'")
            nccl = facts.bootstrap.name if facts.bootstrap else None
            fix = (f"Set GLOO_SOCKET_IFNAME to exact interface names (comma-separated, no spaces)"
                   f"{f', e.g. GLOO_SOCKET_IFNAME={nccl}' if nccl else ''}. "
                   f"This host's interfaces: "
                   f"{_listing([i for i in facts.interfaces if i.addresses])}")
            fix = catalogue_fix("gloo.unknown_interface", fix, f"Here: {fix}")
            return failed("net.gloo_interface", summary, fix, IFACE,
                          signature="gloo.unknown_interface", **details)
    gloo = facts.gloo_first
    if gloo is None:  # unreachable in practice: the fallback is loopback
        return skipped("net.gloo_interface", "Gloo's interface could not be predicted", **details)
    source = (f"GLOO_SOCKET_IFNAME={facts.env['GLOO_SOCKET_IFNAME']}" if names is not None else
              f"host name {facts.hostname!r} -> {facts.hostname_resolution.first or 'unresolved'}")
    problem = _doubtful(gloo, facts)
    if problem and facts.multi_node:
        nccl = facts.bootstrap.name if facts.bootstrap else None
        fix = (f"Set GLOO_SOCKET_IFNAME={nccl or '<interface between the nodes>'}"
               + (" (or map the host name to that interface's address in /etc/hosts)."
                  if names is None else "."))
        return warned("net.gloo_interface",
                      f"multi-node job, but Gloo will bind {gloo} ({source}): {problem}",
                      fix, IFACE, **details)
    return passed("net.gloo_interface", f"Gloo will bind {gloo} ({source})", **details)


def check_tp_interface(facts: Facts) -> CheckResult:
    name = tp_interface_name(facts.env) or ""
    iface = find(facts.interfaces, name)
    if iface is None or not iface.addresses:
        why = "does not exist" if iface is None else "has no IP address"
        return failed("net.tp_interface",
                      f"TP_SOCKET_IFNAME={name} {why}: torch RPC (TensorPipe) cannot bind it",
                      f"Set TP_SOCKET_IFNAME to one interface name. {_propose(facts)}", IFACE,
                      tp_socket_ifname=name)
    return passed("net.tp_interface", f"TensorPipe will use {iface.describe()}",
                  tp_socket_ifname=name)


# --------------------------------------------------------------------------------------------
# master address and port
# --------------------------------------------------------------------------------------------
@dataclass
class MasterFacts:
    address: str | None
    port: int | None
    resolution: Resolution | None
    local: bool  # MASTER_ADDR is one of this host's addresses
    role: bool | None  # this node must host the store (None: the launcher does not say)

    @property
    def hosts_store(self) -> bool:
        return self.role if self.role is not None else self.local

    @classmethod
    def collect(cls, facts: Facts) -> "MasterFacts":
        layout = facts.layout
        address = layout.master_addr or facts.env.get("MASTER_ADDR") or None
        port = layout.master_port
        resolution = None
        local = False
        if address:
            resolution = resolve(address, min(5.0, max(0.2, facts.ctx.remaining() / 6)))
            local = any(is_local_address(a, facts.interfaces) for _, a in resolution.addresses)
        return cls(address, port, resolution, local, master_role(layout))


def master_role(layout: Layout) -> bool | None:
    """Whether this process's node hosts rank 0 (and so the store)."""
    if layout.node_rank is not None:
        return layout.node_rank == 0
    if layout.rank is not None and layout.local_world_size:
        return layout.rank < layout.local_world_size
    if layout.rank is not None and layout.world_size and layout.world_size > 1:
        return layout.rank == 0
    return None


def check_master_addr(facts: Facts, master: MasterFacts) -> CheckResult:
    cid = "net.master_addr"
    if not master.address:
        return skipped(cid, "MASTER_ADDR is not set (single process, or the launcher sets it "
                            "later)", master_addr=None)
    res = master.resolution
    assert res is not None
    details: dict[str, Any] = {"master_addr": master.address, "resolved": res.addresses,
                               "families": res.families, "is_this_host": master.local,
                               "must_host_store": master.hosts_store, "role_known":
                               master.role is not None}
    if not res.ok:
        return failed(cid, f"MASTER_ADDR={master.address} does not resolve on {facts.ctx.host}: "
                           f"{res.error}",
                      f"Set MASTER_ADDR to the rank-0 node's IP address, or make "
                      f"{master.address!r} resolve on every node (DNS, /etc/hosts).",
                      Category.NAME_RESOLUTION, error=res.error, **details)
    first = res.first or ""
    shown = ", ".join(f"{a} ({f})" for f, a in res.addresses)
    loopback = all(ip.startswith("127.") or ip == "::1" for _, ip in res.addresses)
    if master.role is True and not master.local:
        return failed(cid, f"this node must host the store (rank 0), but MASTER_ADDR="
                           f"{master.address} resolves to {shown}, not an address of this host",
                      f"Set MASTER_ADDR to this node's address ("
                      f"{facts.bootstrap.address if facts.bootstrap else 'its IP'}) on every rank, "
                      f"or start rank 0 on {master.address}.", Category.NAME_RESOLUTION, **details)
    if facts.multi_node and loopback:
        mine = facts.bootstrap.address if facts.bootstrap and master.hosts_store else None
        return failed(cid, f"multi-node job, but MASTER_ADDR={master.address} resolves to "
                           f"loopback ({shown}): other nodes look for the store on themselves",
                      f"Set MASTER_ADDR to the rank-0 node's routable address or host name "
                      f"(e.g. {mine or '<node-0 IP>'}).", Category.NAME_RESOLUTION, **details)
    if master.role is False and master.local and facts.multi_node:
        return failed(cid, f"MASTER_ADDR={master.address} is this host, but rank 0 runs on "
                           "another node",
                      "Export the same MASTER_ADDR (the rank-0 node) on every node.",
                      Category.NAME_RESOLUTION, **details)
    route = route_interface(first, facts.interfaces)
    details["route_interface"] = route.name if route else None
    nccl = facts.bootstrap.name if facts.bootstrap else None
    details["nccl_interface"] = nccl
    details["route_is_nccl_interface"] = bool(route and nccl and route.name == nccl)
    where = ("this host" if master.local else f"via {route.name}" if route else "no route")
    summary = f"MASTER_ADDR={master.address} -> {shown}; {where}"
    if route is None and not master.local:
        return failed(cid, f"MASTER_ADDR={master.address} -> {shown}: no route from this host",
                      "Add a route to the rank-0 node or set MASTER_ADDR to an address on a "
                      "network this node is attached to.", Category.CONNECTION, **details)
    if (not master.local and facts.multi_node and route is not None and nccl
            and route.name != nccl):
        return warned(cid, f"{summary}, but NCCL will use {nccl}: the store and NCCL run over "
                           "different networks",
                      f"Make both paths work, or set NCCL_SOCKET_IFNAME={route.name} "
                      f"(and GLOO_SOCKET_IFNAME={route.name}) to use the network that reaches "
                      "the master.", IFACE, **details)
    if nccl:
        summary += f"; NCCL uses {nccl}"
    return passed(cid, summary, **details)


def check_master_port(facts: Facts, master: MasterFacts) -> CheckResult:
    cid = "net.master_port"
    port = master.port
    if port is None:
        raw = facts.env.get("MASTER_PORT")
        if raw is not None:  # judged here too: `ncclcheck net` runs without the ranks family
            return failed(cid, f"MASTER_PORT={raw!r} is not a TCP port number (1-65535): torch's "
                               "env:// rendezvous cannot listen on or dial it",
                          "Set MASTER_PORT to a free TCP port number between 1024 and 65535 "
                          "(e.g. 29500), the same on every rank.", Category.CONFIGURATION,
                          master_port=raw)
        return skipped(cid, "MASTER_PORT is not set", master_port=None)
    details: dict[str, Any] = {"master_port": port, "master_addr": master.address}
    if master.address and master.resolution and not master.resolution.ok:
        return skipped(cid, f"port {port} not checked: MASTER_ADDR does not resolve", **details)
    if master.hosts_store or not master.address:
        return _port_on_master(facts, port, details)
    return _port_from_worker(facts, master, port, details)


def _port_on_master(facts: Facts, port: int, details: dict[str, Any]) -> CheckResult:
    cid = "net.master_port"
    state = check_port(port)
    low_high = ephemeral_range()
    ephemeral = bool(low_high and low_high[0] <= port <= low_high[1]
                     and port not in reserved_ports())
    details.update(free=state.free, bind_error=state.error, ephemeral_range=low_high,
                   in_ephemeral_range=ephemeral,
                   holders=[{"pid": h.pid, "name": h.name, "cmdline": h.cmdline,
                             "address": h.address, "relation": h.relation}
                            for h in state.holders])
    ours = [h for h in state.holders if h.relation]
    strangers = [h for h in state.holders if not h.relation]
    suggestion = _free_port_outside(low_high)
    if not state.free and (strangers or not ours):
        who = ", ".join(h.describe() for h in strangers) or "a process this user cannot see"
        here = (f"Here: stop that process, or choose another MASTER_PORT on every rank (e.g. "
                f"MASTER_PORT={suggestion}).")
        return failed(cid, f"MASTER_PORT={port} is already in use on this host by {who}",
                      catalogue_fix("torch.store_port_in_use", here, here, {"port": port}),
                      Category.PORT_IN_USE, signature="torch.store_port_in_use", **details)
    if not state.free:
        summary = f"MASTER_PORT={port} is held by {ours[0].relation} ({ours[0].describe()})"
    else:
        summary = f"MASTER_PORT={port} is free to bind on this host"
    if ephemeral and state.free:
        return warned(cid, f"{summary}, but it lies in the ephemeral range "
                           f"{low_high[0]}-{low_high[1]}: an outgoing connection can take it first",
                      f"Choose MASTER_PORT outside {low_high[0]}-{low_high[1]} (e.g. "
                      f"MASTER_PORT={suggestion}), or reserve it: sysctl -w "
                      f"net.ipv4.ip_local_reserved_ports={port}.", Category.PORT_IN_USE, **details)
    return passed(cid, summary, **details)


def _free_port_outside(low_high: tuple[int, int] | None) -> int:
    for candidate in (29500, 29400, 23456, 12355, 18888, 20000):
        if low_high and low_high[0] <= candidate <= low_high[1]:
            continue
        if check_port(candidate).free:
            return candidate
    return 29500


def _port_from_worker(facts: Facts, master: MasterFacts, port: int,
                      details: dict[str, Any]) -> CheckResult:
    cid = "net.master_port"
    address = master.resolution.first if master.resolution else None
    assert address is not None
    timeout = min(5.0, max(0.2, facts.ctx.remaining() / 5))
    result = reach(address, port, timeout)
    details.update(kind=result.kind, seconds=round(result.seconds, 3), error=result.error,
                   connect_timeout_s=timeout)
    target = f"{master.address}:{port}" + (f" ({address})" if address != master.address else "")
    if result.ok:
        return passed(cid, f"{target} accepts TCP connections from {facts.ctx.host} "
                           f"({result.seconds * 1000:.0f} ms)", **details)
    in_cluster = facts.ctx.cluster is not None
    if result.kind == "refused":
        summary = f"{target} refused the connection: nothing listens there"
        fix = (f"Start rank 0 on {master.address} with MASTER_PORT={port}, and check that every "
               "rank uses the same MASTER_ADDR and MASTER_PORT.")
        if not in_cluster:
            return warned(cid, summary + " (yet: fine if the job has not started)", fix,
                          Category.CONNECTION, **details)
        return failed(cid, summary, fix, Category.CONNECTION, **details)
    if result.kind == "timeout":
        return failed(cid, f"{target} did not answer within {timeout:.1f} s: packets are "
                           "dropped on the way (firewall, security group)",
                      f"Allow TCP port {port} from this node to {master.address} (iptables / "
                      "firewalld / cloud security group).", Category.CONNECTION, **details)
    if result.kind == "unreachable":
        return failed(cid, f"{target}: no route to the master ({result.error})",
                      f"Route this node to {master.address}, or set MASTER_ADDR to an address "
                      "on a network both nodes share.", Category.CONNECTION, **details)
    return failed(cid, f"{target}: connect failed ({result.error})",
                  f"Check that TCP port {port} on {master.address} is reachable from this node.",
                  Category.CONNECTION, **details)


# --------------------------------------------------------------------------------------------
# cluster mode: the mesh and the cross-node comparison
# --------------------------------------------------------------------------------------------
def cluster_checks(facts: Facts) -> list[CheckResult]:
    session = facts.ctx.cluster
    if session is None:
        return [skipped("net.mesh", "the node-to-node mesh runs in cluster mode only (under a "
                                    "launcher with WORLD_SIZE > 1)")]
    if facts.bootstrap is None:
        return [skipped("net.mesh", "no mesh: NCCL has no interface on this node "
                                    "(see net.nccl_interface)")]
    from ncclcheck.network.mesh import FULL_MESH_MAX, run_mesh
    iface = find(facts.interfaces, facts.bootstrap.name)
    full_max = int(facts.ctx.options.net.mesh_full_max or FULL_MESH_MAX)
    budget = max(0.5, facts.ctx.remaining() - 0.5)
    timeout = facts.ctx.options.net.mesh_connect_timeout
    try:
        outcome = run_mesh(session, facts.bootstrap.address, facts.bootstrap.name,
                           iface.mtu if iface else None, budget, full_max=full_max,
                           connect_timeout=float(timeout) if timeout else None)
    except (OSError, RuntimeError, ValueError) as exc:  # the other checks still count
        return [errored("net.mesh", f"the mesh could not run on {facts.ctx.host}: "
                                    f"{type(exc).__name__}: {exc}",
                        f"Check that {facts.bootstrap.address} can be bound on this node and "
                        "that the cluster store is still reachable.", Category.CONNECTION,
                        address=facts.bootstrap.address, error=str(exc))]
    return [mesh_result(outcome)] + consistency(outcome, session.rank)


def mesh_result(outcome: Any) -> CheckResult:
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
        return failed("net.mesh", f"{outcome.me.host} cannot open connections to "
                                  f"{len(outcome.failures)} node(s): {text}", fix,
                      Category.CONNECTION, **details)
    if outcome.missing:
        return warned("net.mesh", f"node leader rank(s) {outcome.missing} never published a "
                                  "mesh endpoint: their links were not tested",
                      "See the cluster.* checks for ranks that did not report; rerun with a "
                      "larger --timeout.", Category.TIMEOUT, **details)
    count = len(outcome.attempts)
    if count == 0 and len(outcome.leaders) <= 1:
        return passed("net.mesh", f"single node ({outcome.me.host}): no node-to-node links to "
                                  "test", **details)
    return passed("net.mesh", f"{outcome.me.host} reached {count} node(s) on their NCCL "
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
        return [warned("net.consistency", "; ".join(problems),
                       "Give every node the same NCCL_SOCKET_IFNAME (exact: =name) and the same "
                       "MTU on that network (`ip link set <if> mtu <n>`, switch config).",
                       IFACE, **details)]
    only = next(iter(names.values()))
    return [passed("net.consistency", f"all {len(endpoints)} nodes use {only} with MTU "
                                      f"{next(iter(mtus.values()))}", **details)]


# --------------------------------------------------------------------------------------------
# the checks this family can report
# --------------------------------------------------------------------------------------------
CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("net.interfaces", "This host's network interfaces",
              doc="Lists every interface with its state, addresses, MTU, speed and kind; "
                  "information only, it always passes."),
    CheckSpec("net.infiniband", "InfiniBand / RoCE ports are active", (Category.INFINIBAND,),
              warns_when="an RDMA port is not ACTIVE",
              doc="Reads /sys/class/infiniband; skipped on hosts without RDMA devices."),
    CheckSpec("net.nccl_interface", "The interface NCCL will bootstrap on", (IFACE,),
              fails_when="NCCL_SOCKET_IFNAME (as NCCL parses it, no trimming) or the default "
                         "rules match no running interface with an address",
              warns_when="NCCL_SOCKET_IFNAME has entries that never match, or a multi-node "
                         "job would run on loopback, a container bridge or a link-local address",
              doc="Predicts NCCL's choice with its own rules (environment plus nccl.conf), "
                  "in getifaddrs() order; details.nccl_interfaces is NCCL's list."),
    CheckSpec("net.gloo_interface", "The interface Gloo will use", (IFACE,),
              fails_when="GLOO_SOCKET_IFNAME names an interface without an address",
              warns_when="a multi-node job's Gloo device is loopback, a container bridge or "
                         "a link-local address"),
    CheckSpec("net.tp_interface", "TP_SOCKET_IFNAME names an interface", (IFACE,),
              fails_when="TP_SOCKET_IFNAME names no interface with an address"),
    CheckSpec("net.master_addr", "MASTER_ADDR resolves and is reachable",
              (Category.NAME_RESOLUTION, Category.CONNECTION, IFACE),
              fails_when="MASTER_ADDR does not resolve, resolves to loopback in a multi-node "
                         "job, is not this host on rank 0, or has no route",
              warns_when="the store and NCCL would use different networks"),
    CheckSpec("net.master_port", "MASTER_PORT is free on the master, open from workers",
              (Category.PORT_IN_USE, Category.CONNECTION, Category.CONFIGURATION),
              fails_when="MASTER_PORT is not a port number (1-65535), another process holds "
                         "the port, or a worker's connection is refused (in cluster mode), "
                         "dropped or unroutable",
              warns_when="the port lies in the ephemeral range, or nothing listens yet outside "
                         "cluster mode"),
    CheckSpec("net.mesh", "Every node reaches every other on NCCL's interface",
              (Category.CONNECTION, Category.TIMEOUT),
              fails_when="a node cannot open a TCP connection to another node's NCCL address",
              warns_when="a node leader never published its endpoint",
              doc="Cluster mode only; errors when the mesh itself cannot run."),
    CheckSpec("net.consistency", "Nodes agree on NCCL's interface name and MTU", (IFACE,),
              warns_when="the nodes' NCCL interface names or MTUs differ"),
)
