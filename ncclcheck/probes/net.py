"""The net family: interfaces, the interface NCCL and Gloo will pick, MASTER_ADDR / MASTER_PORT,
and (cluster mode) the node-to-node mesh.

Node scope: in cluster mode only each node's leader runs it. The family is split along its
seams: ``net_facts`` gathers every fact (all of the I/O, the mesh included), and
``net_interfaces``, ``net_master`` and ``net_mesh`` judge them. The interface prediction itself
is pure (``ncclcheck.network.interfaces``).
"""

from __future__ import annotations

from ncclcheck.context import ProbeContext
from ncclcheck.model import CheckResult
from ncclcheck.network.interfaces import tp_interface_name
from ncclcheck.probes import net_interfaces, net_master, net_mesh
from ncclcheck.probes.net_facts import (Facts, MasterFacts, gather_facts, installed_nccl_version,
                                        is_multi_node, master_role, nccl_rules_version)
from ncclcheck.probes.net_interfaces import (check_gloo_interface, check_infiniband,
                                             check_interfaces, check_nccl_interface,
                                             check_tp_interface)
from ncclcheck.probes.net_master import check_master_addr, check_master_port
from ncclcheck.probes.net_mesh import consistency, mesh_checks, mesh_result
from ncclcheck.registry import CheckSpec

__all__ = [
    "CHECKS", "Facts", "MasterFacts", "probe", "gather_facts", "judge", "check_interfaces",
    "check_infiniband", "check_nccl_interface", "check_gloo_interface", "check_tp_interface",
    "check_master_addr", "check_master_port", "mesh_result", "consistency", "master_role",
    "is_multi_node", "nccl_rules_version", "installed_nccl_version",
]


def probe(ctx: ProbeContext) -> list[CheckResult]:
    return judge(gather_facts(ctx))


def judge(facts: Facts) -> list[CheckResult]:
    """Every net check from gathered facts, in report order; no I/O."""
    results = [
        check_interfaces(facts),
        check_infiniband(facts.ib_ports),
        check_nccl_interface(facts),
        check_gloo_interface(facts),
    ]
    if tp_interface_name(facts.env) is not None:
        results.append(check_tp_interface(facts))
    if facts.master is not None:
        results += [check_master_addr(facts, facts.master),
                    check_master_port(facts, facts.master)]
    if facts.mesh is not None:
        results += mesh_checks(facts.mesh, facts.ctx.host)
    return results


CHECKS: tuple[CheckSpec, ...] = net_interfaces.CHECKS + net_master.CHECKS + net_mesh.CHECKS
