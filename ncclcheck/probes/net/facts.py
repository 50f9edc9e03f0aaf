"""The net family's facts: every read of the host (interfaces, RDMA ports, name resolution,
the master port, the node-to-node mesh) happens here, once, so the checks only judge.

Tests build ``Facts`` and ``MasterFacts`` by hand; ``gather_facts`` is the one road to them
from a real host.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any, Sequence

from ncclcheck.context import ProbeContext
from ncclcheck.launchers import Layout, read_layout
from ncclcheck.ncclib.discovery import discover
from ncclcheck.ncclib.config_files import nccl_environment
from ncclcheck.ncclib.wheel import installed_nccl_version
from ncclcheck.network.interfaces import (SYS_CLASS_INFINIBAND, IbPort, Interface, NcclPrediction,
                                          SocketChoice, explain_nccl_choice, find, list_ib_ports,
                                          list_interfaces, predict_gloo_interfaces,
                                          predict_nccl_bootstrap)
from ncclcheck.network.master import (PortCheck, Reach, Resolution, check_port, ephemeral_range,
                                      is_local_address, reach, reserved_ports, resolve,
                                      route_interface)
from ncclcheck.network.mesh import FULL_MESH_MAX, run_mesh

# Ports proposed instead of a busy or ephemeral MASTER_PORT, in order of preference.
PORT_CANDIDATES = (29500, 29400, 23456, 12355, 18888, 20000)
CLUSTER_ONLY = ("the node-to-node mesh runs in cluster mode only (under a launcher with "
                "WORLD_SIZE > 1)")
NO_NCCL_INTERFACE = "no mesh: NCCL has no interface on this node (see net.nccl_interface)"


@dataclass
class PortOnMaster:
    """MASTER_PORT as seen on the host that must serve it."""

    state: PortCheck
    ephemeral_range: tuple[int, int] | None
    in_ephemeral_range: bool  # and not reserved
    suggestion: int  # a free port outside the ephemeral range, to propose


@dataclass
class PortFromWorker:
    """One TCP connection attempt from a worker to the master's port."""

    result: Reach
    address: str  # the resolved address that was dialled
    timeout: float


@dataclass
class MasterFacts:
    """MASTER_ADDR / MASTER_PORT and what this host found out about them."""

    address: str | None
    port: int | None
    resolution: Resolution | None
    local: bool  # MASTER_ADDR is one of this host's addresses
    role: bool | None  # this node must host the store (None: the launcher does not say)
    route: Interface | None = None  # the interface traffic to MASTER_ADDR leaves through
    on_master: PortOnMaster | None = None  # set when this host serves the port
    from_worker: PortFromWorker | None = None  # set when this host dials it

    @property
    def hosts_store(self) -> bool:
        return self.role if self.role is not None else self.local


@dataclass
class MeshRun:
    """What running the mesh gave: its outcome, why it did not run, or the error it raised."""

    outcome: Any = None  # ncclcheck.network.mesh.MeshOutcome
    rank: int = 0  # this leader's rank in the cluster session (set with the outcome)
    not_run: str | None = None
    address: str | None = None  # the NCCL address the mesh listened on
    error_type: str | None = None
    error: str | None = None


def run_cluster_mesh(ctx: ProbeContext, bootstrap: SocketChoice | None,
                     interfaces: Sequence[Interface]) -> MeshRun:
    """Run the mesh on NCCL's bootstrap address, with what is left of the deadline."""
    session = ctx.cluster
    if session is None:
        return MeshRun(not_run=CLUSTER_ONLY)
    if bootstrap is None:
        return MeshRun(not_run=NO_NCCL_INTERFACE)
    iface = find(interfaces, bootstrap.name)
    full_max = int(ctx.options.net.mesh_full_max or FULL_MESH_MAX)
    budget = max(0.5, ctx.remaining() - 0.5)
    timeout = ctx.options.net.mesh_connect_timeout
    try:
        outcome = run_mesh(session, bootstrap.address, bootstrap.name,
                           iface.mtu if iface else None, budget, full_max=full_max,
                           connect_timeout=float(timeout) if timeout else None)
    except (OSError, RuntimeError, ValueError) as exc:  # the other checks still count
        return MeshRun(address=bootstrap.address, error_type=type(exc).__name__, error=str(exc))
    return MeshRun(outcome=outcome, rank=session.rank, address=bootstrap.address)


@dataclass
class Facts:
    """What every net check reads, gathered once by ``gather_facts``."""

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
    ib_ports: list[IbPort] = field(default_factory=list)
    master: MasterFacts | None = None
    mesh: MeshRun | None = None

    @property
    def gloo_first(self) -> SocketChoice | None:
        return self.gloo[0] if self.gloo else None


def gather_facts(ctx: ProbeContext) -> Facts:
    """All of the family's I/O, in the order the checks used to do it: the host, the master,
    then (cluster mode) the mesh, whose budget is what the deadline leaves after the rest."""
    env = nccl_environment(ctx.env)
    layout, _ = read_layout(ctx.env)
    interfaces = list_interfaces()
    version = nccl_rules_version(ctx)
    hostname = socket.gethostname()
    host_res = resolve(hostname, min(3.0, max(0.2, ctx.remaining() / 10)))
    gloo = predict_gloo_interfaces(env, interfaces, [a for _, a in host_res.addresses])

    def first_address(host: str) -> str | None:  # for a NCCL_COMM_ID naming a host
        return resolve(host, min(3.0, max(0.2, ctx.remaining() / 10))).first

    facts = Facts(ctx, env, layout, interfaces,
                  explain_nccl_choice(env, interfaces, version, first_address),
                  predict_nccl_bootstrap(env, interfaces, version, first_address), gloo,
                  hostname, host_res, version, is_multi_node(ctx, layout))
    facts.ib_ports = list_ib_ports(ctx.options.net.sys_infiniband or SYS_CLASS_INFINIBAND)
    facts.master = gather_master(ctx, env, layout, interfaces)
    facts.mesh = run_cluster_mesh(ctx, facts.bootstrap, interfaces)
    return facts


def nccl_rules_version(ctx: ProbeContext) -> str | None:
    """The version of the libnccl this job would load, read from the file (never loaded),
    else from the wheel's metadata; None applies the newest rules."""
    if ctx.options.net.nccl_version:
        return str(ctx.options.net.nccl_version)
    try:
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


def master_role(layout: Layout) -> bool | None:
    """Whether this process's node hosts rank 0 (and so the store)."""
    if layout.node_rank is not None:
        return layout.node_rank == 0
    if layout.rank is not None and layout.local_world_size:
        return layout.rank < layout.local_world_size
    if layout.rank is not None and layout.world_size and layout.world_size > 1:
        return layout.rank == 0
    return None


def gather_master(ctx: ProbeContext, env: dict[str, str], layout: Layout,
                  interfaces: list[Interface]) -> MasterFacts:
    """Resolve MASTER_ADDR, find the route to it, then look at the port from the side this
    host is on: bind it where the store lives, dial it from a worker."""
    address = layout.master_addr or env.get("MASTER_ADDR") or None
    port = layout.master_port
    master = MasterFacts(address, port, None, False, master_role(layout))
    if address:
        master.resolution = resolve(address, min(5.0, max(0.2, ctx.remaining() / 6)))
        master.local = any(is_local_address(a, interfaces)
                           for _, a in master.resolution.addresses)
        if master.resolution.ok:
            master.route = route_interface(master.resolution.first or "", interfaces)
    if port is None or (address and master.resolution and not master.resolution.ok):
        return master
    if master.hosts_store or not address:
        master.on_master = port_on_master(port)
    else:
        dialled = master.resolution.first if master.resolution else None
        assert dialled is not None
        timeout = min(5.0, max(0.2, ctx.remaining() / 5))
        master.from_worker = PortFromWorker(reach(dialled, port, timeout), dialled, timeout)
    return master


def port_on_master(port: int) -> PortOnMaster:
    """Who holds ``port`` here, and whether the kernel may hand it out as an ephemeral port."""
    state = check_port(port)
    low_high = ephemeral_range()
    ephemeral = bool(low_high and low_high[0] <= port <= low_high[1]
                     and port not in reserved_ports())
    return PortOnMaster(state, low_high, ephemeral, free_port_outside(low_high))


def free_port_outside(low_high: tuple[int, int] | None) -> int:
    """The first candidate port that is free here and outside the ephemeral range."""
    for candidate in PORT_CANDIDATES:
        if low_high and low_high[0] <= candidate <= low_high[1]:
            continue
        if check_port(candidate).free:
            return candidate
    return PORT_CANDIDATES[0]
