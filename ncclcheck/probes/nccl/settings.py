"""nccl.setting.*: one verdict for every NCCL_*, TORCH_NCCL_*, TORCH_DISTRIBUTED_* and GLOO_*
variable a job sets (from the environment or NCCL's config files), from the settings linter.

Names are judged against the names the loaded libnccl itself reads (``library_names``; the
shipped table only when no library can be read), values by the rules in ``setting_rules``.
The facts (interfaces, RDMA devices, loaded version, names) are arguments, so the linter is
pure and testable with any values.
"""

from __future__ import annotations

import difflib
from typing import Mapping

from typing import Any

from ncclcheck.catalogue import catalogue_fix
from ncclcheck.model import Category, CheckResult, Status
from ncclcheck.ncclib import known_names as names
from ncclcheck.ncclib.config_files import Setting, effective_settings
from ncclcheck.ncclib.library_names import SHIPPED, NameSource
from ncclcheck.ncclib.plugins import KINDS
from ncclcheck.probes.nccl.facts import NcclFacts, int_value
from ncclcheck.probes.nccl.known_issues import KNOWN, settings_renamed
from ncclcheck.probes.nccl.plugins import NET, PLUGIN
from ncclcheck.probes.nccl.setting_rules import MAX_SOCKET_THREADS, MAX_SOCKETS, RULES, int_rule
from ncclcheck.probes.nccl.setting_verdicts import (CInt, LintFacts, Verdict, fail, ok,
                                                    parse_c_int, shown, warn)
from ncclcheck.probes.spec import CheckSpec, judge

SETTING = CheckSpec(
    "nccl.setting.*", "One NCCL / torch / Gloo setting",
    (Category.CONFIGURATION, Category.INTERFACE, Category.INFINIBAND, Category.P2P,
     Category.SHARED_MEMORY),
    fails_when="the value is invalid (NCCL ignores it or fails), or "
               "NCCL_SOCKET_IFNAME matches no interface",
    warns_when="the name is unknown to the loaded library (or the shipped table), "
               "deprecated, partly ignored, or costly",
    doc="nccl.setting.socket_count judges NCCL_SOCKET_NTHREADS x "
        "NCCL_NSOCKS_PERTHREAD.",
    order=90)


@judge(SETTING)
def judge_settings(facts: NcclFacts) -> list[CheckResult]:
    env = facts.ctx.env
    lint_facts = LintFacts(interfaces=facts.interfaces_up, ib_devices=facts.ib_devices,
                           loaded_version=facts.version, loaded_path=facts.library,
                           other_copies={c.version: c.path for c in facts.found.copies
                                         if c.version and c is not facts.found.winner},
                           local_world_size=int_value(env.get("LOCAL_WORLD_SIZE")),
                           host=facts.host, names=facts.names)
    settings = effective_settings(env, facts.files, names.is_linted)
    return [verdict_result(v) for v in lint(settings, lint_facts)]


def verdict_result(v: Verdict) -> CheckResult:
    name = "socket_count" if v.rule == "socket_count" else v.name
    details: dict[str, Any] = {"variable": v.name, "value": v.shown_value(), "source": v.source,
                               "rule": v.rule}
    if v.notes:
        details["notes"] = v.notes
    if v.names_from:  # which list of names the verdict rests on: the library's or the table
        details["names_from"] = v.names_from
    return CheckResult(SETTING.member(name), v.status, v.summary, details, v.fix, v.category)



def closest_name(name: str, source: NameSource = SHIPPED) -> str | None:
    """The known name ``name`` is most likely a typo of; only names ``source`` knows, so the
    advice never renames to a variable the loaded library would ignore."""
    pool = sorted(source.known)
    match = difflib.get_close_matches(name, pool, n=1, cutoff=0.8)
    return match[0] if match else None


# Judged by the plugin checks (nccl.net, nccl.plugin.*), which open the files.
JUDGED_ELSEWHERE = {"NCCL_NET": NET.id,
                    **{kind.variable: PLUGIN.member(kind.name) for kind in KINDS}}


def deprecated_verdict(s: Setting) -> Verdict:
    replacement, why = names.DEPRECATED[s.name]
    if replacement:
        return warn(s, f"{s.name} is deprecated ({why}); use {replacement}",
                    f"Rename {s.name} to {replacement}={s.value}.", rule="deprecated")
    return warn(s, f"{s.name} is {why}", f"Remove {s.name} from the job's environment.",
                rule="deprecated")


def unknown_name_verdict(s: Setting, source: NameSource) -> Verdict:
    """A name nobody reads, judged against ``source`` (which the summary names)."""
    guess = closest_name(s.name, source)
    if guess:
        verdict = warn(s, f"{s.name} is not a name NCCL or torch reads ({source.label}): "
                          f"{s.name} -> {guess}?", f"Rename {s.name} to {guess}.",
                       rule="unknown_name")
    else:
        verdict = warn(s, f"{s.name} is not a name NCCL or torch reads ({source.label}): it has "
                          "no effect", f"Remove {s.name}, or check the spelling against NCCL's "
                          "environment variable list.", rule="unknown_name")
    verdict.names_from = source.label
    return verdict


def lint_one(s: Setting, facts: LintFacts) -> Verdict:
    """The verdict on one variable: deprecated, unknown, invalid, costly - or fine."""
    renamed = s.name in settings_renamed()  # whether its new name applies: nccl.known_issues
    if s.name in names.DEPRECATED and not renamed:
        return deprecated_verdict(s)
    if s.name in RULES:
        verdict = RULES[s.name](s, facts)
        if verdict is not None:
            return verdict
        return ok(s, f"{shown(s)}: valid")
    if renamed:
        return ok(s, f"{shown(s)}: an old name; {KNOWN.id} judges it against the names the "
                     "installed library reads")
    if s.name in JUDGED_ELSEWHERE:
        return ok(s, f"{shown(s)}: judged by {JUDGED_ELSEWHERE[s.name]}")
    if s.name not in facts.names.known:
        return unknown_name_verdict(s, facts.names)
    verdict = int_rule()(s, facts) if s.name in names.NCCL_INTEGER_NAMES else None
    if verdict is None:
        verdict = ok(s, f"{shown(s)}: known name, value accepted")
    verdict.names_from = facts.names.label
    return verdict


def socket_product(settings: Mapping[str, Setting]) -> Verdict | None:
    """NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD may not exceed 64 sockets per connection."""
    threads, socks = settings.get("NCCL_SOCKET_NTHREADS"), settings.get("NCCL_NSOCKS_PERTHREAD")
    if threads is None or socks is None:
        return None
    t, n = parse_c_int(threads.value).value, parse_c_int(socks.value).value
    if t is None or n is None or t < 1 or n < 1:
        return None
    t_eff = min(t, MAX_SOCKET_THREADS)
    pair = Setting("NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD", f"{t} x {n}",
                   threads.source if threads.source == socks.source else
                   f"{threads.source}, {socks.source}")
    product = t_eff * n
    if product > MAX_SOCKETS:
        return Verdict(pair.name, pair.value, pair.source, Status.WARN,
                       f"NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD = {t_eff} x {n} = {product} "
                       f"> {MAX_SOCKETS}: NCCL lowers NCCL_NSOCKS_PERTHREAD to "
                       f"{MAX_SOCKETS // t_eff}",
                       catalogue_fix("nccl.too_many_sockets",
                                     f"Here: NCCL_SOCKET_NTHREADS={t_eff} "
                                     f"NCCL_NSOCKS_PERTHREAD={MAX_SOCKETS // t_eff}."),
                       Category.CONFIGURATION,
                       "socket_count")
    return Verdict(pair.name, pair.value, pair.source, Status.PASS,
                   f"NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD = {t_eff} x {n} = {product} "
                   f"sockets per connection (at most {MAX_SOCKETS})", rule="socket_count")


def lint(settings: Mapping[str, Setting], facts: LintFacts) -> list[Verdict]:
    """One verdict per linted variable, in name order, then the cross-variable checks."""
    verdicts = [lint_one(s, facts) for name, s in sorted(settings.items())
                if names.is_linted(name)]
    product = socket_product(settings)
    if product is not None:
        verdicts.append(product)
    return verdicts


__all__ = ["LintFacts", "Verdict", "CInt", "parse_c_int", "lint", "lint_one", "closest_name",
           "socket_product", "RULES", "JUDGED_ELSEWHERE", "fail"]
