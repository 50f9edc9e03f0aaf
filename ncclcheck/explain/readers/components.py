"""What the component that printed a line says, in its own enumerations.

A line no signature names, or one claimed by a signature that says only that something failed
(an exception nobody recognised, one of NCCL's generic results, a wrapper of a CUDA error),
often still carries its origin in a form that does not depend on one
release's wording: NCCL's source file and subsystem (``transport/net_ib.cc``, ``NET/IB :``),
an errno name or number (``[Errno 98]``), a getaddrinfo error, a CUDA error name or string, an
ibverbs work-completion status, a torch or Lightning message. The knowledge tables generated from
that software (ncclcheck/catalogue/knowledge/) say which category each belongs to; this reader
looks the line up and adds what it found:

- an error line (an exception, ``error:``) whose component names a specific category is a
  reasoned cause: it outranks the generic wrapper that claimed the line (a ``RuntimeError``
  quoting ``[Errno 98] Address already in use`` is a port in use) and never a signature that
  names the cause;
- an NCCL WARN line is context: the library may carry on (a healthy run prints "NET/IB : No
  device found" and falls back to sockets), so it is never a failure by itself; it explains a
  generic failure that stands first (arbiter.py). A WARN that quotes an error of an
  enumeration (a verbs completion or async event that failed, the errno of a failed call, a
  CUDA error), or whose format the table files by its own words rather than by the file that
  prints it ("Duplicate GPU detected" in init.cc), reports a failure: a cause. A torch
  ``[W ...]`` warning is context whatever it quotes: torch carried on (it tries an IPv6
  socket, warns "errno: 97 - Address family not supported", and uses IPv4), so a log of
  warnings alone has no root cause;
- on a wrapper's line (catalogue ``quotes``: NCCL's "Cuda failure '...'"), the quoted entry's
  category where it names more than the wrapper: the arbiter reads the wrapper for its cause.

Categories that only say that something failed (other, a crash, a timeout) are left to the
signatures and the consequences.
"""

from __future__ import annotations

from functools import lru_cache

from ncclcheck.catalogue.knowledge import Hit as Known
from ncclcheck.catalogue.knowledge import lookup, named_by_its_words, quoted
# the tables of errors (an entry is a failure's name, number or text), as against NCCL's own
# formats, which also hold its informational messages
from ncclcheck.catalogue.knowledge_index import NAMED as ENUMERATIONS
from ncclcheck.explain.cues import category_signature
from ncclcheck.catalogue import LAST_RESORT
from ncclcheck.explain.evidence import UNTOLD, Role, Weight, quoted_category
from ncclcheck.explain.excerpt import excerpt
from ncclcheck.explain.fallback import is_nccl_warning
from ncclcheck.explain.findings import Hit
from ncclcheck.explain.readers import ERROR, GATE, Reader
from ncclcheck.explain.run import Line, Run
from ncclcheck.model import Category

PREFIX = "component."
PRIORITY = 45  # below the signatures that name a message, above the guesses
# The tables read from the software's own enumerations and sources (a name, a number, a source
# file); torch's and Lightning's message tables file messages by their words, which the
# signatures and the text model already read.
_TABLES = frozenset({"errno", "eai", "cuda", "nccl_result", "ibverbs", "nccl_formats",
                     "net_plugin_formats"})
_COMPONENTS = {"nccl": "NCCL", "glibc": "the C library", "cuda": "CUDA", "torch": "torch",
               "gloo": "Gloo", "ibverbs": "the verbs library (ibverbs)", "lightning": "Lightning",
               "aws-ofi-nccl": "the AWS OFI net plugin (aws-ofi-nccl)"}


def component_signature(category: Category, last_error: bool = False):
    """The finding a component's own enumeration reads as, for ``category``; ``last_error``:
    read from NCCL's last warning that torch's exception quotes ("Last error:")."""
    if last_error:
        return category_signature(
            f"{PREFIX}last_error.{category.value}", category,
            f"NCCL's last error, quoted by the exception, names a {category.value} failure",
            "The exception that reported the failed NCCL call quotes NCCL's last warning on "
            "line {line}: {what}, which NCCL's own tables (generated from its source) file "
            f"under {category.value}. That warning is why the call failed: the exception "
            "is read for its cause.", PRIORITY)
    return category_signature(
        PREFIX + category.value, category,
        f"The component that printed the line names a {category.value} failure",
        "{origin} printed {what} on line {line}, which its own tables (generated from that "
        f"software) file under {category.value}. No catalogue message matched the line as a "
        "whole; the component's words say where the failure is.", PRIORITY)


def read_line(run: Run, line: Line) -> None:
    cand = line.candidate
    if not (cand.error or cand.gated) or not line.guessable:
        return
    claim = line.claim
    if claim is not None and not _says_only_that(claim[0]):
        return  # a signature reads the message itself
    weight_of_line = line.weight
    # torch's "Last error:" echo: NCCL's last warning, the reason the call it reports failed
    last_error = cand.last_error
    nccl_warn = last_error or is_nccl_warning(line.info.message)
    # torch's glog warning that speaks of a failure (a connect that failed with an errno, a
    # bind refused): what failed, read from one line, to explain a failure that followed
    torch_warn = line.info.severity == "W" and weight_of_line >= 1
    failing = weight_of_line >= 2
    if not (nccl_warn or torch_warn or failing):
        return  # neither an error line nor NCCL's warning: nothing failed here
    known = _known(line.info.message, claim[0] if claim is not None else None,
                   "WARN" if last_error else None)
    if known is None or known.category in UNTOLD or known.table not in _TABLES:
        return
    sig = component_signature(Category(known.category), last_error)
    facts = {"origin": _origin(known), "what": _what(known), "line": line.number,
             "component": known.component, "table": known.table, "key": known.key[:200],
             "how": known.how, **({"last_error": True} if last_error else {})}
    # a warning explains a failure, never stands for one: NCCL's unless it quotes an error or
    # its own words name the failure (it reports one there), torch's always (it carried on:
    # an IPv6 socket that could not be made, then the IPv4 one that worked)
    warned = torch_warn or (nccl_warn and not last_error and not _quotes_error(
        line.info.message) and not named_by_its_words(known))
    role = Role.CONTEXT if warned and not failing else Role.CAUSE
    # The wrapper's own line read for its cause outranks the wrapper; a line nobody claimed
    # is read like the keyword cues, from one line, below the reading of the whole run (the
    # last error an exception quotes is read for that exception's cause by the arbiter).
    weight = Weight.REASONED if claim is not None else Weight.KEYWORD
    run.findings.add(Hit(sig, facts, line.file, line.number, excerpt(line.text, sig),
                         line.info.rank if line.info.rank is not None else line.file_rank,
                         line.info.host, line.info.time, run.findings.hits,
                         role=role, weight=weight))


def _says_only_that(sig) -> bool:
    """Whether the signature that claimed a line says only that something failed: a last
    resort (an exception nobody recognised), one of NCCL's generic results (a system call
    that failed, an internal error) or a wrapper of an enumeration's entry (``quotes``). The
    line's own component may still say what: NCCL's ``include/shm.h`` printing "Call to
    posix_fallocate failed" is shared memory, a "Cuda failure 'peer access is not
    supported'" is peer-to-peer."""
    return sig.claim_level == LAST_RESORT or sig.generic or bool(sig.quotes)


def _quotes_error(message: str) -> bool:
    """Whether an NCCL warning quotes an error of an enumeration (a verbs work completion or
    async event that failed, the errno of a failed call, a CUDA error, an NCCL result), even
    one that names no category of its own ("No data available" from the net plugin's
    fi_getinfo): NCCL reports a failure there, not a fallback it carries on from ("No device
    found"); the category is the printer's."""
    return any(hit.table in ENUMERATIONS and hit.category != "ok" for hit in _hits(message))


def _known(message: str, claimed_by, nccl_level: str | None = None) -> Known | None:
    """What the tables say of the line: for a wrapper, the entry it quotes where that names
    more than the wrapper (else nothing: the wrapper said it); for one of NCCL's generic
    results, what another table says (the result's own entry is what its signature read);
    otherwise the best hit. ``nccl_level``: the line is NCCL's message with no prefix."""
    if claimed_by is not None and claimed_by.quotes:
        if quoted_category(claimed_by, message) is None:
            return None
        return quoted(message, claimed_by.quotes)
    hits = _hits(message, nccl_level)
    if claimed_by is not None and claimed_by.generic:
        return next((hit for hit in hits if hit.table != "nccl_result"), None)
    return next(iter(hits), None)


@lru_cache(maxsize=4096)  # one lookup per distinct message (ranks repeat theirs)
def _hits(message: str, nccl_level: str | None = None) -> tuple[Known, ...]:
    """Everything the tables say of a message, most specific first (knowledge.lookup)."""
    return tuple(lookup(message, nccl_level))


def _origin(known: Known) -> str:
    name = _COMPONENTS.get(known.component, known.component)
    return f"{name} ({known.file})" if known.file else name


def _what(known: Known) -> str:
    if known.how in ("name", "number") or known.table in ("errno", "eai", "ibverbs", "cuda"):
        return f"{known.key}"
    return f"'{known.key[:120]}'"


READER = Reader("components", 5, line=read_line,
                kinds=GATE | ERROR)
