"""The taxonomy's own vocabulary: words on an error line that point at a failure category.

Used by the keyword fallback (fallback.py) when an error is visible but no signature names it.
Each cue is a regex (without regard to case, except acronyms) and a weight: 3 for words that belong to one category only (``ibv_``,
``/dev/shm``, ``getaddrinfo``), 2 for strong but shared ones, 1 for words that merely lean.
The fix texts are each category's general advice, since no particular message was recognised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ncclcheck.catalogue import Signature
from ncclcheck.model import Category


@dataclass(frozen=True)
class Cue:
    """A word (regex) that points at ``category`` with ``weight``."""

    category: Category
    pattern: re.Pattern[str]
    weight: int


_C = Category
_VOCABULARY: tuple[tuple[Category, int, str], ...] = (
    (_C.INFINIBAND, 3, r"\bibv_\w+|libibverbs|\bmlx[45]_?\w*|NET/IB\b|InfiniBand|\bRoCE\b|"
                       r"memlock|\bRDMA\b|GDRDMA|GPUDirect|\bverbs\b"),
    (_C.INFINIBAND, 3, r"(?-i:\bGID\b|\bHCA\b)"),
    (_C.INFINIBAND, 2, r"(?-i:\bIB\b)"),
    (_C.NET_PLUGIN, 3, r"NET/OFI|libfabric|(?-i:\bEFA\b|\bSHARP\b)|aws-ofi|\bofi\b|CollNet|"
                       r"libnccl-net|net plugin|NET/Plugin"),
    (_C.SHARED_MEMORY, 3, r"/dev/shm|shm_open|posix_fallocate|shared memory|\bshm\b|"
                          r"--shm-size|--ipc=host"),
    (_C.P2P, 3, r"\bP2P\b|NVLink|NVSwitch|\bNVLS\b|IOMMU|(?-i:\bACS\b)|peer access|peer[- ]to[- ]peer|"
                r"cudaIpc|P2P/IPC"),
    (_C.OUT_OF_MEMORY, 3, r"out of memory|(?-i:\bOOM\b)|Killed process|oom[-_]kill|"
                          r"Cannot allocate memory|MemoryError|\bENOMEM\b"),
    (_C.NAME_RESOLUTION, 3, r"getaddrinfo|gethostbyname|Name or service not known|"
                            r"nodename nor servname|name resolution|No address associated|"
                            r"unknown host|could not resolve|failed to resolve|\bresolv\w*"),
    (_C.CONNECTION, 3, r"Connection refused|No route to host|Connection reset|ECONNREFUSED|"
                       r"Network is unreachable|timed out connecting|failed to connect|"
                       r"connect\(\) failed|Broken pipe|Host key verification|"
                       r"Permission denied \(publickey|\bssh\b|\bpdsh\b"),
    (_C.CONNECTION, 1, r"\bconnect\w*"),
    (_C.PORT_IN_USE, 3, r"Address already in use|errno:? ?98\b|EADDRINUSE|address in use"),
    (_C.PORT_IN_USE, 1, r"\bbind\b"),
    (_C.CUDA, 3, r"CUDA error|cudaError\w*|CUDA_ERROR_\w+|CUDA driver|no CUDA-capable|"
                 r"device-side assert|illegal memory access|cuda failure|unhandled cuda error|"
                 r"CUBLAS_STATUS|cuDNN error|busy or unavailable"),
    (_C.CUDA, 1, r"\bCUDA\b|\bdriver\b"),
    (_C.VERSION_MISMATCH, 3, r"version mismatch|versions? (?:differ|mismatch)|undefined symbol|"
                             r"incompatible|compiled (?:with|for|against)|built (?:with|for)|"
                             r"GLIBC\w*|too old|requires? (?:a )?newer|(?-i:\bABI\b)"),
    (_C.VERSION_MISMATCH, 1, r"\bversion\b"),
    # (not the configured timeout that torch prints in every WorkNCCL: "Timeout(ms)=600000")
    (_C.TIMEOUT, 2, r"(?:watchdog|timed? ?out|deadline exceeded)(?!\(ms\))"),
    (_C.RANK_MISMATCH, 2, r"world_size|WORLD_SIZE|local_rank|LOCAL_RANK|node_rank|NODE_RANK|"
                          r"invalid rank|rank \d+ (?:is )?out of range|num_nodes|nnodes|ntasks"),
    (_C.RANK_CRASHED, 2, r"SIGSEGV|SIGKILL|SIGABRT|SIGBUS|Segmentation fault|core dumped|"
                         r"exitcode|exit code|[Ss]ignal \d+|bus error|Aborted"),
    (_C.DUPLICATE_GPU, 3, r"Duplicate GPU|same (?:GPU|device)|both on (?:GPU|device)"),
    (_C.DUPLICATE_GPU, 1, r"CUDA_VISIBLE_DEVICES|set_device"),
    (_C.CONFIGURATION, 2, r"\bNCCL_[A-Z_]{3,}|invalid argument|invalid usage|ncclInvalid\w+|"
                          r"invalid value|misconfigur\w*|must be set|is not set"),
    (_C.INTERFACE, 3, r"SOCKET_IFNAME|IFNAME|no (?:socket )?interface|network interface|"
                      r"Address family|docker0|\bveth\w*"),
)

CUES: tuple[Cue, ...] = tuple(Cue(category, re.compile(pattern, re.I),
                                  weight) for category, weight, pattern in _VOCABULARY)

# What to do about a category when only its vocabulary, not a known message, was seen.
GENERAL_FIX: dict[Category, str] = {
    _C.RANK_MISMATCH: "Make rank, world size, local rank and node rank agree with nodes x GPUs "
                      "per node on every node (`ncclcheck ranks --nodes N --gpus-per-node M`).",
    _C.INTERFACE: "Point NCCL and Gloo at one real, routable interface: NCCL_SOCKET_IFNAME / "
                  "GLOO_SOCKET_IFNAME (`ncclcheck net` shows what NCCL would pick).",
    _C.CONNECTION: "Check that every node reaches MASTER_ADDR:MASTER_PORT and the peers "
                   "(firewall, security groups, ssh for launchers); `ncclcheck net` tests the mesh.",
    _C.NAME_RESOLUTION: "Make every host name in the job resolve to the right address on every "
                        "node (/etc/hosts or DNS), or use IP addresses for MASTER_ADDR.",
    _C.PORT_IN_USE: "Pick a free MASTER_PORT (or stop the process holding it: `ss -ltnp`).",
    _C.VERSION_MISMATCH: "Use the same NCCL, torch and CUDA builds on every node, built for the "
                         "installed driver and GPU (`ncclcheck nccl` shows what is loaded).",
    _C.NET_PLUGIN: "Check the NCCL net plugin (aws-ofi-nccl / EFA, SHARP, CollNet): that it "
                   "loads, matches the NCCL version, and NCCL_NET / NCCL_NET_PLUGIN select it.",
    _C.INFINIBAND: "Check the IB / RoCE setup: `ibv_devinfo` port state, NCCL_IB_HCA, "
                   "NCCL_IB_GID_INDEX for RoCE, memlock ulimit unlimited, GPUDirect RDMA modules.",
    _C.SHARED_MEMORY: "Give the container enough /dev/shm (docker --shm-size=1g or --ipc=host; "
                      "Kubernetes: an emptyDir with medium Memory on /dev/shm).",
    _C.P2P: "Check GPU peer-to-peer: disable IOMMU / PCI ACS on bare metal, or set "
            "NCCL_P2P_DISABLE=1 to confirm; `nvidia-smi topo -m` shows the links.",
    _C.DUPLICATE_GPU: "Give each rank its own GPU: torch.cuda.set_device(local_rank) before "
                      "init, and check CUDA_VISIBLE_DEVICES per process.",
    _C.TIMEOUT: "Find the rank that did not reach the collective (its own log shows why); "
                "raise the timeout only when the work is legitimately slow.",
    _C.CUDA: "Check the GPU and driver on that node (`nvidia-smi`, driver vs CUDA runtime "
             "version, compute mode, other processes holding the GPU).",
    _C.OUT_OF_MEMORY: "Reduce memory use (batch size, activation checkpointing) or give the job "
                      "more GPU / host memory; check the node's OOM killer log.",
    _C.RANK_CRASHED: "Read the log of the rank that died first: its own error is the cause, "
                     "the other ranks only saw it disappear.",
    _C.CONFIGURATION: "Check the settings the error names (NCCL_* variables, launcher and "
                      "Trainer options) against their documented values.",
    _C.DESYNC: "Find where the ranks' code paths part: the culprit rank's own log and the code "
               "at its last recorded frame (a collective skipped or called in another order, a "
               "data-dependent branch, an uneven last batch).",
    _C.DEGRADED: "Compare the node or link named with its peers (`ncclcheck bench --isolate "
                 "nodes` under the job's launcher): NIC link speed and errors, the GPU's PCIe "
                 "link width and generation, cables, switch ports; take it out of the job until "
                 "it is fixed.",
    _C.OTHER: "Read the error line named above; no known category fits it.",
}


def category_signature(sig_id: str, category: Category, title: str, meaning: str,
                       priority: int) -> Signature:
    """A finding for a category read without a recognised message (keywords, the text model):
    an inferred signature with no pattern and the category's general fix."""
    return Signature(id=sig_id, category=category, title=title, meaning=meaning,
                     fix=GENERAL_FIX[category], patterns=(), example="",
                     priority=priority, inferred=True)
