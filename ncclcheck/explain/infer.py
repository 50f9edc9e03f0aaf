"""When NCCL says only "system error": name the likely cause from the log's context.

A generic NCCL result (unhandled system error, internal error, remote process exited or there
was a network error) says that something failed, not what. The lines around it often do: an
NCCL_SOCKET_IFNAME naming a container or loopback interface, ranks loading different NCCL
versions, a graph file forced by the environment, a launch whose node rank is outside its node
count. The first such fact (by the inferred signature's priority) becomes the root cause; the
finding keeps the generic error's line as where the run failed and ``inferred_from`` as the
line the cause was read from. Without such a fact, a specific failure or warning elsewhere in
the log (a missing verbs provider, a refused port) outranks the generic code. Some setups are
a fault whatever else the log holds (a global rank announced twice, nodes that chose different
networks, nccl-tests processes that each ran alone, IB present but libibverbs missing): they
are findings of their own.
"""

from __future__ import annotations

import re
from typing import Any

from ncclcheck.explain.catalogue import CATCH_ALL, Signature, inferred_signatures, signature
from ncclcheck.explain.context import ContextLine, LogContext
from ncclcheck.explain.findings import Finding, Findings, Hit
from ncclcheck.model import Category

# NCCL's generic results, whichever way the log shows them.
GENERIC_IDS = frozenset({"nccl.unhandled_system_error", "nccl.internal_error",
                         "nccl.internal_error_code", "nccl.remote_error", "nccl.syscall_failed",
                         "nccl.error_trace"})
# Categories that say what happened rather than why: no better than a generic error code.
_UNSPECIFIC = frozenset({Category.OTHER, Category.RANK_CRASHED, Category.TIMEOUT})
_GENERIC_TEXT = re.compile(r"nccl(?:System|Internal|Remote)Error|unhandled system error|"
                           r"internal error|remote process exited")
# In a signature's ``explains``: NCCL's generic errors (as for a signature without ``explains``).
GENERIC_ALIAS = "generic"
VERSIONS_DIFFER = "nccl.versions_differ"
ONE_HOST_SYSTEM_ERROR = "nccl.system_error_one_host"
SLURM_TASKS_OVER_GPUS = "slurm.tasks_exceed_gpus"
# Root causes a launch with more tasks than GPUs explains: what its extra ranks run into.
_LAUNCH_SYMPTOMS = frozenset({Category.TIMEOUT, Category.OTHER, Category.RANK_CRASHED,
                              Category.CUDA, Category.DUPLICATE_GPU})
_SYSTEM_ERROR = re.compile(r"unhandled system error|ncclSystemError")
DUPLICATE_RANK = "lightning.duplicate_global_rank"
NETWORKS_DIFFER = "nccl.networks_differ"
IB_ON_SOME_NODES = "nccl.ib_on_some_nodes"
TESTS_RANKS_ALONE = "nccltests.ranks_alone"
IB_WITHOUT_VERBS = "nccl.ib_without_verbs"
LOCAL_RANKS_REPEAT = "lightning.local_ranks_repeat"
# Inferred signatures named by a rule of their own below, not by matching a context line.
_BY_RULE = frozenset({VERSIONS_DIFFER, DUPLICATE_RANK, ONE_HOST_SYSTEM_ERROR,
                      SLURM_TASKS_OVER_GPUS, NETWORKS_DIFFER, IB_ON_SOME_NODES,
                      TESTS_RANKS_ALONE, IB_WITHOUT_VERBS, LOCAL_RANKS_REPEAT})


def add_inferred(hits: Findings, context: LogContext,
                 settings: dict[str, str] | None = None) -> None:
    """Add the findings the context supports to ``hits`` (before ranking)."""
    for sig, facts, where in _setup_faults(context):
        if sig.id not in hits.by_id:
            hits.add(_hit(sig, facts, where, None, hits.hits))
    ranked = hits.ranked(settings)
    if not ranked:
        return
    failed = ranked[0].first
    inferred = infer_cause(context, failed)
    specific = _specific_failure(ranked) if is_generic(failed.signature.id, failed.text) else None
    if inferred is not None and (specific is None
                                 or inferred[0].priority > specific.signature.priority):
        sig, facts, source = inferred
        if sig.explains:  # a cause read from the failure's own facts and a context line
            facts = {**failed.facts, **facts}
        hits.add(_hit(sig, facts, source, failed, failed.order))
    elif specific is not None:
        hits.promoted = specific.signature.id


def _specific_failure(ranked: list[Finding]) -> Finding | None:
    """Below a generic NCCL error, the first finding that says what failed (a missing verbs
    provider, a closed port), warnings included: NCCL's generic code says only that something
    did."""
    for finding in ranked[1:]:
        sig = finding.signature
        if sig.category not in _UNSPECIFIC and not is_generic(sig.id, finding.first.text):
            return finding
    return None


def _setup_faults(context: LogContext) -> list[tuple[Signature, dict[str, Any], ContextLine]]:
    """Faults the setup lines show whether or not the log shows a failure: a global rank
    announced twice, processes of a node sharing a local rank, nodes that chose different
    networks, nccl-tests processes that each ran alone, an InfiniBand interface that NCCL can
    reach only through sockets. Each makes the run fail, hang or crawl, so it is a finding of
    its own."""
    faults = []
    duplicate = context.duplicate_rank()
    if duplicate is not None:
        sig = signature(DUPLICATE_RANK)
        faults.append((sig, sig.match(duplicate.message) or {}, duplicate))
    networks = context.differing_networks()
    if networks is not None:
        first, second, first_line, second_line = networks
        ib_or_socket = {first, second} == {"IB", "Socket"}
        sig = signature(IB_ON_SOME_NODES if ib_or_socket else NETWORKS_DIFFER)
        facts = {"network1": first, "network2": second, "line1": first_line.line}
        faults.append((sig, facts, second_line))
    no_verbs = context.ib_without_verbs()
    if no_verbs is not None:
        sig = signature(IB_WITHOUT_VERBS)
        verbs, socket = no_verbs
        facts = {**(sig.match(socket.message) or {}), "line1": verbs.line}
        faults.append((sig, facts, socket))
    repeated = context.local_ranks_repeat()
    if repeated is not None:
        sig = signature(LOCAL_RANKS_REPEAT)
        per_node, used, where = repeated
        facts = {**(sig.match(where.message) or {}), "per_node": per_node, "used": used}
        faults.append((sig, facts, where))
    alone = context.tests_ranks_alone()
    if alone is not None:
        sig = signature(TESTS_RANKS_ALONE)
        faults.append((sig, sig.match(alone.message) or {}, alone))
    return faults


def is_generic(sig_id: str, text: str) -> bool:
    """Whether a root cause is only NCCL's generic result (or the catch-all quoting one)."""
    if sig_id in GENERIC_IDS:
        return True
    return sig_id == CATCH_ALL and bool(_GENERIC_TEXT.search(text))


def infer_cause(context: LogContext, failed: Hit | None = None,
                ) -> tuple[Signature, dict[str, Any], ContextLine] | None:
    """The most telling context fact behind the root cause ``failed`` (None: a generic NCCL
    error): (inferred signature, its facts, the line it is from)."""
    generic = failed is None or is_generic(failed.signature.id, failed.text)
    known = failed.facts if failed is not None else {}
    candidates: list[tuple[int, int, Signature, dict[str, Any], ContextLine]] = []
    versions = context.differing_versions() if generic else None
    if versions is not None:
        sig = signature(VERSIONS_DIFFER)
        first, second = versions
        facts = {"version1": _version(first), "version2": _version(second),
                 "line1": first.line}
        candidates.append((-sig.priority, 0, sig, facts, second))
    over = context.slurm_tasks_over_gpus()
    if over is not None and (generic or failed.signature.category in _LAUNCH_SYMPTOMS):
        sig = signature(SLURM_TASKS_OVER_GPUS)
        tasks, gpus, where = over
        candidates.append((-sig.priority, 0, sig, {"tasks": tasks, "gpus": gpus}, where))
    if generic and failed is not None and _SYSTEM_ERROR.search(failed.text) \
            and context.one_host():
        sig = signature(ONE_HOST_SYSTEM_ERROR)
        where = ContextLine(failed.file, failed.line, failed.text, failed.text)
        candidates.append((-sig.priority, 0, sig, {}, where))
    for sig in inferred_signatures():
        if sig.id in _BY_RULE or not _applies(sig, failed, generic):
            continue
        for order, where in enumerate(context.lines):
            facts = sig.match(where.message, known)
            if facts is not None:
                candidates.append((-sig.priority, order, sig, facts, where))
                break
    if not candidates:
        return None
    _, _, sig, facts, where = min(candidates, key=lambda c: (c[0], c[1]))
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
    found = re.search(r"NCCL version (\S+)", where.message)
    return found.group(1) if found else "?"


def _hit(sig: Signature, facts: dict[str, Any], source: ContextLine, failed: Hit | None,
         order: int) -> Hit:
    """A finding's hit: at the failing line when there is one, else at the context line."""
    if failed is None:
        return Hit(sig, facts, source.file, source.line, source.text.strip()[:2000], None,
                   None, None, order, inferred_from=source.to_dict())
    return Hit(sig, facts, failed.file, failed.line, failed.text, failed.rank, failed.host,
               failed.time, order, inferred_from=source.to_dict())
