"""The interface libnccl itself bootstraps on (ncclGetUniqueId in the child), against the
network probe's prediction."""

from __future__ import annotations

from typing import Any

from ncclcheck.catalogue import catalogue_fix
from ncclcheck.model import Category, CheckResult, errored, failed, passed, skipped, warned
from ncclcheck.ncclib.loader import LibraryAnswer
from ncclcheck.probes.nccl.facts import NcclFacts, predicted_bootstrap
from ncclcheck.probes.spec import CheckSpec, judge


BOOTSTRAP_INTERFACE = CheckSpec(
    "nccl.bootstrap_interface", "The interface libnccl itself bootstraps on",
    (Category.INTERFACE,),
    fails_when="libnccl finds no socket interface",
    warns_when="libnccl's choice differs from the network probe's prediction",
    doc="Errors when ncclGetUniqueId names no interface.",
    order=40)


@judge(BOOTSTRAP_INTERFACE)
def judge_bootstrap(facts: NcclFacts) -> CheckResult:
    predicted = predicted_bootstrap(facts.env, facts.version, facts.interfaces)
    return check_bootstrap(facts.answer, facts.env, facts.interfaces_up, predicted=predicted)


def check_bootstrap(answer: LibraryAnswer | None, env, interfaces: dict[str, list[str]], *,
                    predicted: tuple[str | None, bool] = (None, False)) -> CheckResult:
    """What libnccl bootstrapped on, against ``predicted`` (the network owner's prediction,
    and whether there is one)."""
    if answer is None or answer.bootstrap is None:
        return skipped(BOOTSTRAP_INTERFACE,
                       "skipped: the library did not get as far as ncclGetUniqueId")
    choice = answer.bootstrap
    real = ", ".join(f"{n} ({', '.join(a)})" for n, a in sorted(interfaces.items())) or "none"
    ifname = env.get("NCCL_SOCKET_IFNAME")
    details: dict[str, Any] = {"nccl_interfaces": [choice.interface] if choice.interface else [],
                               "address": choice.address, "rc": choice.rc,
                               "last_error": choice.last_error, "NCCL_SOCKET_IFNAME": ifname,
                               "interfaces_up": interfaces}
    if choice.no_interface:
        fix = catalogue_fix("nccl.no_socket_interface", f"This host has: {real}.",
                            {"ifname": ifname} if ifname else {})
        summary = ("libnccl found no socket interface to bootstrap on"
                   + (f" (NCCL_SOCKET_IFNAME={ifname} matches nothing up here)" if ifname else ""))
        return failed(BOOTSTRAP_INTERFACE, summary, fix, Category.INTERFACE, **details)
    if choice.interface is None:
        return unnamed_bootstrap(choice, details)
    predicted, have = predicted
    details["predicted"] = predicted
    if have and predicted != choice.interface:
        return warned(BOOTSTRAP_INTERFACE,
                      f"libnccl bootstraps on {choice.interface} ({choice.address}), but the "
                      f"network probe predicted {predicted or 'no interface'}",
                      f"Pin the interface for every node: NCCL_SOCKET_IFNAME={choice.interface} "
                      "(or the one your nodes share), and report the disagreement.",
                      Category.INTERFACE, **details)
    agrees = " (as the network probe predicted)" if have else ""
    return passed(BOOTSTRAP_INTERFACE,
                  f"libnccl bootstraps on {choice.interface} ({choice.address}){agrees}",
                  **details)


def unnamed_bootstrap(choice: Any, details: dict[str, Any]) -> CheckResult:
    """ncclGetUniqueId said nothing about its interface: a failure only when rc is not 0."""
    if choice.rc == 0:
        return errored(BOOTSTRAP_INTERFACE,
                       "ncclGetUniqueId succeeded (rc 0), but NCCL's log did not name the "
                       "interface it bootstraps on", "Rerun with NCCL_DEBUG=INFO "
                       "NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP and look for 'Bootstrap: Using'.",
                       Category.INTERFACE, **details)
    return errored(BOOTSTRAP_INTERFACE,
                   f"ncclGetUniqueId failed (rc {choice.rc}) without naming an "
                   f"interface: {choice.last_error or 'no message'}", None, Category.INTERFACE,
                   **details)
