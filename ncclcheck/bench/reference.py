"""Built-in busbw references per hardware, to judge a sweep when no --min-busbw is given.

Each reference is the busbw an all-reduce should reach at large sizes on healthy hardware:
75% of the per-direction bandwidth of the bottleneck link (nccl-tests' busbw is defined to be
comparable to that link, doc/PERFORMANCE.md). A sweep warns only when its largest size reaches
less than half of it, so the figures are floors for "something is wrong", not targets. The
link bandwidths and their sources are listed in docs/bench.md.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Mapping

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


_RATE = re.compile(r"^\s*([\d.]+)\s*Gb/sec")


def infiniband_rate(sys_root: str = "/sys/class/infiniband") -> float | None:
    """The fastest ACTIVE InfiniBand/RoCE port's rate in Gb/s, read from sysfs (None if none)."""
    best: float | None = None
    try:
        devices = os.listdir(sys_root)
    except OSError:
        return None
    for device in devices:
        ports = os.path.join(sys_root, device, "ports")
        try:
            names = os.listdir(ports)
        except OSError:
            continue
        for port in names:
            try:
                with open(os.path.join(ports, port, "state"), encoding="ascii") as f:
                    if "ACTIVE" not in f.read():
                        continue
                with open(os.path.join(ports, port, "rate"), encoding="ascii") as f:
                    match = _RATE.match(f.read())
            except OSError:
                continue
            if match:
                rate = float(match.group(1))
                best = rate if best is None else max(best, rate)
    return best


def interface_speed(env: Mapping[str, str], sys_root: str = "/sys/class/net") -> int | None:
    """Link speed (Mb/s) of the first interface NCCL_SOCKET_IFNAME names exactly, else the
    fastest non-loopback interface that reports one."""
    wanted = [n.strip() for n in env.get("NCCL_SOCKET_IFNAME", "").lstrip("=").split(",")
              if n.strip() and not n.startswith("^")]
    try:
        names = wanted or sorted(os.listdir(sys_root))
    except OSError:
        return None
    speeds: list[int] = []
    for name in names:
        if name == "lo":
            continue
        try:
            with open(os.path.join(sys_root, name, "speed"), encoding="ascii") as f:
                speed = int(f.read().strip())
        except (OSError, ValueError):
            continue
        if speed > 0:
            speeds.append(speed)
            if wanted:
                break
    return max(speeds) if speeds else None
