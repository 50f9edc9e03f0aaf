"""What an all-reduce's busbw should be on this hardware, from one table with its sources
(``expected_busbw.toml``), to judge a sweep by the share of it that it reached.

People keep asking whether their busbw is normal, and every health-check suite keeps its own
table of expected figures. This one holds published all_reduce_perf figures per GPU model and
GPU count within a node (Azure's per VM type), and, for the fabrics whose speed the host
reports, 75% of the bottleneck link's per-direction bandwidth (nccl-tests' busbw is defined to
be comparable to that link). Each row carries the default of --min-share from its source.
Gloo on CPU, one GPU, or hardware the table does not know has no expectation: the reason is
returned instead, for the check's skip. The hardware is asked of its owners: RDMA ports and
link speeds of ``ncclcheck.network``, NCCL_SOCKET_IFNAME as NCCL reads it (nccl.conf included)
of ``ncclcheck.ncclib.config_files``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping, Sequence

from ncclcheck.ncclib.config_files import nccl_environment
from ncclcheck.network.interfaces import (IbPort, Interface, fastest_ib_rate, list_ib_ports,
                                          list_interfaces, socket_link_speed)

from .metrics import SizeRow
from .sizes import parse_size

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the oldest supported Pythons
    import tomli as tomllib

TABLE = "expected_busbw.toml"
EFFICIENCY = 0.75  # the share of a link's per-direction bandwidth a healthy all-reduce reaches


@dataclass(frozen=True)
class Reference:
    """The busbw expected of this hardware, the message size it was measured at (0: the
    largest of the sweep), the default --min-share and why, and the sources."""

    key: str
    title: str
    busbw_gbps: float
    min_share: float = 0.5
    nbytes: int = 0
    share_basis: str = ""
    sources: tuple[str, ...] = ()
    kind: str = "link"

    @property
    def floor_gbps(self) -> float:
        return round(self.busbw_gbps * self.min_share, 2)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "title": self.title, "busbw_gbps": self.busbw_gbps,
                "bytes": self.nbytes or None, "min_share": self.min_share,
                "sources": list(self.sources)}


@dataclass(frozen=True)
class Row:
    """One row of the table as written (see expected_busbw.toml)."""

    key: str
    title: str
    kind: str
    min_share: float
    share_basis: str
    sources: tuple[str, ...]
    gpu: str = ""
    exclude: tuple[str, ...] = ()
    gpus: int = 0
    busbw_gbps: float = 0.0
    nbytes: int = 0
    fabric: str = ""
    link_gbps: float = 0.0
    rate_gbit: float = 0.0

    def reference(self, link_gbps: float | None = None, title: str | None = None) -> Reference:
        busbw = self.busbw_gbps or round((link_gbps or self.link_gbps) * EFFICIENCY, 2)
        return Reference(self.key, title or self.title, busbw, self.min_share, self.nbytes,
                         self.share_basis, self.sources, self.kind)

    def matches_gpu(self, name: str, gpus: int) -> bool:
        upper = name.upper()
        return (self.kind == "measured" and gpus == self.gpus and self.gpu.upper() in upper
                and not any(x.upper() in upper for x in self.exclude))


def _row(raw: Mapping[str, Any]) -> Row:
    if raw.get("kind") not in ("measured", "link") or not raw.get("sources") or not all(
            s.startswith("https://") for s in raw["sources"]):
        raise ValueError(f"{TABLE}: {raw.get('key')}: kind measured|link and https sources")
    share = float(raw["min_share"])
    if not 0 < share <= 1:
        raise ValueError(f"{TABLE}: {raw['key']}: min_share must be in (0, 1]")
    return Row(raw["key"], raw["title"], raw["kind"], share, raw.get("share_basis", ""),
               tuple(raw["sources"]), raw.get("gpu", ""), tuple(raw.get("exclude", ())),
               int(raw.get("gpus", 0)), float(raw.get("busbw_gbps", 0.0)),
               parse_size(raw["bytes"]) if raw.get("bytes") else 0, raw.get("fabric", ""),
               float(raw.get("link_gbps", 0.0)), float(raw.get("rate_gbit", 0.0)))


def parse_table(text: str) -> tuple[Row, ...]:
    rows = tuple(_row(raw) for raw in tomllib.loads(text).get("expected", []))
    if len({r.key for r in rows}) != len(rows):
        raise ValueError(f"{TABLE}: duplicate keys")
    return rows


@lru_cache(maxsize=1)
def table() -> tuple[Row, ...]:
    """The shipped table, read once per process."""
    return parse_table(resources.files(__package__).joinpath(TABLE).read_text("utf-8"))


@dataclass(frozen=True)
class Hardware:
    """What the expectation is chosen from; gathered by the benchmark, passed in for tests."""

    backend: str
    gpu_name: str | None = None
    gpus_per_node: int = 0
    nodes: int = 1
    ib_rate_gbit: float | None = None    # fastest active InfiniBand port, Gb/s
    eth_speed_mbit: int | None = None    # link speed of the socket interface, Mb/s


def _fabric(name: str) -> list[Row]:
    return [r for r in table() if r.kind == "link" and r.fabric == name]


def expectation(hw: Hardware) -> Reference | str:
    """The expected busbw for this hardware, or why there is none (for the check's skip).

    Across nodes the network is the bottleneck; within one node, the GPU interconnect: a
    measured row for the GPU model and count, else PCIe when there are several GPUs.
    """
    if hw.backend != "nccl":
        return (f"{hw.backend} runs on the CPU: a connectivity check here, and no published "
                "figure describes it")
    if hw.nodes > 1:
        if hw.ib_rate_gbit:
            rows = sorted(_fabric("infiniband"), key=lambda r: r.rate_gbit)
            fits = [r for r in rows if hw.ib_rate_gbit >= r.rate_gbit]
            if fits:
                return fits[-1].reference()
            return rows[0].reference(hw.ib_rate_gbit / 8, f"{hw.ib_rate_gbit:g} Gb/s InfiniBand")
        if hw.eth_speed_mbit and hw.eth_speed_mbit > 0:
            gbit = hw.eth_speed_mbit / 1000
            return _fabric("ethernet")[0].reference(gbit / 8, f"{gbit:g} Gb/s Ethernet (sockets)")
        return "no InfiniBand port is active and the socket interface reports no link speed"
    name = hw.gpu_name or ""
    for row in table():
        if name and row.matches_gpu(name, hw.gpus_per_node):
            return row.reference()
    if hw.gpus_per_node > 1:
        return _fabric("pcie")[0].reference()
    return "one GPU on one node: an all-reduce moves nothing between GPUs"


@dataclass(frozen=True)
class Comparison:
    """A sweep against its expectation: the busbw compared, at which size, the share of the
    expected figure, and whether the size is the figure's own (like with like)."""

    measured_gbps: float
    at_bytes: int
    share: float
    like_for_like: bool


def compare(ref: Reference, rows: Sequence[SizeRow]) -> Comparison | None:
    """The busbw at the figure's message size (the first size of the sweep at or above it),
    else the sweep's peak, as a share of the expected figure; None without rows."""
    if not rows:
        return None
    reached = [r for r in rows if ref.nbytes and r.bytes >= ref.nbytes]
    row = (min(reached, key=lambda r: r.bytes) if reached
           else max(rows, key=lambda r: r.busbw_gbps))
    return Comparison(row.busbw_gbps, row.bytes, row.busbw_gbps / ref.busbw_gbps,
                      like_for_like=not ref.nbytes or bool(reached))


def choose_reference(hw: Hardware) -> Reference | None:
    """The expectation, or None when there is none."""
    found = expectation(hw)
    return found if isinstance(found, Reference) else None


def infiniband_rate(ports: Sequence[IbPort] | None = None) -> float | None:
    """The fastest ACTIVE InfiniBand / RoCE port's rate in Gb/s (None if none); ``ports``
    defaults to this host's, as the network owner reads them."""
    return fastest_ib_rate(list_ib_ports() if ports is None else ports)


def interface_speed(env: Mapping[str, str],
                    interfaces: Sequence[Interface] | None = None) -> int | None:
    """Link speed (Mb/s) of the interface NCCL's sockets would use: the first one
    NCCL_SOCKET_IFNAME selects, as NCCL reads it (environment, then nccl.conf), else the
    fastest non-loopback one. ``interfaces`` defaults to this host's."""
    return socket_link_speed(nccl_environment(env),
                             list_interfaces() if interfaces is None else interfaces)
