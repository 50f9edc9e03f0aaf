"""nccl.known_issues: the libraries this job loads against the table of known problems.

The preflight already reads which NCCL a job really loads (and torch, the net plugin, the
driver), but a version can be fine in general and known-bad for this job: NCCL's RAS crashed
some 2.24-2.27 releases until disabled, NVIDIA's resiliency extension asks to avoid NCCL
2.28.3-2.28.8 with its in-process restart. This check compares what it read with the table
(ncclcheck/catalogue/known_issues.toml, with each entry's conditions, first fixed release and
sources) and warns with the fix; it passes when nothing applies. Settings a newer release reads
under a new name warn with the new name, but only when the installed library itself reads the
new name (its own strings say so; an older library still reads the old one).

``read_scene`` reads what the table's conditions ask about; ``known_issue_results`` judges, so
the judgement is tested with scenes written by hand.
"""

from __future__ import annotations

import glob
import importlib.metadata
import importlib.util
import platform
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from ncclcheck.catalogue.known_issues import (KnownIssue, KnownIssues, Rename, Scene, Version,
                                              applies, load, version_of)
from ncclcheck.model import Category, CheckResult, passed, warned
from ncclcheck.ncclib.elf import ElfError, ElfFile
from ncclcheck.ncclib.gpu import kernel_driver_version
from ncclcheck.needs import torch_package
from ncclcheck.probes.nccl.facts import NcclFacts
from ncclcheck.probes.spec import CheckSpec, judge

KNOWN = CheckSpec(
    "nccl.known_issues", "no known problem of the loaded NCCL, torch, net plugin or driver "
    "applies to this job", (Category.VERSION_MISMATCH,),
    warns_when="the loaded NCCL, torch, aws-ofi-nccl or driver release has a known problem "
               "whose conditions hold here (RAS on, in-process restart installed, the GPU "
               "family, a setting, the plugin), or a setting is set under the old name of "
               "one the installed library reads under a new name",
    doc="The table, with each entry's affected releases, conditions, first fixed release and "
        "sources, is docs/known-issues.md. The fix names the release to upgrade to, or the "
        "setting that avoids the problem.",
    order=35)

_OFI_VERSION = re.compile(rb"aws-ofi-nccl[ -]v?(\d+\.\d+\.\d+)")
_TORCH_LIBS = ("libtorch_cpu.so", "libtorch_cuda.so")
_GPU_MODEL = re.compile(r"^Model:\s*(.+)$", re.M)


@dataclass(frozen=True)
class TorchInstall:
    """The installed torch as read without importing it: its version and the variable names
    its libraries carry (None when torch or its libraries cannot be read)."""

    version: Version | None = None
    names: frozenset[str] | None = None


@judge(KNOWN)
def judge_known_issues(facts: NcclFacts) -> CheckResult:
    torch = read_torch()
    scene = read_scene(facts, torch)
    return known_issue_results(load(), scene, nccl_reads=nccl_reader(facts), torch=torch)


def nccl_reader(facts: NcclFacts) -> Callable[[str], bool | None]:
    """Whether the loaded libnccl reads a variable name (from its own strings); None when no
    library could be read."""
    names = facts.names
    return lambda name: (name in names.nccl_names) if names.from_library else None


def read_torch() -> TorchInstall:
    """torch's version and the names compiled into its libraries, found without importing it
    (importing torch costs seconds)."""
    package = torch_package()
    if package is None:
        return TorchInstall()
    try:
        version = version_of(importlib.metadata.version("torch"))
    except importlib.metadata.PackageNotFoundError:
        version = None
    lib = package / "lib"
    data = b""
    for name in _TORCH_LIBS:
        try:
            with ElfFile(lib / name) as elf:
                data += b"\0" + elf.section_bytes(".rodata")
        except (ElfError, OSError):
            continue
    names = {n for r in load().renames if r.library == "torch" for n in (r.old, r.new)}
    # bytes.find per name: a dozen memchr-speed scans beat one regex pass over ~20 MB
    found = frozenset(n for n in names if f"\0{n}\0".encode() in data) if data else None
    return TorchInstall(version, found)


def read_plugin_versions(paths: list[str]) -> dict[str, Version]:
    """The net plugins among ``paths`` that name themselves in their strings (aws-ofi-nccl
    prints "Initializing aws-ofi-nccl X.Y.Z"), with their versions."""
    found: dict[str, Version] = {}
    for path in paths:
        try:
            with ElfFile(path) as elf:
                data = elf.section_bytes(".rodata")
        except (ElfError, OSError):
            continue
        match = _OFI_VERSION.search(data)
        if match:
            found["aws-ofi-nccl"] = version_of(match.group(1).decode())  # type: ignore[assignment]
    return found


def read_driver_version() -> Version | None:
    """The NVIDIA kernel driver's release (535.104.5), None without a driver."""
    text = kernel_driver_version()
    return version_of(text) if text else None


def read_gpu_names() -> tuple[str, ...] | None:
    """The GPU models the driver lists (/proc/driver/nvidia/gpus/*/information); () with no
    NVIDIA driver, None when it is loaded but lists none readable."""
    files = glob.glob("/proc/driver/nvidia/gpus/*/information")
    if not files:
        return None if Path("/proc/driver/nvidia").exists() else ()
    names = []
    for path in sorted(files):
        try:
            match = _GPU_MODEL.search(Path(path).read_text())
        except OSError:
            continue
        if match:
            names.append(match.group(1).strip())
    return tuple(names) or None


def read_scene(facts: NcclFacts, torch: TorchInstall) -> Scene:
    """What the table's conditions ask about, read on this host."""
    plugins = [p.path for s in facts.searches if s.kind.name == "net" for p in s.found
               if p.path]
    plugin_versions = read_plugin_versions(plugins)
    nccl = facts.version
    versions: dict[str, Version | None] = {
        "nccl": (nccl.major, nccl.minor, nccl.patch) if nccl else None,
        "torch": torch.version, "driver": read_driver_version(),
        "aws-ofi-nccl": plugin_versions.get("aws-ofi-nccl")}
    return Scene(versions=versions, settings=dict(facts.env),
                 ras=facts.env.get("NCCL_RAS_ENABLE", "1").strip() != "0",
                 inprocess_restart=importlib.util.find_spec("nvidia_resiliency_ext") is not None,
                 infiniband=bool(facts.ib_devices), arch=platform.machine(),
                 gpus=read_gpu_names(), plugins=tuple(plugin_versions))


# -- the judgement ------------------------------------------------------------------------------
def _shown(version: Version | None) -> str:
    return ".".join(str(x) for x in version) if version else "?"


def issue_entry(issue: KnownIssue, scene: Scene) -> dict[str, Any]:
    return {"id": issue.id, "library": issue.library,
            "version": _shown(scene.versions.get(issue.library)), "title": issue.title,
            "symptom": issue.symptom, "affected": issue.affected_text, "scope": issue.scope,
            "fixed": issue.fixed, "fix": issue.fix, "sources": list(issue.sources)}


def rename_applies(rename: Rename, scene: Scene, nccl_reads: Callable[[str], bool | None],
                   torch: TorchInstall) -> bool:
    """The old name is set and the installed library reads the new one: read from its strings
    when they can be read, else from its version against the rename's release."""
    if rename.old not in scene.settings or rename.new in scene.settings:
        return False
    if rename.library == "nccl":
        reads = nccl_reads(rename.new)
    else:
        reads = None if torch.names is None else rename.new in torch.names
    if reads is not None:
        return reads
    version = scene.versions.get(rename.library)
    return version is not None and version >= rename.since


def known_issue_results(table: KnownIssues, scene: Scene,
                        nccl_reads: Callable[[str], bool | None] = lambda name: None,
                        torch: TorchInstall = TorchInstall()) -> CheckResult:
    """Warn with every issue that applies (and every renamed setting set under its old name);
    pass naming what was compared, and the issues whose conditions could not be told."""
    found = [issue_entry(i, scene) for i in table.issues if applies(i, scene) is True]
    unknown = [i.id for i in table.issues if applies(i, scene) is None]
    dormant = [f"{i.id} ({i.scope})" for i in table.issues
               if i.affects(scene.versions.get(i.library)) and applies(i, scene) is False]
    renamed = [{"variable": r.old, "new_name": r.new, "library": r.library,
                "since": r.since_text, "sources": list(r.sources)}
               for r in table.renames if rename_applies(r, scene, nccl_reads, torch)]
    compared = {lib: _shown(v) for lib, v in scene.versions.items() if v is not None}
    details: dict[str, Any] = {"issues": found, "renamed_settings": renamed,
                               "versions": compared, "undecided": unknown,
                               "conditions_not_met": dormant}
    if not found and not renamed:
        what = ", ".join(f"{lib} {v}" for lib, v in compared.items()) or "no library version read"
        asleep = (f"; {len(dormant)} more affect these releases only under conditions that "
                  "do not hold here, details.conditions_not_met" if dormant else "")
        return passed(KNOWN, f"no known issue applies ({what}; {len(table.issues)} entries "
                      f"compared{asleep})", **details)
    parts = [f"{e['library']} {e['version']}: {e['title']} ({e['symptom']}"
             + (f"; fixed in {e['fixed']}" if e["fixed"] else "; no fixed release yet")
             + f"; {e['sources'][0]})" for e in found]
    parts += [f"{r['variable']} is an old name: the installed {r['library']} reads "
              f"{r['new_name']} ({r['library']} {r['since']} renamed it; {r['sources'][0]})"
              for r in renamed]
    fix = " ".join([e["fix"] for e in found]
                   + [f"Rename {r['variable']} to {r['new_name']}." for r in renamed])
    word = "issue" if len(parts) == 1 else "issues"
    return warned(KNOWN, f"{len(parts)} known {word}: " + "; ".join(parts), fix,
                  Category.VERSION_MISMATCH, **details)


def settings_renamed(table: KnownIssues | None = None) -> Mapping[str, Rename]:
    """Old name -> its rename: the settings this check judges instead of the linter."""
    return {r.old: r for r in (table or load()).renames}
