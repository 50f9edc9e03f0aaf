"""Built-in busbw references per hardware, to judge a sweep when no --min-busbw is given.

Each reference is the busbw an all-reduce should reach at large sizes on healthy hardware:
75% of the per-direction bandwidth of the bottleneck link (nccl-tests' busbw is defined to be
comparable to that link, doc/PERFORMANCE.md). A sweep warns only when its largest size reaches
less than half of it, so the figures are floors for "something is wrong", not targets. The
link bandwidths and their sources are listed in docs/bench.md. The hardware is asked of its
owners: RDMA ports and link speeds of ``ncclcheck.network``, NCCL_SOCKET_IFNAME as NCCL reads
it (nccl.conf included) of ``ncclcheck.ncclib.config_files``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from ncclcheck.ncclib.config_files import nccl_environment
from ncclcheck.network.interfaces import (IbPort, Interface, fastest_ib_rate, list_ib_ports,
                                          list_interfaces, socket_link_speed)

# The share of the link's per-direction bandwidth a healthy all-reduce reaches at large sizes.
EFFICIENCY = 0.75
# Warn when the largest size reaches less than this share of the reference.
WARN_SHARE = 0.5


@dataclass(frozen=True)
class Reference:
    key: str
    title: str
    link_gbps: float  # per-direction bandwidth of the bottleneck link, GB/s

    @property
    def busbw_gbps(self) -> float:
        return round(self.link_gbps * EFFICIENCY, 1)

    @property
    def warn_below_gbps(self) -> float:
        return round(self.busbw_gbps * WARN_SHARE, 1)


REFERENCES: dict[str, Reference] = {r.key: r for r in (
    Reference("8xA100-nvlink", "8x A100 SXM, NVLink 3 through NVSwitch (300 GB/s per direction)", 300.0),
    Reference("8xH100-nvlink", "8x H100/H200 SXM, NVLink 4 through NVSwitch (450 GB/s per direction)", 450.0),
    Reference("pcie", "GPUs over PCIe (Gen3 x16 floor, 16 GB/s per direction)", 16.0),
    Reference("ib-100", "100 Gb/s InfiniBand (EDR), one NIC per GPU", 12.5),
    Reference("ib-200", "200 Gb/s InfiniBand (HDR), one NIC per GPU", 25.0),
    Reference("ib-400", "400 Gb/s InfiniBand (NDR), one NIC per GPU", 50.0),
)}


@dataclass(frozen=True)
class Hardware:
    """What the reference is chosen from; gathered by the benchmark, passed in for tests."""

    backend: str
    gpu_name: str | None = None
    gpus_per_node: int = 0
    nodes: int = 1
    ib_rate_gbit: float | None = None    # fastest active InfiniBand port, Gb/s
    eth_speed_mbit: int | None = None    # link speed of the socket interface, Mb/s


def ethernet_reference(speed_mbit: int) -> Reference:
    gbit = speed_mbit / 1000
    return Reference(f"eth-{gbit:g}", f"{gbit:g} Gb/s Ethernet (sockets)", gbit / 8)


def infiniband_reference(rate_gbit: float) -> Reference:
    for gbit in (400, 200, 100):
        if rate_gbit >= gbit:
            return REFERENCES[f"ib-{gbit}"]
    return Reference(f"ib-{rate_gbit:g}", f"{rate_gbit:g} Gb/s InfiniBand", rate_gbit / 8)


def choose_reference(hw: Hardware) -> Reference | None:
    """The reference for this hardware, or None when ncclcheck has none (then no judgement).

    Across nodes the network is the bottleneck; within one node, the GPU interconnect. Gloo on
    CPU has no reference: it is a connectivity check there, not a performance one.
    """
    if hw.backend != "nccl":
        return None
    if hw.nodes > 1:
        if hw.ib_rate_gbit:
            return infiniband_reference(hw.ib_rate_gbit)
        if hw.eth_speed_mbit and hw.eth_speed_mbit > 0:
            return ethernet_reference(hw.eth_speed_mbit)
        return None
    name = (hw.gpu_name or "").upper()
    if hw.gpus_per_node == 8 and "A100" in name and "PCIE" not in name:
        return REFERENCES["8xA100-nvlink"]
    if hw.gpus_per_node == 8 and ("H100" in name or "H200" in name) and "PCIE" not in name \
            and " NVL" not in name:
        return REFERENCES["8xH100-nvlink"]
    if hw.gpus_per_node > 1:
        return REFERENCES["pcie"]
    return None


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
