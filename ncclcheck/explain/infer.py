"""When NCCL says only "system error": name the likely cause from the log's context.

A generic NCCL result (unhandled system error, internal error, remote process exited or there
was a network error; the catalogue marks them ``generic``) says that something failed, not
what. The lines around it often do: an NCCL_SOCKET_IFNAME naming a container or loopback
interface, ranks loading different NCCL versions, a graph file forced by the environment, a
launch whose node rank is outside its node count. The first such fact (by the inferred
signature's priority) becomes a cause of the failure that stands first (the arbiter
weighs it as decisive, arbiter.py); the finding keeps the generic error's line as where the run
failed and ``inferred_from`` as the line the cause was read from. Without such a fact, a
specific failure elsewhere in the log (a missing verbs provider, a refused port) outranks the
generic code by its weight alone. Some setups are a fault whatever else the log holds (a global
rank announced twice, nodes that chose different networks, nccl-tests processes that each ran
alone, IB present but libibverbs missing): they are findings of their own.

Facts that take several lines to see are read by the rules below; each rule is named by the
inferred signature that declares ``rule = "<name>"`` in the catalogue, so no signature id is
written here. An inferred signature without a rule is named by one context line its patterns
match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from ncclcheck.catalogue import Catalogue, Signature, load
from ncclcheck.explain.context import ContextLine, LogContext
from ncclcheck.explain.evidence import is_generic
from ncclcheck.explain.findings import Findings, Hit
from ncclcheck.model import Category
from ncclcheck.ncclib.version import LOG_LINE as NCCL_VERSION_LINE

# In a signature's ``explains``: NCCL's generic errors (as for a signature without ``explains``).
GENERIC_ALIAS = "generic"
# Root causes a launch with more tasks than GPUs explains: what its extra ranks run into.
_LAUNCH_SYMPTOMS = frozenset({Category.TIMEOUT, Category.OTHER, Category.RANK_CRASHED,
                              Category.CUDA, Category.DUPLICATE_GPU})
_SYSTEM_ERROR = re.compile(r"unhandled system error|ncclSystemError")

# What a rule found: the facts for its signature and the line it read them from.
Found = tuple[dict[str, Any], ContextLine]


@dataclass(frozen=True)
class Failure:
    """The root cause a cause rule may explain: its hit, and whether it is a generic result."""

    hit: Hit | None
    generic: bool


# -- setup faults: findings whatever else the log shows --------------------------------------

def _global_rank_announced_twice(sig: Signature, context: LogContext) -> Found | None:
    duplicate = context.duplicate_rank()
    return None if duplicate is None else (sig.match(duplicate.message) or {}, duplicate)


def _networks(context: LogContext, ib_or_socket: bool) -> Found | None:
    networks = context.differing_networks()
    if networks is None:
        return None
    first, second, first_line, second_line = networks
    if ({first, second} == {"IB", "Socket"}) != ib_or_socket:
        return None
    return {"network1": first, "network2": second, "line1": first_line.line}, second_line


def _ib_on_some_nodes(sig: Signature, context: LogContext) -> Found | None:
    return _networks(context, ib_or_socket=True)


def _networks_differ(sig: Signature, context: LogContext) -> Found | None:
    return _networks(context, ib_or_socket=False)


def _ib_without_verbs(sig: Signature, context: LogContext) -> Found | None:
    no_verbs = context.ib_without_verbs()
    if no_verbs is None:
        return None
    verbs, socket = no_verbs
    return {**(sig.match(socket.message) or {}), "line1": verbs.line}, socket


def _local_ranks_repeat(sig: Signature, context: LogContext) -> Found | None:
    repeated = context.local_ranks_repeat()
    if repeated is None:
        return None
    per_node, used, where = repeated
    return {**(sig.match(where.message) or {}), "per_node": per_node, "used": used}, where


def _tests_ranks_alone(sig: Signature, context: LogContext) -> Found | None:
    alone = context.tests_ranks_alone()
    return None if alone is None else (sig.match(alone.message) or {}, alone)


def _gpu_shared_by_one_program(sig: Signature, context: LogContext) -> Found | None:
    shared = context.gpu_shared_by_one_program()
    if shared is None:
        return None
    gpu, name, count, where = shared
    return {"gpu": gpu, "program": name, "processes": count}, where


# In the order their findings are added (the order of appearance among equals).
SETUP_RULES: dict[str, Callable[[Signature, LogContext], Found | None]] = {
    "global_rank_announced_twice": _global_rank_announced_twice,
    "networks_differ": _networks_differ,
    "ib_on_some_nodes": _ib_on_some_nodes,
    "ib_without_verbs": _ib_without_verbs,
    "local_ranks_repeat": _local_ranks_repeat,
    "tests_ranks_alone": _tests_ranks_alone,
    "gpu_shared_by_one_program": _gpu_shared_by_one_program,
}


# -- causes: what explains the root cause ------------------------------------------------------

# What peers that cannot reach each other show: a connection refused, reset or timed out, a
# peer gone, a collective that never completed.
_PEER_SYMPTOMS = frozenset({"connection", "timeout", "rank_crashed"})

def _versions_differ(sig: Signature, context: LogContext, failure: Failure) -> Found | None:
    versions = context.differing_versions() if failure.generic else None
    if versions is None:
        return None
    first, second = versions
    return {"version1": _version(first), "version2": _version(second),
            "line1": first.line}, second


def _slurm_tasks_over_gpus(sig: Signature, context: LogContext,
                           failure: Failure) -> Found | None:
    over = context.slurm_tasks_over_gpus()
    if over is None:
        return None
    if not failure.generic and failure.hit.signature.category not in _LAUNCH_SYMPTOMS:
        return None
    tasks, gpus, where = over
    return {"tasks": tasks, "gpus": gpus}, where


def _system_error_on_one_host(sig: Signature, context: LogContext,
                              failure: Failure) -> Found | None:
    failed = failure.hit
    if not (failure.generic and failed is not None and _SYSTEM_ERROR.search(failed.text)
            and context.one_host()):
        return None
    return {}, ContextLine(failed.file, failed.line, failed.text, failed.text)


def _peers_share_address(sig: Signature, context: LogContext,
                          failure: Failure) -> Found | None:
    shared = context.shared_address()
    if shared is None or not (failure.generic or failure.hit.signature.category.value in
                              _PEER_SYMPTOMS or failure.hit.signature.id in sig.explains):
        return None
    address, first, second = shared
    return {"address": address, "line1": first.line}, second


def _invalid_usage_without_reason(sig: Signature, context: LogContext,
                                  failure: Failure) -> Found | None:
    """NCCL's "invalid usage" with nothing more telling beside it (any other fact the context
    holds outranks this rule by priority): its init returns it for ranks sharing a GPU."""
    failed = failure.hit
    if failed is None or failed.signature.id not in sig.explains:
        return None
    return {}, ContextLine(failed.file, failed.line, failed.text, failed.text)


CAUSE_RULES: dict[str, Callable[[Signature, LogContext, Failure], Found | None]] = {
    "versions_differ": _versions_differ,
    "slurm_tasks_over_gpus": _slurm_tasks_over_gpus,
    "system_error_on_one_host": _system_error_on_one_host,
    "peers_share_address": _peers_share_address,
    "invalid_usage_without_reason": _invalid_usage_without_reason,
}


MAX_EXPLAINED = 8  # failures, in the arbiter's order, that a context fact may explain


def add_inferred(hits: Findings, context: LogContext, settings: dict[str, str] | None = None,
                 catalogue: Catalogue | None = None) -> None:
    """Add the findings the context supports to ``hits`` (before ranking); the rules' and the
    inferred signatures are ``catalogue``'s (the shipped one when None)."""
    catalogue = load() if catalogue is None else catalogue
    for name, rule in SETUP_RULES.items():
        sig = catalogue.by_rule(name)
        found = rule(sig, context)
        if found is not None and sig.id not in hits.by_id:
            facts, where = found
            hits.add(_hit(sig, facts, where, None, hits.hits))
    # What stands first so far (a launcher's report, at worst), else the next failure down:
    # other ranks' consequences printed first do not hide the failure a context fact explains.
    for finding in hits.ranked(settings)[:MAX_EXPLAINED]:
        failed = finding.first
        inferred = infer_cause(context, failed, catalogue)
        if inferred is not None:
            sig, facts, source = inferred
            if sig.explains:  # a cause read from the failure's own facts and a context line
                facts = {**failed.facts, **facts}
            hits.add(_hit(sig, facts, source, failed, failed.order))
            return


def infer_cause(context: LogContext, failed: Hit | None = None,
                catalogue: Catalogue | None = None,
                ) -> tuple[Signature, dict[str, Any], ContextLine] | None:
    """The most telling context fact behind the root cause ``failed`` (None: a generic NCCL
    error): (inferred signature, its facts, the line it is from). Among several, the higher
    priority wins, then the earlier context line, then the smaller id."""
    generic = failed is None or is_generic(failed.signature, failed.text)
    failure = Failure(failed, generic)
    known = failed.facts if failed is not None else {}
    candidates: list[tuple[int, int, str, Signature, dict[str, Any], ContextLine]] = []
    for sig in (load() if catalogue is None else catalogue).inferred_signatures:
        if sig.rule in CAUSE_RULES:
            found = CAUSE_RULES[sig.rule](sig, context, failure)
            if found is not None:
                candidates.append((-sig.priority, 0, sig.id, sig, *found))
            continue
        if sig.rule or not _applies(sig, failed, generic):
            continue
        for order, where in enumerate(context.lines):
            facts = sig.match(where.message, known)
            if facts is not None:
                candidates.append((-sig.priority, order, sig.id, sig, facts, where))
                break
    if not candidates:
        return None
    _, _, _, sig, facts, where = min(candidates, key=lambda c: c[:3])
    return sig, facts, where


def _applies(sig: Signature, failed: Hit | None, generic: bool) -> bool:
    """Whether ``sig`` may explain the root cause: NCCL's generic errors for signatures that
    list no ``explains``, else the failures they list (``generic`` among them standing for
    NCCL's generic errors)."""
    if not sig.explains:
        return generic
    if generic and GENERIC_ALIAS in sig.explains:
        return True
    return failed is not None and failed.signature.id in sig.explains


def _version(where: ContextLine) -> str:
    found = NCCL_VERSION_LINE.search(where.message)
    return found.group("version") + found.group("build") if found else "?"


def _hit(sig: Signature, facts: dict[str, Any], source: ContextLine, failed: Hit | None,
         order: int) -> Hit:
    """A finding's hit: at the failing line when there is one, else at the context line."""
    if failed is None:
        return Hit(sig, facts, source.file, source.line, source.text.strip()[:2000], None,
                   None, None, order, inferred_from=source.to_dict())
    return Hit(sig, facts, failed.file, failed.line, failed.text, failed.rank, failed.host,
               failed.time, order, inferred_from=source.to_dict())
