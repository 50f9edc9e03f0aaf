"""NCCL's external plugins: which files NCCL would open, which API versions they export, and
whether the loaded NCCL speaks any of them.

NCCL looks a plugin up by name (NCCL_NET_PLUGIN and friends, see ``candidate_names``) with
dlopen from inside libnccl, then asks for versioned symbols from the newest it knows down to the
oldest (ncclNetPlugin_v12, ..._v11, ...). The versions a libnccl knows are the symbol names
compiled into its read-only data, so they are read from the library itself, not from a table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ncclcheck.ncclib.elf import ElfError, ElfFile
from ncclcheck.ncclib.search import resolve

_VERSIONED = re.compile(
    rb"(?<![A-Za-z0-9_])(ncclNetPlugin|ncclCollNetPlugin|ncclTunerPlugin|ncclProfiler|ncclEnvPlugin"
    rb"|ncclGinPlugin|ncclRmaPlugin)_v(\d+)\0")
_SYMBOL = re.compile(r"^(ncclNetPlugin|ncclCollNetPlugin|ncclTunerPlugin|ncclProfiler|ncclEnvPlugin"
                     r"|ncclGinPlugin|ncclRmaPlugin)_v(\d+)$")


@dataclass(frozen=True)
class PluginKind:
    name: str                 # "net"
    variable: str             # the environment variable that names it
    prefix: str               # file name prefix: libnccl-net -> libnccl-net.so, libnccl-net-<x>.so
    symbols: tuple[str, ...]  # versioned symbol families; the first is the one NCCL requires


KINDS: tuple[PluginKind, ...] = (
    PluginKind("net", "NCCL_NET_PLUGIN", "libnccl-net", ("ncclNetPlugin", "ncclCollNetPlugin")),
    PluginKind("tuner", "NCCL_TUNER_PLUGIN", "libnccl-tuner", ("ncclTunerPlugin",)),
    PluginKind("profiler", "NCCL_PROFILER_PLUGIN", "libnccl-profiler", ("ncclProfiler",)),
    PluginKind("env", "NCCL_ENV_PLUGIN", "libnccl-env", ("ncclEnvPlugin",)),
)


def kind(name: str) -> PluginKind:
    return next(k for k in KINDS if k.name == name)


def supported_versions(libnccl: str | Path) -> dict[str, list[int]]:
    """symbol family -> API versions this libnccl asks for (empty dict when unreadable)."""
    try:
        with ElfFile(libnccl) as elf:
            data = elf.section_bytes(".rodata")
    except (ElfError, OSError):
        return {}
    found: dict[str, set[int]] = {}
    for match in _VERSIONED.finditer(data):
        found.setdefault(match.group(1).decode(), set()).add(int(match.group(2)))
    return {k: sorted(v) for k, v in found.items()}


def exported_versions(symbols: list[str]) -> dict[str, list[int]]:
    """symbol family -> versions, from a plugin's exported dynamic symbols."""
    found: dict[str, set[int]] = {}
    for name in symbols:
        match = _SYMBOL.match(name)
        if match:
            found.setdefault(match.group(1), set()).add(int(match.group(2)))
    return {k: sorted(v) for k, v in found.items()}


def candidate_names(plugin: PluginKind, value: str | None) -> list[str] | None:
    """The names NCCL passes to dlopen, in order; None when the variable disables plugins.

    Unset: ``<prefix>.so``. Set: each comma-separated entry is tried as given, and then, when it
    has no '/' and is not already a lib*.so name, as ``<prefix>-<entry>.so``. ``none`` disables.
    """
    if value is None or not value.strip():
        return [f"{plugin.prefix}.so"]
    if value.strip().lower() == "none":
        return None
    names: list[str] = []
    for entry in (e.strip() for e in value.split(",")):
        if not entry:
            continue
        names.append(entry)
        if "/" not in entry and not (entry.startswith("lib") and ".so" in entry):
            names.append(f"{plugin.prefix}-{entry}.so")
    return names


@dataclass
class FoundPlugin:
    path: str
    requested_as: str
    how: str
    exports: dict[str, list[int]] = field(default_factory=dict)
    missing_needed: list[str] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "requested_as": self.requested_as, "found_via": self.how,
                "exports": {k: [f"v{n}" for n in v] for k, v in self.exports.items()},
                "missing_needed": self.missing_needed, "error": self.error}


@dataclass
class PluginSearch:
    kind: PluginKind
    value: str | None
    disabled: bool
    tried: list[str]
    found: list[FoundPlugin]


def find_plugins(plugin: PluginKind, env: Mapping[str, str], libnccl: str | None,
                 cache: Mapping[str, list[str]]) -> PluginSearch:
    """Open every file NCCL would try for this kind, the way its dlopen would find it."""
    value = env.get(plugin.variable)
    names = candidate_names(plugin, value)
    if names is None:
        return PluginSearch(plugin, value, True, [], [])
    requester = Path(libnccl) if libnccl else None
    found: list[FoundPlugin] = []
    for name in names:
        if "/" in name:
            path, how = (name, "path") if Path(name).is_file() else (None, None)
        else:
            res = resolve(name, requester, env, None, cache)
            path, how = res.found, res.how
        if path is None:
            continue
        found.append(inspect_plugin(path, name, how or "", env, cache))
    return PluginSearch(plugin, value, False, names, found)


def inspect_plugin(path: str, requested_as: str, how: str, env: Mapping[str, str],
                   cache: Mapping[str, list[str]]) -> FoundPlugin:
    plugin = FoundPlugin(path, requested_as, how)
    try:
        with ElfFile(path) as elf:
            plugin.exports = exported_versions(elf.exported_symbols())
            needed = elf.dynamic().needed
    except ElfError as exc:
        plugin.error = str(exc)
        return plugin
    for lib in needed:
        if resolve(lib, Path(path), env, None, cache).found is None:
            plugin.missing_needed.append(lib)
    return plugin


@dataclass(frozen=True)
class Judgement:
    """Whether NCCL can use a plugin: ``usable`` None means it cannot be told."""

    usable: bool | None
    chosen: int | None
    reason: str


def judge(plugin: FoundPlugin, family: str, supported: Mapping[str, list[int]]) -> Judgement:
    """Can the loaded NCCL use ``family`` from this plugin, and which version would it pick?"""
    exported = plugin.exports.get(family, [])
    known = list(supported.get(family, []))
    if plugin.error:
        return Judgement(False, None, plugin.error)
    if not exported:
        return Judgement(False, None, f"exports no {family}_vN symbol")
    shown = ", ".join(f"v{v}" for v in exported)
    if not known:
        return Judgement(None, None, f"exports {shown}; the loaded NCCL's supported {family} "
                                     "versions could not be read")
    span = f"v{known[0]}" if len(known) == 1 else f"v{known[0]}-v{known[-1]}"
    common = sorted(set(exported) & set(known))
    if common:
        return Judgement(True, common[-1], f"exports {shown}; NCCL supports {span} and will use "
                                           f"v{common[-1]}")
    age = ("older than" if max(exported) < min(known)
           else "newer than" if min(exported) > max(known) else "outside")
    return Judgement(False, None, f"exports {shown}, {age} what NCCL supports ({span})")
