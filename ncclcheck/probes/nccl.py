"""The nccl family: the libnccl a job really loads, what it says about itself, its plugins,
the NCCL/torch settings, and GPU/CUDA readiness.

The library is asked, not guessed: it is loaded in a child process under the deadline (see
``ncclcheck.ncclib.loader``), so a libnccl that crashes or hangs becomes an ``error`` result.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ncclcheck.context import ProbeContext
from ncclcheck.model import Category, CheckResult, errored, failed, passed, skipped, warned
from ncclcheck.registry import CheckSpec
from ncclcheck.ncclib import known_names
from ncclcheck.ncclib.config_files import (ConfigFile, effective_settings, nccl_environment,
                                           read_config_files)
from ncclcheck.ncclib.discovery import Discovery, discover
from ncclcheck.ncclib.gpu import GPU_CHECKS, gpu_checks, torch_build_without_cuda
from ncclcheck.ncclib.library_names import NameSource, name_source
from ncclcheck.ncclib.loader import LibraryAnswer, ask_library
from ncclcheck.ncclib.plugins import KINDS, PluginSearch, find_plugins, supported_versions
from ncclcheck.ncclib.search import ldconfig_cache
from ncclcheck.ncclib.settings import LintFacts, Verdict, lint
from ncclcheck.ncclib.version import NcclVersion, from_torch_tuple, parse_label
from ncclcheck.catalogue import catalogue_fix
from ncclcheck.network.interfaces import (Interface, list_ib_devices, list_interfaces,
                                          predict_nccl_bootstrap)
from ncclcheck.probes.nccl_hang_evidence import CHECKS as HANG_CHECKS
from ncclcheck.probes.nccl_hang_evidence import check_hang_evidence
from ncclcheck.probes.nccl_plugins import CHECKS as PLUGIN_CHECKS
from ncclcheck.probes.nccl_plugins import check_net, check_plugin

LOAD_TIMEOUT = 20.0  # seconds the child may take; less when the command deadline is nearer


@dataclass
class NcclFacts:
    """Everything the nccl checks judge, gathered once by ``gather_facts`` (tests build it)."""

    env: dict[str, str]           # the environment as libnccl sees it (config files included)
    found: Discovery
    answer: LibraryAnswer | None
    budget: float
    interfaces: list[Interface]
    ib_devices: list[str]
    searches: list[PluginSearch]
    supported: dict[str, list[int]]
    files: list[ConfigFile]
    names: NameSource
    host: str

    @property
    def library(self) -> str | None:
        return self.found.resolution.found

    @property
    def version(self) -> NcclVersion | None:
        return loaded_version(self.answer, self.found)


def gather_facts(ctx: ProbeContext) -> NcclFacts:
    """All of the family's I/O: discovery, the child that loads libnccl, enumeration (asked of
    the network owner), plugin files, config files, the library's parameter names."""
    cache = ldconfig_cache(timeout=min(5.0, max(1.0, ctx.remaining() / 4)))
    found = discover(ctx.env, ctx.options.nccl.nccl_lib, cache=cache)
    library = found.resolution.found
    budget = min(LOAD_TIMEOUT, max(1.0, ctx.remaining() - 5.0))
    answer = ask_library(library, ctx.env, budget) if library is not None else None
    nccl_env = nccl_environment(ctx.env)
    searches = [find_plugins(kind, nccl_env, library, cache) for kind in KINDS]
    version = loaded_version(answer, found)
    return NcclFacts(env=nccl_env, found=found, answer=answer, budget=budget,
                     interfaces=list_interfaces(), ib_devices=list_ib_devices(),
                     searches=searches, supported=supported_versions(library) if library else {},
                     files=read_config_files(ctx.env), names=name_source(library, version),
                     host=ctx.host)


def probe(ctx: ProbeContext) -> list[CheckResult]:
    facts = gather_facts(ctx)
    env = ctx.env
    results = [check_library(facts.found)]
    if facts.answer is not None:
        results += check_answer(facts.answer, facts.found, facts.budget)
    up = local_interfaces(facts.interfaces)
    predicted = predicted_bootstrap(facts.env, facts.version, facts.interfaces)
    results.append(check_bootstrap(facts.answer, facts.env, up, predicted=predicted))
    results.append(check_torch_nccl(facts.answer))
    results += [check_plugin(s, facts.supported, facts.version) for s in facts.searches]
    results.append(check_net(facts.env, facts.searches[0], facts.ib_devices))
    results.append(check_config_files(facts.files, env))
    lint_facts = LintFacts(interfaces=up, ib_devices=facts.ib_devices,
                           loaded_version=facts.version, loaded_path=facts.library,
                           other_copies={c.version: c.path for c in facts.found.copies
                                         if c.version and c is not facts.found.winner},
                           local_world_size=_int(env.get("LOCAL_WORLD_SIZE")), host=facts.host,
                           names=facts.names)
    settings = effective_settings(env, facts.files, known_names.is_linted)
    results += [verdict_result(v) for v in lint(settings, lint_facts)]
    results += gpu_checks(env, _int(env.get("LOCAL_RANK")), min(5.0, ctx.remaining()))
    results.append(check_hang_evidence(env))
    return results


# -- the library -------------------------------------------------------------------------------
def loaded_version(answer: LibraryAnswer | None, found: Discovery) -> NcclVersion | None:
    if answer is not None and answer.version is not None:
        return answer.version
    winner = found.winner
    label = parse_label(winner.version) if winner and winner.version else None
    return label.version if label else None


def check_library(found: Discovery) -> CheckResult:
    copies = [c.to_dict() for c in found.copies]
    details: dict[str, Any] = {
        "copies": copies, "loaded": found.resolution.found, "found_via": found.resolution.how,
        "search_order": [f"{s.how}: {s.directory}" for s in found.resolution.steps][:20],
        "torch_lib": str(found.torch.lib_dir) if found.torch.lib_dir else None,
        "torch_cpu_only": found.torch.simulated, "wheel": found.wheel}
    if found.resolution.found is None:
        if found.torch.simulated or found.torch.lib_dir is None:
            return skipped(LIBRARY, "no libnccl.so.2 on this host, and torch here is not "
                           "a CUDA build: jobs can only use Gloo", **details)
        return failed(LIBRARY, "torch is a CUDA build but no libnccl.so.2 can be found",
                      "Install the NCCL wheel torch depends on (pip install nvidia-nccl-cu12), or "
                      "point --nccl-lib / LD_LIBRARY_PATH at a libnccl.so.2.",
                      Category.VERSION_MISMATCH, **details)
    if not Path(found.resolution.found).is_file():
        return failed(LIBRARY, f"--nccl-lib {found.resolution.found}: not a regular file",
                      "Pass --nccl-lib the path of an existing libnccl.so.2.",
                      Category.CONFIGURATION, **details)
    winner = found.winner
    what = f"{winner.version or 'unknown version'}" if winner else "unknown version"
    loaded = os.path.normpath(found.resolution.found)  # DT_RPATH spells it with "lib/../.."
    summary = f"the job loads {loaded} (NCCL {what}, via {found.resolution.how})"
    if found.torch.simulated and not found.override:
        summary = (f"torch here is CPU-only and loads no libnccl; its CUDA build would load "
                   f"{loaded} (NCCL {what})")
    bundled = [c for c in found.copies if any("wheel" in s or s == "torch/lib" for s in c.sources)]
    system = [c for c in found.copies if c not in bundled and "--nccl-lib" not in c.sources]
    differing = sorted({c.version for c in bundled + system if c.version})
    if bundled and system and len(differing) > 1:
        others = [c for c in bundled + system if c is not winner]  # the loaded file is named above
        listing = "; ".join(f"{c.path} ({c.version or '?'}, {', '.join(c.sources)})"
                            for c in others)
        return warned(LIBRARY, f"{summary}; other copies differ: {listing}",
                      "Make every node load the same NCCL: remove the stray copy from "
                      "LD_LIBRARY_PATH / the system, or LD_PRELOAD the one you mean.",
                      Category.VERSION_MISMATCH, **details)
    if len(found.copies) > 1:
        summary += f"; {len(found.copies) - 1} other copy(ies) found, same version"
    return passed(LIBRARY, summary, **details)


def check_answer(answer: LibraryAnswer, found: Discovery, budget: float) -> list[CheckResult]:
    details: dict[str, Any] = {
        "library": answer.library, "seconds": answer.seconds, "outcome": answer.outcome,
        "loaded_paths": answer.loaded_paths, "returncode": answer.returncode,
        "error_strings": {str(k): v for k, v in sorted(answer.error_strings.items())},
        "log": answer.log[:40]}
    fix = (f"Replace or remove {answer.library}, or point --nccl-lib at a working libnccl.so.2; "
           f"`python -c \"import ctypes; ctypes.CDLL('{answer.library}')\"` shows the failure.")
    if answer.outcome == "hung":
        return [errored(LOAD, f"loading {answer.library} did not answer within "
                        f"{budget:g} s (stuck {answer.describe_stage()}); the child was killed",
                        fix, Category.VERSION_MISMATCH, **details)]
    if answer.outcome == "crashed":
        return [errored(LOAD, f"{answer.library} crashed the process that loaded it "
                        f"({answer.signal}, {answer.describe_stage()})", fix,
                        Category.VERSION_MISMATCH, **details, signal=answer.signal)]
    if answer.outcome in ("load_error", "incomplete"):
        why = answer.load_error or f"the child exited with {answer.returncode} " \
                                   f"{answer.describe_stage()}"
        return [errored(LOAD, f"{answer.library} does not load: {why}", fix,
                        Category.VERSION_MISMATCH, **details, error=why)]
    results = [passed(LOAD, f"libnccl loaded and answered in a child process in "
                      f"{answer.seconds:.2f} s", **details)]
    if answer.version is None:
        results.append(errored(VERSION, f"ncclGetVersion returned no version "
                               f"(code {answer.version_code})", fix, Category.VERSION_MISMATCH,
                               code=answer.version_code))
        return results
    winner = found.winner
    details = {"version": str(answer.version), "code": answer.version_code,
               "banner": winner.banner if winner else None}
    results.append(passed(VERSION, f"NCCL {answer.version} (ncclGetVersion = "
                          f"{answer.version_code})", **details))
    return results


def check_torch_nccl(answer: LibraryAnswer | None) -> CheckResult:
    """torch.cuda.nccl.version() is the NCCL torch itself loads; it must match ours."""
    cpu_build = torch_build_without_cuda()
    if cpu_build is not None:
        return skipped(TORCH_VERSION, f"skipped: {cpu_build} is a CPU-only build: it has "
                       "no NCCL to compare", torch=cpu_build)
    try:
        import torch  # deferred: seconds to import; a CPU-only build was ruled out above
    except Exception as exc:
        return skipped(TORCH_VERSION,
                       f"skipped: torch does not import ({type(exc).__name__})")
    if torch.version.cuda is None:
        return skipped(TORCH_VERSION, f"skipped: torch {torch.__version__} is a CPU-only "
                       "build: it has no NCCL to compare", torch=torch.__version__)
    try:
        theirs = from_torch_tuple(torch.cuda.nccl.version())
    except Exception as exc:
        return skipped(TORCH_VERSION, f"skipped: torch.cuda.nccl.version() failed: {exc}")
    ours = answer.version if answer else None
    if theirs is None or ours is None:
        return skipped(TORCH_VERSION, "skipped: one of the two versions is unknown",
                       torch_nccl=str(theirs) if theirs else None)
    if theirs != ours:
        return warned(TORCH_VERSION, f"torch reports NCCL {theirs}, the library found "
                      f"here is {ours}", "Check LD_PRELOAD / LD_LIBRARY_PATH: torch loads a "
                      "different libnccl than the one inspected; pass it with --nccl-lib.",
                      Category.VERSION_MISMATCH, torch_nccl=str(theirs), inspected=str(ours))
    return passed(TORCH_VERSION, f"torch.cuda.nccl.version() agrees: {theirs}",
                  torch_nccl=str(theirs))


# -- the bootstrap interface -------------------------------------------------------------------
def local_interfaces(interfaces: list[Interface]) -> dict[str, list[str]]:
    """Interfaces that are up and running, with their addresses (from the network owner)."""
    return {i.name: [a.address for a in i.addresses] for i in interfaces
            if i.up and i.running and i.addresses}


def predicted_bootstrap(env, version: NcclVersion | None,
                        interfaces: list[Interface]) -> tuple[str | None, bool]:
    """(interface the network probe predicts, whether a prediction exists at all)."""
    try:
        choice = predict_nccl_bootstrap(env, interfaces, str(version) if version else None)
    except Exception:  # the prediction is a comparison, never a reason to fail this check
        return None, False
    return (choice.name if choice else None), True


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


# -- settings ------------------------------------------------------------------------------
def check_config_files(files: list[ConfigFile], env) -> CheckResult:
    details = {"files": [f.to_dict() for f in files]}
    broken = [f for f in files if f.error]
    if broken:
        f = broken[0]
        return warned(CONFIG_FILES, f"{f.path} ({f.why}) cannot be read: {f.error}; NCCL "
                      "skips it", f"Fix or remove {f.path}.", Category.CONFIGURATION, **details)
    explicit = env.get("NCCL_CONF_FILE")
    if explicit and not any(f.exists for f in files if f.why == "NCCL_CONF_FILE"):
        return warned(CONFIG_FILES, f"NCCL_CONF_FILE={explicit}: no such file",
                      "Point NCCL_CONF_FILE at an existing file, or unset it.",
                      Category.CONFIGURATION, **details)
    used = [f for f in files if f.exists]
    if not used:
        return passed(CONFIG_FILES, "no NCCL config file (" +
                      ", ".join(f.path for f in files) + "): settings come from the environment",
                      **details)
    bad = [f for f in used if f.skipped]
    listing = ", ".join(f"{f.path} ({len(f.entries)} setting(s))" for f in used)
    if bad:
        return warned(CONFIG_FILES, f"{bad[0].path}: lines {bad[0].skipped} are not "
                      "NAME=value; NCCL ignores them", f"Fix those lines in {bad[0].path}.",
                      Category.CONFIGURATION, **details)
    return passed(CONFIG_FILES, f"NCCL also reads {listing}; their settings are judged "
                  "below (the environment wins)", **details)


def verdict_result(v: Verdict) -> CheckResult:
    name = "socket_count" if v.rule == "socket_count" else v.name
    details: dict[str, Any] = {"variable": v.name, "value": v.shown_value(), "source": v.source,
                               "rule": v.rule}
    if v.notes:
        details["notes"] = v.notes
    if v.names_from:  # which list of names the verdict rests on: the library's or the table
        details["names_from"] = v.names_from
    return CheckResult(SETTING.member(name), v.status, v.summary, details, v.fix, v.category)


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


# -- the checks this family can report ------------------------------------------------------
LIBRARY = CheckSpec(
    "nccl.library", "The libnccl a job loads, and its other copies",
    (Category.VERSION_MISMATCH, Category.CONFIGURATION),
    fails_when="torch is a CUDA build but no libnccl.so.2 is found, or --nccl-lib "
               "is not a regular file",
    warns_when="the wheel / torch copy and a system copy have different versions")
LOAD = CheckSpec(
    "nccl.load", "libnccl loads and answers in a child process",
    (Category.VERSION_MISMATCH,),
    doc="Errors when the library hangs, crashes or does not load.")
VERSION = CheckSpec(
    "nccl.version", "ncclGetVersion", (Category.VERSION_MISMATCH,),
    doc="Errors when the library returns no version.")
BOOTSTRAP_INTERFACE = CheckSpec(
    "nccl.bootstrap_interface", "The interface libnccl itself bootstraps on",
    (Category.INTERFACE,),
    fails_when="libnccl finds no socket interface",
    warns_when="libnccl's choice differs from the network probe's prediction",
    doc="Errors when ncclGetUniqueId names no interface.")
TORCH_VERSION = CheckSpec(
    "nccl.torch_version", "torch.cuda.nccl.version() matches the library",
    (Category.VERSION_MISMATCH,),
    warns_when="torch reports another NCCL version than the library inspected")
CONFIG_FILES = CheckSpec(
    "nccl.config_files", "NCCL's config files", (Category.CONFIGURATION,),
    warns_when="a config file cannot be read, NCCL_CONF_FILE names no file, or lines "
               "are not NAME=value")
SETTING = CheckSpec(
    "nccl.setting.*", "One NCCL / torch / Gloo setting",
    (Category.CONFIGURATION, Category.INTERFACE, Category.INFINIBAND, Category.P2P,
     Category.SHARED_MEMORY),
    fails_when="the value is invalid (NCCL ignores it or fails), or "
               "NCCL_SOCKET_IFNAME matches no interface",
    warns_when="the name is unknown to the loaded library (or the shipped table), "
               "deprecated, partly ignored, or costly",
    doc="nccl.setting.socket_count judges NCCL_SOCKET_NTHREADS x "
        "NCCL_NSOCKS_PERTHREAD.")


CHECKS: tuple[CheckSpec, ...] = ((LIBRARY, LOAD, VERSION, BOOTSTRAP_INTERFACE, TORCH_VERSION)
                                 + PLUGIN_CHECKS + (CONFIG_FILES, SETTING) + GPU_CHECKS
                                 + HANG_CHECKS)
