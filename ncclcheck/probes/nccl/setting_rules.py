"""The rules of the settings linter, one per variable that has a grammar: what NCCL or torch
will really do with the value (ignore it, clip it, run slower). Pure: each takes the setting
and the facts, and returns a verdict or None (valid).
"""

from __future__ import annotations

import re
from pathlib import Path

from ncclcheck.catalogue import catalogue_fix
from ncclcheck.model import Category, Status
from ncclcheck.ncclib.config_files import Setting, writable_target
from ncclcheck.probes.nccl.setting_verdicts import (LintFacts, Rule, Verdict, fail, ok, parse_c_int, shown,
                                       warn)
from ncclcheck.ncclib.version import parse_label
from ncclcheck.network.iflist import IfList, dead_entries

MAX_SOCKETS = 64  # NCCL's MAX_SOCKETS: NTHREADS x NSOCKS_PERTHREAD may not exceed it
MAX_SOCKET_THREADS = 16
DEBUG_LEVELS = ("VERSION", "WARN", "INFO", "ABORT", "TRACE")
DEBUG_SUBSYSTEMS = ("INIT", "COLL", "P2P", "SHM", "NET", "GRAPH", "TUNING", "ENV", "ALLOC",
                    "ALLOC_HOST", "CALL", "PROXY", "NVLS", "BOOTSTRAP", "REG", "PROFILE", "RAS",
                    "DESTROY", "ALL")
ALGORITHMS = ("RING", "TREE", "COLLNETCHAIN", "COLLNETDIRECT", "NVLS", "NVLSTREE", "PAT")
PROTOCOLS = ("LL", "LL128", "SIMPLE")
TOPO_LEVELS = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS")
_COMM_ID = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]]+):(\d{1,5})$")


def int_rule(low: int | None = None, high: int | None = None,
             choices: tuple[int, ...] | None = None, meaning: str = "") -> Rule:
    def check(s: Setting, facts: LintFacts) -> Verdict | None:
        parsed = parse_c_int(s.value)
        if parsed.value is None:
            return fail(s, f"{shown(s)} is not a number: NCCL ignores it and keeps its default",
                        f"Set {s.name} to an integer{_range_text(low, high, choices)}, or "
                        "unset it.")
        number = parsed.value
        if parsed.trailing.strip():
            return warn(s, f"{shown(s)} is read as {number}: the trailing "
                           f"'{parsed.trailing.strip()}' is ignored",
                        f"Write {s.name}={number}.")
        if choices is not None and number not in choices:
            return fail(s, f"{shown(s)} is not one of {', '.join(map(str, choices))}",
                        f"Set {s.name} to one of {', '.join(map(str, choices))}.")
        if low is not None and number < low:
            return fail(s, f"{shown(s)} is below the minimum {low}"
                           + (f" ({meaning})" if meaning else ""),
                        f"Set {s.name} to a value{_range_text(low, high, None)}.")
        if high is not None and number > high:
            return fail(s, f"{shown(s)} is above the maximum {high}"
                           + (f" ({meaning})" if meaning else ""),
                        f"Set {s.name} to a value{_range_text(low, high, None)}.")
        return None
    return check


def _range_text(low: int | None, high: int | None, choices: tuple[int, ...] | None) -> str:
    if choices:
        return f" from {', '.join(map(str, choices))}"
    if low is not None and high is not None:
        return f" in {low}..{high}"
    if low is not None:
        return f" >= {low}"
    if high is not None:
        return f" <= {high}"
    return ""


def choice_rule(choices: tuple[str, ...], consequence: str, severity: Status = Status.FAIL) -> Rule:
    def check(s: Setting, facts: LintFacts) -> Verdict | None:
        if s.value.strip().upper() in choices:
            return None
        make = fail if severity == Status.FAIL else warn
        return make(s, f"{shown(s)} is not one of {', '.join(choices)}: {consequence}",
                    f"Set {s.name} to one of {', '.join(choices)}.")
    return check


def token_list_rule(tokens: tuple[str, ...], what: str) -> Rule:
    """NCCL_ALGO / NCCL_PROTO: "a,b", "^a", and since 2.24 "func:a,b;func:c"."""
    def check(s: Setting, facts: LintFacts) -> Verdict | None:
        bad = []
        for group in s.value.split(";"):
            items = group.split(":", 1)[-1]
            for token in items.lstrip("^").split(","):
                if token.strip() and token.strip().upper() not in tokens:
                    bad.append(token.strip())
        if not bad:
            return None
        return fail(s, f"{shown(s)} names unknown {what} {', '.join(bad)}: NCCL 2.24+ fails init, "
                       "older releases ignore them",
                    f"Use only {', '.join(tokens)} in {s.name} (case-insensitive), or unset it.")
    return check


def level_rule(s: Setting, facts: LintFacts) -> Verdict | None:
    """NCCL_P2P_LEVEL / NCCL_NET_GDR_LEVEL: a topology level name or a legacy integer."""
    if s.value.strip().upper() in TOPO_LEVELS:
        return None
    parsed = parse_c_int(s.value)
    if parsed.value is not None and parsed.value >= 0 and not parsed.trailing.strip():
        return None
    return fail(s, f"{shown(s)} is not a level ({', '.join(TOPO_LEVELS)}) nor a legacy integer",
                f"Set {s.name} to one of {', '.join(TOPO_LEVELS)}.")


def debug_rule(s: Setting, facts: LintFacts) -> Verdict | None:
    level = s.value.strip().upper()
    if level not in DEBUG_LEVELS:
        return fail(s, f"{shown(s)} is not a level: NCCL logs nothing at all",
                    "Set NCCL_DEBUG=WARN (errors only) or NCCL_DEBUG=INFO (while debugging).")
    if level == "TRACE":
        return warn(s, "NCCL_DEBUG=TRACE logs every call (and only TRACE builds honour it): "
                       "slow and huge logs", "Set NCCL_DEBUG=INFO or WARN outside a short "
                       "debugging run.", rule="costly")
    if level == "INFO":
        verdict = ok(s, "NCCL_DEBUG=INFO: valid; verbose start-up logs (noted): fine while "
                        "debugging, NCCL_DEBUG=WARN keeps production logs short", rule="costly")
        verdict.notes.append("verbose logging")
        return verdict
    return None


def subsys_rule(s: Setting, facts: LintFacts) -> Verdict | None:
    bad = [t.strip() for t in s.value.lstrip("^").split(",")
           if t.strip() and t.strip().upper() not in DEBUG_SUBSYSTEMS]
    if bad:
        return warn(s, f"{shown(s)} names unknown subsystems {', '.join(bad)}",
                    f"Use names from {', '.join(DEBUG_SUBSYSTEMS)} in NCCL_DEBUG_SUBSYS.")
    return None


def comm_id_rule(s: Setting, facts: LintFacts) -> Verdict | None:
    match = _COMM_ID.match(s.value.strip())
    if match and 0 < int(match.group(2)) < 65536:
        return None
    return fail(s, f"{shown(s)} is not <host>:<port> (NCCL: Invalid NCCL_COMM_ID)",
                "Set NCCL_COMM_ID=<ipv4>:<port>, [<ipv6>]:<port> or <hostname>:<port>, or unset "
                "it (PyTorch does not need it).")



def _default_pick(interfaces: dict[str, list[str]]) -> str | None:
    """The interface NCCL picks with NCCL_SOCKET_IFNAME unset (its default list, in the
    interfaces' order), so the proposed fix agrees with what `ncclcheck net` predicts."""
    for default in ("^docker,lo,virbr", "docker", "lo"):
        spec = IfList.parse(default)
        found = next((name for name, addresses in interfaces.items()
                      if addresses and spec.matches(name)), None)
        if found:
            return found
    return None


def ifname_rule(s: Setting, facts: LintFacts) -> Verdict | None:
    """NCCL_SOCKET_IFNAME read with NCCL's own list grammar (``network.iflist``): no trimming,
    so the linter and the net probe agree on what matches."""
    length = len(s.value.encode("utf-8", "surrogateescape"))  # C strlen, as NCCL checks it
    if length <= 1:
        pick = _default_pick(facts.interfaces)
        picks = f" (here: {pick})" if pick else ""
        return warn(s, f"{shown(s)} is {'empty' if length == 0 else 'one character'}: NCCL "
                       f"treats it as unset and picks an interface itself{picks}",
                    f"Unset NCCL_SOCKET_IFNAME, or name the interface in full, e.g. "
                    f"NCCL_SOCKET_IFNAME={pick or 'eth0'}.", Category.INTERFACE)
    if not facts.interfaces:
        return None
    spec = IfList.parse(s.value)
    matched = [n for n in sorted(facts.interfaces) if spec.matches(n)]
    real = ", ".join(f"{n} ({', '.join(a) or 'no address'})"
                     for n, a in sorted(facts.interfaces.items()))
    dead = dead_entries(s.value, facts.interfaces)
    never = "; ".join(f"{entry!r}: {why}" for entry, why in dead)
    if not matched:
        because = f" ({never})" if never else ""
        return fail(s, f"{shown(s)} matches no interface that is up here{because}: NCCL fails "
                       "with 'Bootstrap : no socket interface found'",
                    catalogue_fix("nccl.no_socket_interface", f"This host has: {real}.",
                                  {"ifname": s.value}),
                    Category.INTERFACE)
    if dead:
        return warn(s, f"{shown(s)} matches {', '.join(matched)}, but some entries never match "
                       f"({never})", "Write the list without spaces, with '^' / '=' once at the "
                       "front, in the interfaces' exact case.", Category.INTERFACE)
    if spec.exclude:
        return ok(s, f"{shown(s)} leaves {', '.join(matched)} on this host")
    return ok(s, f"{shown(s)} matches {', '.join(matched)} on this host (up, with an address)")


def gloo_ifname_rule(s: Setting, facts: LintFacts) -> Verdict | None:
    """Gloo takes exact names, comma-separated, each of which must exist."""
    if len(s.value) <= 1 or not facts.interfaces:
        return None
    wanted = [n.strip() for n in s.value.split(",") if n.strip()]
    missing = [n for n in wanted if n not in facts.interfaces]
    if missing:
        real = ", ".join(sorted(facts.interfaces))
        return fail(s, f"{shown(s)} names {', '.join(missing)}, not up here: Gloo cannot create "
                       "its device",
                    catalogue_fix("gloo.unknown_interface", f"This host has: {real}."),
                    Category.INTERFACE)
    return ok(s, f"{shown(s)}: {', '.join(wanted)} present and up here")


def debug_file_rule(s: Setting, facts: LintFacts) -> Verdict | None:
    path = s.value.replace("%h", facts.host).replace("%p", "12345")
    if path in ("/dev/stdout", "/dev/stderr"):
        return None
    why = writable_target(path)
    if why:
        return warn(s, f"{shown(s)}: NCCL cannot write its log there ({why}); the log is lost",
                    "Point NCCL_DEBUG_FILE at a writable directory, e.g. "
                    "NCCL_DEBUG_FILE=/tmp/nccl.%h.%p.log.", rule="debug_file")
    if "%p" not in s.value and (facts.local_world_size or 1) > 1:
        return warn(s, f"{shown(s)} has no %p: all {facts.local_world_size} ranks of a node write "
                       "the same file and overwrite each other",
                    f"Add %h and %p: NCCL_DEBUG_FILE={s.value}.%h.%p", rule="debug_file")
    return None


def bool_torch_rule(s: Setting, facts: LintFacts) -> Verdict | None:
    if s.value.strip().lower() in ("0", "1", "true", "false", "yes", "no", "y", "n", "on", "off"):
        return None
    return warn(s, f"{shown(s)} is not a boolean", f"Set {s.name}=1 or {s.name}=0.")


def distributed_debug_rule(s: Setting, facts: LintFacts) -> Verdict | None:
    level = s.value.strip().upper()
    if level not in ("OFF", "INFO", "DETAIL"):
        return fail(s, f"{shown(s)}: importing torch.distributed raises ValueError (must be OFF, "
                       "INFO or DETAIL)",
                    catalogue_fix("torch.debug_level_invalid"))
    if level == "DETAIL":
        return warn(s, "TORCH_DISTRIBUTED_DEBUG=DETAIL checks every collective across ranks: slow",
                    "Use TORCH_DISTRIBUTED_DEBUG=INFO or OFF outside a debugging run.",
                    rule="costly")
    return None


def ib_timeout_rule(s: Setting, facts: LintFacts) -> Verdict | None:
    """Verbs ack timeout 4.096 us x 2^value; 0 or >= 32 disables it, so a dead link hangs."""
    verdict = int_rule(low=0)(s, facts)
    if verdict is not None:
        return verdict
    number = parse_c_int(s.value).value or 0
    if number == 0 or number >= 32:
        return warn(s, f"{shown(s)} means no InfiniBand timeout at all: a lost peer hangs the job "
                       "instead of failing it", "Set NCCL_IB_TIMEOUT in 1..31 (default 20, about "
                       "4 s per retry).", Category.INFINIBAND)
    return None



def path_exists_rule(s: Setting, facts: LintFacts) -> Verdict | None:
    if Path(s.value).is_file():
        return None
    why = "not a regular file" if Path(s.value).exists() else "no such file"
    return warn(s, f"{shown(s)}: {why}", f"Point {s.name} at an existing file, or unset it.")


def socket_threads_rule(s: Setting, facts: LintFacts) -> Verdict | None:
    verdict = int_rule(low=1)(s, facts)
    if verdict is not None:
        return verdict
    number = parse_c_int(s.value).value or 0
    if number > MAX_SOCKET_THREADS:
        return warn(s, f"{shown(s)} is above {MAX_SOCKET_THREADS}: NCCL lowers it to "
                       f"{MAX_SOCKET_THREADS}",
                    catalogue_fix("nccl.socket_threads_clamped"))
    return ok(s, f"{shown(s)}: valid (1..{MAX_SOCKET_THREADS} helper threads per connection)")


def nsocks_rule(s: Setting, facts: LintFacts) -> Verdict | None:
    verdict = int_rule(low=1)(s, facts)
    if verdict is not None:
        return verdict
    return ok(s, f"{shown(s)}: valid (sockets per helper thread; see the product check)")


def costly_disable(category: Category, what: str, ib: bool = False) -> Rule:
    def check(s: Setting, facts: LintFacts) -> Verdict | None:
        verdict = int_rule()(s, facts)
        if verdict is not None:
            return verdict
        if parse_c_int(s.value).value in (None, 0):
            return None
        if ib and not facts.ib_devices:
            return ok(s, f"{shown(s)}: no RDMA devices on this host, so nothing is lost here",
                      rule="costly")
        extra = f" ({', '.join(facts.ib_devices)} present)" if ib else ""
        return warn(s, f"{shown(s)} {what}{extra}", f"Unset {s.name} unless it works around a "
                       "known problem (then note why in the job script).", category, rule="costly")
    return check


def label_rule(s: Setting, facts: LintFacts) -> Verdict | None:
    """NCCL_VERSION: set by NVIDIA's containers, copied into scripts, read by nothing."""
    label = parse_label(s.value)
    loaded = facts.loaded_version
    where = f" ({facts.loaded_path})" if facts.loaded_path else ""
    if label is None:
        return warn(s, f"{shown(s)} is a label that no library reads, and not even a version",
                    "Remove NCCL_VERSION from the job script: it selects nothing.", rule="label")
    if loaded is None:
        return ok(s, f"{shown(s)} is only a label (libnccl never reads it); the loaded version "
                     "is unknown, so it cannot be compared", rule="label")
    if label.version == loaded:
        return ok(s, f"{shown(s)} is only a label, and it matches the loaded NCCL {loaded}",
                  rule="label")
    labelled = facts.other_copies.get(str(label.version))
    if labelled is not None:  # a CUDA image's label for its system copy: nccl.library judges it
        return ok(s, f"{shown(s)} is only a label, of the copy at {labelled} (CUDA container "
                     f"images set it); the job loads NCCL {loaded}{where}, and nccl.library "
                     "judges the copies", rule="label")
    return warn(s, f"{shown(s)} is only a label: the job loads NCCL {loaded}{where}, not "
                   f"{label.version}", f"Remove NCCL_VERSION={s.value} (libnccl never reads it). "
                   f"If the job really needs NCCL {label.version}, load that library itself "
                   "(LD_PRELOAD=<its libnccl.so.2>) and confirm with ncclcheck nccl --nccl-lib.",
                rule="label")


RULES: dict[str, Rule] = {
    "NCCL_DEBUG": debug_rule,
    "NCCL_DEBUG_SUBSYS": subsys_rule,
    "NCCL_DEBUG_FILE": debug_file_rule,
    "NCCL_SOCKET_IFNAME": ifname_rule,
    "NCCL_SOCKET_NTHREADS": socket_threads_rule,
    "NCCL_NSOCKS_PERTHREAD": nsocks_rule,
    "NCCL_SOCKET_FAMILY": choice_rule(("AF_INET", "AF_INET6"), "NCCL ignores it",
                                      Status.WARN),
    "NCCL_IB_TIMEOUT": lambda s, f: ib_timeout_rule(s, f),
    "NCCL_IB_RETRY_CNT": int_rule(0, 7),
    "NCCL_NTHREADS": int_rule(choices=(64, 128, 256, 512)),
    "NCCL_CROSS_NIC": int_rule(choices=(0, 1, 2)),
    "NCCL_NVLS_ENABLE": int_rule(choices=(0, 1, 2)),
    "NCCL_BUFFSIZE": int_rule(low=1),
    "NCCL_P2P_LEVEL": level_rule,
    "NCCL_NET_GDR_LEVEL": level_rule,
    "NCCL_ALGO": token_list_rule(ALGORITHMS, "algorithms"),
    "NCCL_PROTO": token_list_rule(PROTOCOLS, "protocols"),
    "NCCL_COMM_ID": comm_id_rule,
    "NCCL_TOPO_FILE": path_exists_rule,
    "NCCL_CONF_FILE": path_exists_rule,
    "NCCL_P2P_DISABLE": costly_disable(Category.P2P, "turns off GPU peer-to-peer (NVLink/PCIe): "
                                       "intra-node traffic goes through host memory"),
    "NCCL_SHM_DISABLE": costly_disable(Category.SHARED_MEMORY, "turns off the shared-memory "
                                       "transport: intra-node traffic falls back to the network"),
    "NCCL_IB_DISABLE": costly_disable(Category.INFINIBAND, "turns off InfiniBand/RoCE: NCCL falls "
                                      "back to TCP sockets", ib=True),
    "NCCL_VERSION": label_rule,
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": int_rule(choices=(0, 1, 2, 3)),
    "TORCH_NCCL_BLOCKING_WAIT": bool_torch_rule,
    "TORCH_NCCL_DESYNC_DEBUG": bool_torch_rule,
    "TORCH_NCCL_ENABLE_TIMING": bool_torch_rule,
    "TORCH_NCCL_ENABLE_MONITORING": bool_torch_rule,
    "TORCH_NCCL_DUMP_ON_TIMEOUT": bool_torch_rule,
    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": int_rule(low=1),
    "TORCH_NCCL_TRACE_BUFFER_SIZE": int_rule(low=0),
    "TORCH_DISTRIBUTED_DEBUG": distributed_debug_rule,
    "GLOO_SOCKET_IFNAME": gloo_ifname_rule,
}
