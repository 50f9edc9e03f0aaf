"""The libnccl a job loads (and its other copies), whether it loads and answers in a child
process, and the version it reports."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ncclcheck.model import Category, CheckResult, errored, failed, passed, skipped, warned
from ncclcheck.ncclib.discovery import Discovery
from ncclcheck.ncclib.loader import LibraryAnswer
from ncclcheck.needs import TORCH_INSTALL, torch_missing
from ncclcheck.probes.nccl.facts import NcclFacts
from ncclcheck.probes.spec import CheckSpec, judge


LIBRARY = CheckSpec(
    "nccl.library", "The libnccl a job loads, and its other copies",
    (Category.VERSION_MISMATCH, Category.CONFIGURATION),
    fails_when="torch is a CUDA build but no libnccl.so.2 is found, or --nccl-lib "
               "is not a regular file",
    warns_when="the wheel / torch copy and a system copy have different versions",
    order=10)


LOAD = CheckSpec(
    "nccl.load", "libnccl loads and answers in a child process",
    (Category.VERSION_MISMATCH,),
    doc="Errors when the library hangs, crashes or does not load.",
    order=20)


VERSION = CheckSpec(
    "nccl.version", "ncclGetVersion", (Category.VERSION_MISMATCH,),
    doc="Errors when the library returns no version.",
    order=30)


@judge(LIBRARY)
def judge_library(facts: NcclFacts) -> CheckResult:
    return check_library(facts.found)


@judge(LOAD, VERSION)
def judge_answer(facts: NcclFacts) -> list[CheckResult]:
    """Only when a library was found to load."""
    if facts.answer is None:
        return []
    return check_answer(facts.answer, facts.found, facts.budget)


def check_library(found: Discovery) -> CheckResult:
    copies = [c.to_dict() for c in found.copies]
    details: dict[str, Any] = {
        "copies": copies, "loaded": found.resolution.found, "found_via": found.resolution.how,
        "search_order": [f"{s.how}: {s.directory}" for s in found.resolution.steps][:20],
        "torch_lib": str(found.torch.lib_dir) if found.torch.lib_dir else None,
        "torch_cpu_only": found.torch.simulated, "wheel": found.wheel}
    if found.resolution.found is None:
        if torch_missing():  # nothing here would load NCCL: no library, no torch to bring one
            return skipped(LIBRARY, "no libnccl.so.2 on this host, and no torch to bring one: "
                           f"{TORCH_INSTALL} (or run ncclcheck in the training environment), "
                           "or point --nccl-lib at a libnccl.so.2", **details)
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
