"""What NCCL said about itself: version, CUDA, interfaces, transports, plugins, communicators."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ncclcheck.ncclib.version import LOG_LINE as NCCL_VERSION_LINE
from ncclcheck.ncclib.version import build_cuda, cuda_version_tuple

_DRIVER = re.compile(r"cudaDriverVersion (?P<driver>\d+)")
_BOOTSTRAP = re.compile(r"Bootstrap ?: Using (?P<ifname>[^\s:]+):")
_NET_USING = re.compile(r"NET/(?P<net>\w+) ?: Using (?P<list>.*)")
_NET_DEVICE = re.compile(r"\[\d+\](?P<dev>[^\s:]+)")
_OOB = re.compile(r"OOB (?P<ifname>[^\s:]+):")
_NETWORK = re.compile(r"Using network (?P<network>\S+)")
_VIA = re.compile(r" via (?P<transport>NET/[\w-]+|P2P/[\w-]+|SHM|CollNet\w*|NVLS\w*)")
_NVLS = re.compile(r"\bNVLS (?:multicast|comm|enabled|support)", re.I)
_PLUGIN = re.compile(r"(?P<kind>NET|TUNER|PROFILER|ENV|GIN|RMA)/Plugin ?: ?(?P<text>.*)")
_PLUGIN_LOADED = re.compile(
    r"(?:Successfully loaded external (?:network )?plugin|Loaded (?:net|tuner|profiler|env) "
    r"plugin|Initialized NET plugin) (?P<name>\S+)")
_SETTING = re.compile(r"\b(?P<name>NCCL_[A-Z0-9_]+) set by environment to (?P<value>\S+?)\.?$")
_INIT = re.compile(r"rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<dev>-?\d+)"
                   r".*?- Init (?P<phase>START|COMPLETE)")


@dataclass
class NcclSummary:
    """Facts gathered from NCCL INFO lines (sets, so many ranks' lines say each thing once)."""

    versions: list[str] = field(default_factory=list)
    cuda_runtime: list[str] = field(default_factory=list)
    cuda_driver: list[str] = field(default_factory=list)
    interfaces: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)
    transports: list[str] = field(default_factory=list)
    plugins: list[str] = field(default_factory=list)
    nranks: list[int] = field(default_factory=list)
    init_started: int = 0
    init_complete: int = 0
    settings: dict[str, str] = field(default_factory=dict)
    seen: bool = False

    def feed(self, message: str) -> None:
        """Take one NCCL INFO (or version) line's message."""
        self.seen = True
        if (found := NCCL_VERSION_LINE.search(message)):
            _add(self.versions, found.group("version"))
            if (cuda := build_cuda(found.group("build"))):
                _add(self.cuda_runtime, cuda)
        if (found := _DRIVER.search(message)):
            major, minor = cuda_version_tuple(int(found.group("driver")))
            _add(self.cuda_driver, f"{major}.{minor}")
        if (found := _BOOTSTRAP.search(message)):
            _add(self.interfaces, found.group("ifname"))
        if (found := _NET_USING.search(message)):
            for dev in _NET_DEVICE.findall(found.group("list")):
                _add(self.interfaces, dev)
            if (oob := _OOB.search(found.group("list"))):
                _add(self.interfaces, oob.group("ifname"))
            _add(self.transports, f"NET/{found.group('net')}")
        if (found := _NETWORK.search(message)):
            _add(self.networks, found.group("network"))
        for transport in _VIA.findall(message):
            _add(self.transports, transport.rstrip("/"))
        if _NVLS.search(message):
            _add(self.transports, "NVLS")
        if (found := _PLUGIN.search(message)):
            _add(self.plugins, f"{found.group('kind')}/Plugin: {found.group('text').strip()}")
        elif (found := _PLUGIN_LOADED.search(message)):
            _add(self.plugins, f"loaded {found.group('name')}")
        if (found := _SETTING.search(message)) and len(self.settings) < 64:
            self.settings.setdefault(found.group("name"), found.group("value"))
        if (found := _INIT.search(message)):
            _add(self.nranks, int(found.group("nranks")))
            if found.group("phase") == "START":
                self.init_started += 1
            else:
                self.init_complete += 1

    def to_dict(self) -> dict[str, Any] | None:
        if not self.seen:
            return None
        return {
            "version": ", ".join(self.versions) or None,
            "cuda_driver": ", ".join(self.cuda_driver) or None,
            "cuda_runtime": ", ".join(self.cuda_runtime) or None,
            "interfaces": self.interfaces,
            "networks": self.networks,
            "transports": self.transports,
            "plugins": self.plugins[:12],
            "nranks": self.nranks,
            "init_started": self.init_started,
            "init_complete": self.init_complete,
            "settings": self.settings,
        }


def _add(items: list, value: Any) -> None:
    if value not in items and len(items) < 64:
        items.append(value)
