"""The layer below the frameworks: library loading, RDMA libraries, the NVIDIA driver.

Each line is the library's own text in a variant other than the catalogue example (another
library, version or prefix); the category follows what the message means. Fixtures are
written here, not copied.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from explained import findings_of

WORDINGS = [
    # the dynamic loader: a missing library is configuration, one that does not fit is a version
    ("ImportError: libnccl.so.2: cannot open shared object file: No such file or directory",
     "loader.cuda_library_missing", "configuration"),
    ("ValueError: libcublas.so.*[0-9] not found in the system path ['/workspace']",
     "loader.cuda_library_missing", "configuration"),
    ("OSError: libnvidia-ml.so.1: cannot open shared object file: No such file or directory",
     "loader.driver_library_missing", "cuda"),
    ("OSError: librdmacm.so.1: cannot open shared object file: No such file or directory",
     "loader.network_library_missing", "configuration"),
    ("ImportError: /opt/conda/lib/python3.11/site-packages/apex_C.cpython-311-x86_64-linux-gnu"
     ".so: undefined symbol: _ZNK3c105Error4whatEv", "loader.undefined_symbol",
     "version_mismatch"),
    ("ImportError: /usr/lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.30' not "
     "found (required by /opt/venv/lib/python3.10/site-packages/torch/lib/libtorch_python.so)",
     "loader.libc_too_old", "version_mismatch"),
    # rdma-core's provider warning, older and newer prefixes
    ("ibverbs: warning: couldn't load driver 'mlx4': libmlx4-rdmav2.so: cannot open shared "
     "object file: No such file or directory", "rdma.verbs_provider_missing", "infiniband"),
    ("libibverbs: Warning: no userspace device-specific driver found for "
     "/sys/class/infiniband_verbs/uverbs0", "rdma.verbs_provider_missing", "infiniband"),
    # UCX and MPI over InfiniBand/libfabric
    ("[1712345678.1] [gpu3:777:0] ib_mlx5_log.c:177 UCX  ERROR Remote access on mlx5_2:1/RoCE "
     "(synd 0x13 vend 0x88 hw_synd 0/0)", "ucx.ib_completion_error", "infiniband"),
    ("MPIDI_NM_mpi_init_hook(719): OFI addrinfo() failed (ofi_init.h:719:MPIDI_NM_mpi_init_hook"
     ":No data available)", "mpi.ofi_init_failed", "net_plugin"),
    ("The InfiniBand retry count between two MPI processes has been", "mpi.openib_device_error",
     "infiniband"),
    # the NVIDIA driver: Xid 74 is NVLink (p2p), 79 and ECC stay GPU faults, 45 follows a kill
    ("NVRM: Xid (PCI:0000:b7:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error "
     "detected on link 10", "nvidia.xid_nvlink", "p2p"),
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", "cuda.xid", "cuda"),
    ("NVRM: Xid (PCI:0000:3b:00): 48, pid=1234, name=python, An uncorrectable double bit error "
     "(DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
     "cuda.xid", "cuda"),
    ("NVRM: Xid (0000:3b:00): 45, pid=4411, name=python, Ch 00000008",
     "nvidia.xid_channel_cleanup", "cuda"),
    ("[  +0.056775] NVRM: API mismatch: the client 'nvidia-smi' (pid 1234) has the version "
     "550.54.15, but", "nvidia.api_mismatch", "version_mismatch"),
    ("NVRM: GPU 0000:3b:00.0: RmInitAdapter failed! (0x26:0xffff:1290)", "nvidia.rm_init_failed",
     "cuda"),
    ("Unable to determine the device handle for GPU0: GPU is lost.", "nvidia.smi_device_lost",
     "cuda"),
    ("RuntimeError: CUDA error: system has unsupported display driver / cuda driver combination",
     "cuda.compat_unsupported", "version_mismatch"),
]


def _findings(tmp_path: Path, text: str) -> list[dict]:
    return findings_of(tmp_path, text, lines_only=True)


@pytest.mark.parametrize("text,expected,category", WORDINGS)
def test_other_wording_gives_the_signature_and_category(tmp_path: Path, text: str,
                                                        expected: str, category: str):
    found = _findings(tmp_path, text)
    assert found and found[0]["id"] == expected, (found, text)
    assert found[0]["category"] == category


def test_ncclnet_plugin_absence_stays_clean(tmp_path: Path):
    """NCCL prints the missing optional net plugin on every healthy run: no finding."""
    text = ("node1:1:1 [0] NCCL INFO NET/Plugin: Plugin load (libnccl-net.so) returned 2 : "
            "libnccl-net.so: cannot open shared object file: No such file or directory")
    assert _findings(tmp_path, text) == []
