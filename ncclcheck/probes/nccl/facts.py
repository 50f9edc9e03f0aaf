"""The nccl family's facts: the libnccl a job really loads and what it answers, its plugins,
its config files, the names it reads, and this host's interfaces (asked of the network owner).

The library is asked, not guessed: it is loaded in a child process under the deadline (see
``ncclcheck.ncclib.loader``), so a libnccl that crashes or hangs becomes an ``error`` result.
Every read happens here, once, so the checks only judge; tests build ``NcclFacts`` by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

from ncclcheck.context import ProbeContext
from ncclcheck.ncclib.config_files import ConfigFile, nccl_environment, read_config_files
from ncclcheck.ncclib.discovery import Discovery, discover
from ncclcheck.ncclib.library_names import NameSource, name_source
from ncclcheck.ncclib.loader import LibraryAnswer, ask_library
from ncclcheck.ncclib.plugins import KINDS, PluginSearch, find_plugins, supported_versions
from ncclcheck.ncclib.search import ldconfig_cache
from ncclcheck.ncclib.version import NcclVersion, parse_label
from ncclcheck.network.interfaces import (Interface, list_ib_devices, list_interfaces,
                                          predict_nccl_bootstrap)


LOAD_TIMEOUT = 20.0  # seconds the child may take; less when the command deadline is nearer


@dataclass
class NcclFacts:
    """Everything the nccl checks judge, gathered once by ``gather_facts`` (tests build it)."""

    ctx: ProbeContext
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

    @property
    def interfaces_up(self) -> dict[str, list[str]]:
        return local_interfaces(self.interfaces)


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
    return NcclFacts(ctx=ctx, env=nccl_env, found=found, answer=answer, budget=budget,
                     interfaces=list_interfaces(), ib_devices=list_ib_devices(),
                     searches=searches, supported=supported_versions(library) if library else {},
                     files=read_config_files(ctx.env), names=name_source(library, version),
                     host=ctx.host)


def loaded_version(answer: LibraryAnswer | None, found: Discovery) -> NcclVersion | None:
    if answer is not None and answer.version is not None:
        return answer.version
    winner = found.winner
    label = parse_label(winner.version) if winner and winner.version else None
    return label.version if label else None


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


def int_value(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None
