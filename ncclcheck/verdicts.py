"""The verdict beside a root cause: who fixes it, whether a plain requeue can succeed, and the
hosts to take out of service.

A scheduler's epilog, or whoever is paged, needs three answers more than the explanation: is it
the cluster's (``infrastructure``), the way the job was started (``launch``) or the program's
(``code``); will the same job run again succeed (``retry_helps``); which node to drain. They
follow from the failure's category, read in one table (``RULES``, one row per category of the
taxonomy in ncclcheck.model), refined by signature id where one category holds failures of
different owners (an illegal memory access is the program's, an uncorrectable ECC error the
GPU's, though both are ``cuda``). A row that drains names the host the evidence names; a requeue
that avoids a drained host can succeed, so ``retry_helps`` is true then too. docs/explain.md
shows the table (generated, ``python -m ncclcheck.gendocs``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Mapping

from ncclcheck.model import Category


class Owner(str, enum.Enum):
    """Who fixes a failure."""

    INFRASTRUCTURE = "infrastructure"  # the nodes, GPUs, network, drivers, site configuration
    LAUNCH = "launch"                  # how the job was started: layout, settings, environment
    CODE = "code"                      # the program itself


@dataclass(frozen=True)
class Rule:
    """One row of the table: the owner, whether the fault passes by itself (a requeue can
    succeed whatever the hosts), and whether the host the evidence names is at fault."""

    owner: Owner
    transient: bool
    drains: bool
    why: str


INFRA, LAUNCH, CODE = Owner.INFRASTRUCTURE, Owner.LAUNCH, Owner.CODE

# One row per category, then the signatures whose owner differs from their category's.
RULES: dict[str, Rule] = {
    Category.RANK_MISMATCH.value: Rule(LAUNCH, False, False, "the launch's layout disagrees "
                                       "with itself: the same launch fails again"),
    Category.INTERFACE.value: Rule(LAUNCH, False, False, "the interface settings name no "
                                   "usable interface"),
    Category.CONNECTION.value: Rule(INFRA, True, False, "a peer or the master could not be "
                                    "reached: often passing (a restart, a busy network)"),
    Category.NAME_RESOLUTION.value: Rule(LAUNCH, False, False, "the job names a host that does "
                                         "not resolve"),
    Category.PORT_IN_USE.value: Rule(LAUNCH, True, False, "the port was taken: free on another "
                                     "try, or choose one per job"),
    Category.VERSION_MISMATCH.value: Rule(LAUNCH, False, False, "the job's libraries disagree "
                                          "or are too old: its image or environment"),
    Category.NET_PLUGIN.value: Rule(LAUNCH, False, False, "the job's environment lacks or "
                                    "breaks the network plugin"),
    Category.INFINIBAND.value: Rule(INFRA, False, True, "the host's HCA, link or fabric"),
    Category.SHARED_MEMORY.value: Rule(INFRA, False, True, "the host's /dev/shm"),
    Category.P2P.value: Rule(INFRA, False, True, "the host's NVLink, NVSwitch or PCIe path"),
    Category.DUPLICATE_GPU.value: Rule(LAUNCH, False, False, "the launch maps two ranks onto "
                                       "one GPU"),
    Category.TIMEOUT.value: Rule(INFRA, True, False, "nothing deeper seen: a stall of the "
                                 "network or a node, often passing"),
    Category.CUDA.value: Rule(INFRA, False, True, "the host's GPU or driver"),
    Category.OUT_OF_MEMORY.value: Rule(CODE, False, False, "the program needs more memory than "
                                       "it has"),
    Category.RANK_CRASHED.value: Rule(CODE, False, False, "a rank died and no line says the "
                                      "node was at fault"),
    Category.CONFIGURATION.value: Rule(LAUNCH, False, False, "invalid or contradictory "
                                       "settings"),
    Category.DESYNC.value: Rule(CODE, False, False, "the ranks ran different collectives"),
    Category.DEGRADED.value: Rule(INFRA, False, True, "the host runs far below its peers"),
    Category.OTHER.value: Rule(INFRA, False, False, "NCCL's own or the system's error, no "
                               "deeper cause seen"),
    # -- signatures whose owner is not their category's -------------------------------------
    "cuda.illegal_memory_access": Rule(CODE, False, False, "a kernel of the program read or "
                                       "wrote out of bounds"),
    "cuda.device_side_assert": Rule(CODE, False, False, "an assertion in a kernel of the "
                                    "program (often an index out of range)"),
    "cuda.launch_failure": Rule(CODE, False, False, "a kernel of the program failed"),
    "cuda.ptx_unsupported": Rule(LAUNCH, False, False, "the job's build does not match the "
                                 "driver"),
    "deepspeed.no_gpu": Rule(LAUNCH, False, False, "the job was started without GPUs"),
    "lightning.accelerator_unavailable": Rule(LAUNCH, False, False, "the job was started "
                                              "without GPUs"),
    "torch.nccl_no_gpus": Rule(LAUNCH, False, False, "the job was started without GPUs"),
    "nccl.container_bridge_address": Rule(LAUNCH, False, False, "the containers' network "
                                          "announces an address no peer can reach"),
    "nccl.peers_same_address": Rule(LAUNCH, False, False, "the containers' network gives "
                                    "every host one address"),
    "cuda.nvml_mismatch": Rule(INFRA, False, True, "the host's driver was upgraded without a "
                               "reboot"),
    "nccl.nvml_driver_mismatch": Rule(INFRA, False, True, "the host's driver libraries do not "
                                      "match its kernel module"),
    "nvidia.api_mismatch": Rule(INFRA, False, True, "the host's driver libraries do not match "
                                "its kernel module"),
    "host.fabric_manager_failed": Rule(INFRA, False, True, "the host's NVSwitch fabric manager"),
    "slurm.node_failure": Rule(INFRA, True, True, "Slurm lost the node"),
    "ray.node_died": Rule(INFRA, True, True, "the cluster lost the node"),
    "slurm.preempted": Rule(INFRA, True, False, "the scheduler took the nodes back"),
    "slurm.cancelled": Rule(LAUNCH, False, False, "the job was cancelled"),
    "slurm.time_limit": Rule(LAUNCH, False, False, "the job ran out of its time limit"),
    "nccltests.wrong_results": Rule(INFRA, False, True, "a GPU or link corrupts data"),
}

# Facts that name the host at fault (a slow node, the node Slurm lost), read before the
# finding's own host.
HOST_FACTS = ("hosts", "slow_hosts", "host", "node", "hostname")


def rule_for(finding_id: str, category: str) -> Rule:
    """The signature's own row, else its category's."""
    return RULES.get(finding_id) or RULES[category]


@dataclass(frozen=True)
class Verdict:
    """Who fixes the root cause, whether a requeue can succeed, the hosts to drain."""

    owner: Owner
    retry_helps: bool
    drain: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"owner": self.owner.value, "retry_helps": self.retry_helps,
                "drain": list(self.drain)}


def verdict_of(root: Mapping[str, Any]) -> Verdict:
    """The verdict on a root cause (a finding as ``Finding.to_dict()`` gives it)."""
    rule = rule_for(root["id"], root["category"])
    hosts = named_hosts(root) if rule.drains else []
    return Verdict(rule.owner, rule.transient or bool(hosts), hosts)


def named_hosts(finding: Mapping[str, Any]) -> list[str]:
    """The hosts the evidence names as at fault: those its facts name, else the one host that
    printed it (several hosts printing one failure do not say which is at fault)."""
    facts = finding.get("facts") or {}
    for key in HOST_FACTS:
        value = facts.get(key)
        named = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        hosts = [h for h in named if isinstance(h, str) and _one_host(h)]
        if hosts:
            return list(dict.fromkeys(hosts))
    seen = [h for h in finding.get("hosts") or [] if h]
    host = finding.get("host")
    if host and _one_host(host) and set(seen) <= {host}:
        return [host]
    return []


def _one_host(name: str) -> bool:
    """A host name, not a list or a pattern of them (``node[1-4]``, ``a,b``)."""
    return bool(name) and not any(c in name for c in "[],* /")


def verdict_line(verdict: Mapping[str, Any]) -> str:
    """``infrastructure · retry helps · drain node3``, as the table and markdown show it."""
    parts = [verdict["owner"], "retry helps" if verdict["retry_helps"] else
             "retry does not help"]
    if verdict["drain"]:
        parts.append("drain " + ", ".join(verdict["drain"]))
    return " · ".join(parts)


def rules_table() -> str:
    """The table as docs/explain.md shows it: categories first, then the signatures' rows."""
    rows = ["| category or signature | owner | retry helps | drains the host named | why |",
            "|---|---|---|---|---|"]
    for key, rule in RULES.items():
        retry = "yes" if rule.transient else "when a host is drained" if rule.drains else "no"
        shown = key if "." not in key else f"`{key}`"
        rows.append(f"| {shown} | {rule.owner.value} | {retry} | "
                    f"{'yes' if rule.drains else 'no'} | {rule.why} |")
    return "\n".join(rows)
