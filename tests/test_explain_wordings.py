"""Other wordings of one failure reach the same signature.

A catalogue example shows one wording; NCCL, CUDA, torch and the libraries around them word
the same failure differently across versions (NCCL 2.4's "Got completion with error" became
"Got completion from peer ... with error", "NET/Plugin :" became "NET/Plugin:"). Each line here
is the library's own text in another version, as its source prints it, and must give the id.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ncclcheck.explain.engine import explain

WORDINGS = [
    # shared memory: NCCL <= 2.7 (shm.h SYSCHECK) and 2.12 (map failure without a size)
    ("node1:33:40 [0] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : "
     "No space left on device", "nccl.shm_failed"),
    ("node1:33:40 [0] misc/shmutils.cc:46 NCCL WARN Could not map /dev/shm/nccl-AbCdEf",
     "nccl.shm_failed"),
    ("Traceback (most recent call last):\nRuntimeError: DataLoader worker (pid 4242) is killed "
     "by signal: Bus error. It is possible that dataloader's workers are out of shared memory.",
     "host.bus_error"),
    # InfiniBand: NCCL <= 2.11 completion and async-event wordings, older ibv_modify_qp text
    ("node1:33:40 [0] transport/net_ib.cc:818 NCCL WARN NET/IB : Got completion with error 12, "
     "opcode 1, len 0, vendor err 129", "nccl.ib_completion_error"),
    ("node1:33:40 [0] transport/net_ib.cc:73 NCCL WARN NET/IB : Got async event : port error",
     "nccl.ib_async_fatal"),
    ("node1:33:40 [0] transport/net_ib/common.cc:140 NCCL WARN NET/IB : mlx5_0:1 async fatal "
     "event on QP (0x55d0) qpn=123 handle=1", "nccl.ib_async_fatal"),
    ("node1:33:40 [3] misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error "
     "No such device", "nccl.ib_modify_qp_failed"),
    ("node1:33:40 [0] misc/ibvwrap.cc:120 NCCL WARN Call to ibv_reg_mr failed with error "
     "Cannot allocate memory", "nccl.ib_memory_registration"),
    ("node1:33:40 [0] misc/ibvwrap.cc:95 NCCL WARN Call to ibv_create_cq failed with error "
     "Cannot allocate memory errno 12", "nccl.ib_verbs_failed"),
    ("allocate memory : Please set max locked memory (ulimit -l) to 'unlimited' "
     "(current: 8192 kbytes)", "host.memlock_limit"),
    # network plugins: "NET/Plugin :" with dlerror= (2.19-2.21), "Plugin load returned" (<= 2.18)
    ("node1:33:33 [0] NCCL INFO NET/Plugin : dlerror=/opt/efa/lib/libfabric.so.1: version "
     "`FABRIC_1.7' not found (required by libnccl-net.so) No plugin found (libnccl-net.so), "
     "using internal implementation", "nccl.net_plugin_broken"),
    ("node1:33:33 [0] NCCL INFO NET/Plugin : Plugin load returned 0 : libnccl-net.so: "
     "undefined symbol: ncclNetPlugin_v5.", "nccl.net_plugin_broken"),
    ("node1:33:33 [0] nccl_net_ofi_init:425 NCCL WARN NET/OFI Couldn't find any optimal "
     "provider", "ofi.no_provider"),
    ("node1:33:33 [0] get_ofi_provider:312 NCCL WARN NET/OFI Could not find any optimal "
     "provider", "ofi.no_provider"),
    # P2P: peer access refused reported as a CUDA failure (SHM cuMem path) or IPC open
    ("node1:774:854 [0] transport/shm.cc:590 NCCL WARN Cuda failure 217 'peer access is not "
     "supported between these two devices'", "nccl.peer_access_failed"),
    ("node1:33:40 [0] transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle : 217 peer "
     "access is not supported between these two devices", "nccl.cuda_ipc_failed"),
    # CUDA failures that name a build or fabric problem, not a generic CUDA error
    ("node1:33:40 [0] init.cc:1200 NCCL WARN Cuda failure 802 'system not yet initialized'",
     "cuda.system_not_ready"),
    ("node1:33:40 [0] enqueue.cc:215 NCCL WARN Cuda failure 209 'no kernel image is available "
     "for execution on the device'", "cuda.no_kernel_image"),
    ("node1:33:40 [0] enqueue.cc:215 NCCL WARN Cuda failure 'invalid device function'",
     "nccl.cuda_failure"),
    # memory killers: the cgroup wording and the older "Kill process ... or sacrifice child"
    ("[Mon Jan  1 00:00:00 2024] Memory cgroup out of memory: Killed process 4242 (python) "
     "total-vm:1kB", "host.oom_killer"),
    ("[12345.678] Out of memory: Kill process 4242 (python) score 900 or sacrifice child",
     "host.oom_killer"),
    ("node1:33:40 [0] include/alloc.h:159 NCCL WARN Failed to CUDA host alloc 1048576 bytes",
     "nccl.cuda_alloc_failed"),
]


@pytest.mark.parametrize("text,expected", WORDINGS, ids=[w[1] + str(i) for i, w in
                                                         enumerate(WORDINGS)])
def test_other_wording_gives_the_same_signature(tmp_path: Path, text: str, expected: str):
    path = tmp_path / "job.log"
    path.write_text(text + "\n", "utf-8")
    findings = explain([str(path)]).to_dict()["findings"]
    assert findings and findings[0]["id"] == expected, [f["id"] for f in findings]


def test_a_socket_type_mismatch_other_than_ib_versus_socket_is_not_claimed(tmp_path: Path):
    path = tmp_path / "job.log"
    path.write_text("node1:1:2 [0] misc/socket.cc:441 NCCL WARN socketFinalizeAccept: wrong "
                    "type 2 != 1\n", "utf-8")
    ids = [f["id"] for f in explain([str(path)]).to_dict()["findings"]]
    assert "nccl.socket_type_mismatch" not in ids
