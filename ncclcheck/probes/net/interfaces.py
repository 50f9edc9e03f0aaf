"""The net family's interface checks: the host's interfaces and RDMA ports, and the interface
NCCL, Gloo and TensorPipe will each pick.

Pure judgement of ``Facts`` (gathered by ``facts.gather_facts``); the prediction itself is
``ncclcheck.network``'s.
"""

from __future__ import annotations

from typing import Any, Sequence

from ncclcheck.catalogue import catalogue_fix
from ncclcheck.model import Category, CheckResult, failed, passed, skipped, warned
from ncclcheck.network.interfaces import (IbPort, IfList, Interface, SocketChoice, dead_entries,
                                          find, gloo_interface_names, ifname_setting,
                                          propose_ifname, socket_family, tp_interface_name)
from ncclcheck.probes.net.facts import Facts
from ncclcheck.probes.spec import CheckSpec, judge

IFACE = Category.INTERFACE
NO_IFACE_SIG = "nccl.no_socket_interface"  # catalogue signature for NCCL finding no interface
NO_INTERFACE = "Bootstrap : no socket interface found"

INTERFACES = CheckSpec(
    "net.interfaces", "This host's network interfaces",
    doc="Lists every interface with its state, addresses, MTU, speed and kind; "
        "information only, it always passes.",
    order=10)
INFINIBAND = CheckSpec(
    "net.infiniband", "InfiniBand / RoCE ports are active", (Category.INFINIBAND,),
    warns_when="an RDMA port is not ACTIVE",
    doc="Reads /sys/class/infiniband; skipped on hosts without RDMA devices.",
    order=20)
NCCL_INTERFACE = CheckSpec(
    "net.nccl_interface", "The interface NCCL will bootstrap on", (IFACE,),
    fails_when="NCCL_SOCKET_IFNAME (as NCCL parses it, no trimming) or the default "
               "rules match no running interface with an address",
    warns_when="NCCL_SOCKET_IFNAME has entries that never match, or a multi-node "
               "job would run on loopback, a container bridge or a link-local address",
    doc="Predicts NCCL's choice with its own rules (environment plus nccl.conf), "
        "in getifaddrs() order; details.nccl_interfaces is NCCL's list.",
    order=30)
GLOO_INTERFACE = CheckSpec(
    "net.gloo_interface", "The interface Gloo will use", (IFACE,),
    fails_when="GLOO_SOCKET_IFNAME names an interface without an address",
    warns_when="a multi-node job's Gloo device is loopback, a container bridge or "
               "a link-local address",
    order=40)
TP_INTERFACE = CheckSpec(
    "net.tp_interface", "TP_SOCKET_IFNAME names an interface", (IFACE,),
    fails_when="TP_SOCKET_IFNAME names no interface with an address",
    order=50)


def _listing(interfaces: Sequence[Interface]) -> str:
    return "; ".join(i.describe() for i in interfaces)


@judge(INTERFACES)
def check_interfaces(facts: Facts) -> CheckResult:
    usable = [i for i in facts.interfaces if i.running and i.addresses]
    shown = ", ".join(f"{i.name} {i.addresses[0].address} mtu {i.mtu}" for i in usable[:8])
    more = f" and {len(usable) - 8} more" if len(usable) > 8 else ""
    return passed(INTERFACES,
                  f"{len(facts.interfaces)} interfaces, {len(usable)} up with an address: "
                  f"{shown}{more}", interfaces=[i.to_dict() for i in facts.interfaces])


@judge(INFINIBAND)
def judge_infiniband(facts: Facts) -> CheckResult:
    return check_infiniband(facts.ib_ports)


def check_infiniband(ports: Sequence[IbPort]) -> CheckResult:
    """RDMA ports (read from /sys/class/infiniband by the facts step) that are not ACTIVE."""
    if not ports:
        return skipped(INFINIBAND, "no InfiniBand / RoCE device (/sys/class/infiniband)",
                       ports=[])
    details = {"ports": [p.to_dict() for p in ports]}
    inactive = [p for p in ports if not p.active]
    listed = ", ".join(f"{p.device}:{p.port} {p.state} {p.link_layer or ''} {p.rate or ''}".strip()
                       for p in ports)
    if inactive:
        names = ", ".join(f"{p.device}:{p.port} ({p.state})" for p in inactive)
        active = [p for p in ports if p not in inactive]
        hca = ",".join(sorted({f"{p.device}:{p.port}" for p in active}))
        fix = (f"Bring the port(s) up (cable, switch, subnet manager: `ibstat`), or leave them out "
               f"with NCCL_IB_HCA={'=' + hca if hca else '<active HCA>'}.")
        return warned(INFINIBAND, f"RDMA port(s) not active: {names}", fix,
                      Category.INFINIBAND, **details)
    return passed(INFINIBAND, f"{len(ports)} RDMA port(s) active: {listed}", **details)


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


def _no_nccl_interface(facts: Facts, setting: str | None,
                       details: dict[str, Any]) -> CheckResult:
    """NCCL will find no interface: why, for the user's list or for the default rules."""
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
        fix = catalogue_fix(NO_IFACE_SIG, f"Here: {fix}")
        return failed(NCCL_INTERFACE, summary, fix, IFACE, reasons=reasons,
                      signature=NO_IFACE_SIG, **details)
    family = facts.env.get("NCCL_SOCKET_FAMILY")
    summary = (f"no interface is up with an {'IPv6' if family == 'AF_INET6' else 'IP'} "
               f"address: NCCL will fail with '{NO_INTERFACE}'")
    fix = _propose(facts)
    if socket_family(facts.env):
        fix = f"Unset NCCL_SOCKET_FAMILY={family}, or give an interface such an address. " + fix
    fix = catalogue_fix(NO_IFACE_SIG, f"Here: {fix}")
    return failed(NCCL_INTERFACE, summary, fix, IFACE, signature=NO_IFACE_SIG,
                  **details)


@judge(NCCL_INTERFACE)
def check_nccl_interface(facts: Facts) -> CheckResult:
    """The predicting check: details.nccl_interfaces (NCCL's order) and details.gloo_interface."""
    details = _choice_details(facts)
    setting = ifname_setting(facts.env)
    if facts.bootstrap is None:
        return _no_nccl_interface(facts, setting, details)
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
        return warned(NCCL_INTERFACE, f"{summary}, but NCCL_SOCKET_IFNAME has entries that "
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
        return warned(NCCL_INTERFACE, f"multi-node job, but NCCL will use {boot}: {problem}",
                      fix, IFACE, **details)
    return passed(NCCL_INTERFACE, summary, **details)


@judge(GLOO_INTERFACE)
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
            fix = catalogue_fix("gloo.unknown_interface", f"Here: {fix}")
            return failed(GLOO_INTERFACE, summary, fix, IFACE,
                          signature="gloo.unknown_interface", **details)
    gloo = facts.gloo_first
    if gloo is None:  # unreachable in practice: the fallback is loopback
        return skipped(GLOO_INTERFACE, "Gloo's interface could not be predicted", **details)
    source = (f"GLOO_SOCKET_IFNAME={facts.env['GLOO_SOCKET_IFNAME']}" if names is not None else
              f"host name {facts.hostname!r} -> {facts.hostname_resolution.first or 'unresolved'}")
    problem = _doubtful(gloo, facts)
    if problem and facts.multi_node:
        nccl = facts.bootstrap.name if facts.bootstrap else None
        fix = (f"Set GLOO_SOCKET_IFNAME={nccl or '<interface between the nodes>'}"
               + (" (or map the host name to that interface's address in /etc/hosts)."
                  if names is None else "."))
        return warned(GLOO_INTERFACE,
                      f"multi-node job, but Gloo will bind {gloo} ({source}): {problem}",
                      fix, IFACE, **details)
    return passed(GLOO_INTERFACE, f"Gloo will bind {gloo} ({source})", **details)


@judge(TP_INTERFACE)
def check_tp_interface(facts: Facts) -> CheckResult | None:
    """Only when TP_SOCKET_IFNAME is set: torch RPC is the one user of it."""
    name = tp_interface_name(facts.env)
    if name is None:
        return None
    iface = find(facts.interfaces, name)
    if iface is None or not iface.addresses:
        why = "does not exist" if iface is None else "has no IP address"
        return failed(TP_INTERFACE,
                      f"TP_SOCKET_IFNAME={name} {why}: torch RPC (TensorPipe) cannot bind it",
                      f"Set TP_SOCKET_IFNAME to one interface name. {_propose(facts)}", IFACE,
                      tp_socket_ifname=name)
    return passed(TP_INTERFACE, f"TensorPipe will use {iface.describe()}",
                  tp_socket_ifname=name)
