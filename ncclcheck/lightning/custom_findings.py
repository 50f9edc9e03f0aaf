"""Judging a custom ClusterEnvironment's answers over the nodes x GPUs grid.

Pure: takes what each simulated process answered (``SlotAnswer``) and says, per finding,
what is wrong and which method to change. ``custom.py`` runs the class to get the answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ncclcheck.lightning.interface import MEANING
from ncclcheck.lightning.launch_styles import LaunchStyle, Slot


@dataclass
class SlotAnswer:
    slot: Slot
    values: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Finding:
    summary: str
    fix: str


def judge(answers: list[SlotAnswer], style: LaunchStyle, nodes: int, per_node: int,
          filled: frozenset[str] = frozenset()) -> list[Finding]:
    """Everything wrong with the grid's answers, each with the method to change. Members in
    ``filled`` are missing from the class (the interface check names them), so their
    stand-in values are not judged again."""
    findings = _judge(answers, style, nodes, per_node)
    return [f for f in findings if not any(f.summary.startswith(m) for m in filled)]


def _judge(answers: list[SlotAnswer], style: LaunchStyle, nodes: int, per_node: int) -> list[Finding]:
    """Every way the class's answers over the nodes x GPUs grid break what Lightning needs."""
    return (_crash_findings(answers, style) + _world_size_findings(answers, nodes, per_node)
            + _global_rank_findings(answers, style, nodes * per_node, per_node)
            + _position_findings(answers) + _address_findings(answers)
            + _external_findings(answers, style, per_node))


def _crash_findings(answers: list[SlotAnswer], style: LaunchStyle) -> list[Finding]:
    crashed = [(a, k, e) for a in answers for k, e in a.errors.items()]
    if not crashed:
        return []
    a, k, e = crashed[0]
    return [Finding(f"{k} raised {e} on node {a.slot.node} local {a.slot.local}"
                    + (f" (and {len(crashed) - 1} more)" if len(crashed) > 1 else ""),
                    f"Make {k} work with the variables {style.title} sets: "
                    f"{k} must return {MEANING.get(k, 'a value')}.")]


def _world_size_findings(answers: list[SlotAnswer], nodes: int, per_node: int) -> list[Finding]:
    world = nodes * per_node
    sizes = [a.values.get("world_size") for a in answers if "world_size" in a.values]
    bad_sizes = sorted({repr(s) for s in sizes if s != world or not isinstance(s, int)})
    if not bad_sizes:
        return []
    kind = ("None (never set)" if "None" in bad_sizes else
            "the per-node count" if bad_sizes == [repr(per_node)] and per_node != world else
            "the node count" if bad_sizes == [repr(nodes)] and nodes != world else
            ", ".join(bad_sizes))
    return [Finding(
        f"world_size() returns {kind} instead of {nodes} x {per_node} = {world}",
        f"world_size() must return {world}, the number of processes on all nodes: read "
        "WORLD_SIZE (torchrun and Lightning's launcher set it) or store the value Lightning "
        "passes to set_world_size(size).")]


def _global_rank_findings(answers: list[SlotAnswer], style: LaunchStyle, world: int,
                          per_node: int) -> list[Finding]:
    ranks = [a.values.get("global_rank") for a in answers if "global_rank" in a.values]
    if len(ranks) != len(answers):
        return []
    dupes = sorted({r for r in ranks if ranks.count(r) > 1}, key=repr)
    missing = sorted(set(range(world)) - set(ranks))
    if not dupes and not missing:
        return []
    if len(set(map(repr, ranks))) == 1:
        head = f"every process reports global_rank() = {ranks[0]!r}"
    else:
        head = (f"global ranks {_ranks_text(ranks)} are not 0..{world - 1} "
                f"(duplicates: {dupes or 'none'}, missing: {missing or 'none'})")
    note = "; Lightning's launcher never sets RANK" if style.name == "lightning_launcher" else ""
    return [Finding(
        f"{head}{note}",
        f"global_rank() must return node_rank() x {per_node} + local_rank() "
        f"(0..{world - 1}, unique): store the value Lightning passes to "
        "set_global_rank(rank), or read a variable this launcher sets (RANK under "
        "torchrun, SLURM_PROCID under srun).")]


def _position_findings(answers: list[SlotAnswer]) -> list[Finding]:
    findings = []
    for member, want in (("local_rank", lambda s: s.local), ("node_rank", lambda s: s.node)):
        wrong = [a for a in answers if member in a.values and a.values[member] != want(a.slot)]
        if wrong:
            a = wrong[0]
            findings.append(Finding(
                f"{member}() returns {a.values[member]!r} on node {a.slot.node} local "
                f"{a.slot.local} ({len(wrong)} of {len(answers)} slots wrong)",
                f"{member}() must return {MEANING[member]}: LOCAL_RANK / NODE_RANK (GROUP_RANK "
                "under torchrun, SLURM_LOCALID / SLURM_NODEID under srun)."))
    return findings


def _address_findings(answers: list[SlotAnswer]) -> list[Finding]:
    addresses = {repr((a.values.get("main_address"), a.values.get("main_port"))) for a in answers}
    if len(addresses) <= 1 and not any(a.values.get("main_address") in (None, "") or
                                       not isinstance(a.values.get("main_port"), int)
                                       for a in answers):
        return []
    first = answers[0].values
    return [Finding(
        f"main_address:main_port is {first.get('main_address')!r}:{first.get('main_port')!r}"
        + (" and differs between processes" if len(addresses) > 1 else ""),
        "main_address must return rank 0's host (MASTER_ADDR) and main_port an int port "
        "(int(MASTER_PORT)), the same in every process; both are @property.")]


def _external_findings(answers: list[SlotAnswer], style: LaunchStyle,
                       per_node: int) -> list[Finding]:
    external = [a for a in answers if a.values.get("creates_processes_externally") is not True]
    if style.external and external:
        return [Finding(
            f"creates_processes_externally is {external[0].values.get('creates_processes_externally')!r} "
            f"under {style.title}: each process would start {per_node - 1} more",
            f"creates_processes_externally must return True when {style.title} starts the "
            "processes (e.g. return 'LOCAL_RANK' in os.environ).")]
    children = [a for a in answers if a.slot.local > 0
                and a.values.get("creates_processes_externally") is not True]
    if style.external or not children:
        return []
    return [Finding(
        "creates_processes_externally is not True in processes Lightning started "
        "(LOCAL_RANK > 0): Lightning raises 'attempted to launch new distributed "
        "processes with `local_rank > 0`'",
        "creates_processes_externally must return True once LOCAL_RANK is set "
        "(return 'LOCAL_RANK' in os.environ).")]


def _ranks_text(ranks: list[Any]) -> str:
    text = ", ".join(map(repr, ranks[:16]))
    return f"[{text}{', ...' if len(ranks) > 16 else ''}]"
