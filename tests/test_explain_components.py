"""The component that printed a line is read where a signature says only that something failed.

NCCL's generic results ("Call to posix_fallocate failed"), a wrapper that quotes a CUDA error
("Cuda failure '...'") and an NCCL warning that quotes a failed verbs completion all carry
their origin: the knowledge tables generated from that software (ncclcheck/catalogue/knowledge)
say what failed. Lines are real NCCL output (the corpus file named beside each); where a
signature already knows the exact message, it is left out of the catalogue to stand for a
release's wording nobody wrote a signature for.
"""

from __future__ import annotations

import pytest

from ncclcheck.catalogue import Catalogue, load
from ncclcheck.catalogue.knowledge import lookup
from ncclcheck.catalogue.parse import build
from ncclcheck.explain.engine import SHIPPED, explain
from ncclcheck.explain.fallback import line_weight
from ncclcheck.explain.lines import parse_line

# world/dev/c1-004 (NCCL 2.7.3 in a container with a 64 MB /dev/shm)
FALLOCATE = "include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device"
# world/dev/c13-011 (a verbs completion with status 12, IBV_WC_RETRY_EXC_ERR)
COMPLETION = ("task-646--1-mhpnk:91:123 [0] transport/net_ib.cc:881 NCCL WARN NET/IB : Got "
              "completion from peer 172.17.127.14<60090> with error 12, opcode 0, len 0, vendor "
              "err 129")
# NCCL's "Cuda failure" macro around a CUDA error that the cuda table files under p2p
NVLINK = ("node1:3301:3350 [0] transport/p2p.cc:300 NCCL WARN Cuda failure 'uncorrectable "
          "NVLink error detected during the execution'")


def _explain(tmp_path, text: str, catalogue: Catalogue | None = None):
    log = tmp_path / "run.log"
    log.write_text(text)
    return explain([str(log)], None, catalogue)


def _without(*ids: str) -> Catalogue:
    """The shipped catalogue less ``ids``: a wording of those messages no signature knows."""
    shipped = load()
    return Catalogue(tuple(s for s in shipped.signatures if s.id not in ids),
                     {name: tuple(i for i in found if i not in ids)
                      for name, found in shipped.files.items()})


def test_a_generic_result_is_read_for_the_subsystem_that_printed_it(tmp_path):
    """NCCL's "Call to X failed" is generic; include/shm.h printed it: shared memory."""
    found = _explain(tmp_path, FALLOCATE + "\n", _without("nccl.shm_failed"))
    assert found.root.signature.id == "component.shared_memory"
    assert "nccl.syscall_failed" in [f.signature.id for f in found.findings]
    assert found.root.first.line == 1


def test_a_wrapper_is_read_for_the_cuda_error_it_quotes(tmp_path):
    found = _explain(tmp_path, NVLINK + "\n")
    assert found.root.signature.id == "component.p2p"
    assert found.root.first.facts["table"] == "cuda"
    wrapper = next(f for f in found.findings if f.signature.id == "nccl.cuda_failure")
    assert wrapper is not found.root


def test_a_cuda_error_that_says_no_more_than_the_wrapper_leaves_it_the_cause(tmp_path):
    found = _explain(tmp_path, "node1:1:2 [0] init.cc:100 NCCL WARN Cuda failure 'unknown error'\n")
    assert found.root.signature.id == "nccl.cuda_failure"
    assert not [f for f in found.findings if f.signature.id.startswith("component.")]


def test_a_warning_that_quotes_a_failed_verbs_completion_is_a_failure(tmp_path):
    found = _explain(tmp_path, COMPLETION + "\n", _without("nccl.ib_completion_error"))
    assert found.root is not None and found.root.signature.id == "component.infiniband"


@pytest.mark.parametrize("line", [
    "node1:3301:3301 [0] NCCL INFO NET/IB : No device found.",
    "node1:3301:3301 [0] transport/net_ib.cc:120 NCCL WARN NET/IB : No device found.",
    "node1:3301:3301 [0] transport/net_ib.cc:900 NCCL WARN NET/IB : Got async event : GID table "
    "change",
])
def test_a_warning_that_quotes_no_error_stays_context(tmp_path, line):
    """A fallback or an event that is no failure (the verbs table files GID changes as ok)."""
    found = _explain(tmp_path, "epoch 1 loss 0.3\n" + line + "\nepoch 2 loss 0.2\n")
    assert found.root is None
    assert not found.hypotheses


def test_quotes_must_name_an_enumeration_table():
    entry = {"id": "x.wrapper", "category": "cuda", "title": "t", "meaning": "m", "fix": "f",
             "patterns": ["Cuda failure '(?P<error>[^']+)'"], "example": "Cuda failure 'x'",
             "quotes": "nccl_formats"}
    with pytest.raises(ValueError, match="quotes names no enumeration table"):
        build(entry, "test.toml")
    assert build({**entry, "quotes": "cuda"}, "test.toml").quotes == "cuda"


# world/dev/c1-002 (NCCL 2.3's bare WARN, no IP interface on the host)
SOCKET_FAMILY = ("include/socket.h:344 WARN Socket creation failed : Address family not "
                 "supported by protocol")


def test_a_connection_wrapper_is_read_for_the_errno_it_quotes(tmp_path):
    """errno 97 (EAFNOSUPPORT) says more than "socket creation failed": no usable interface."""
    found = _explain(tmp_path, SOCKET_FAMILY + "\n", _without("nccl.socket_family_unsupported"))
    assert found.root.signature.id == "component.interface"
    assert found.root.first.facts["table"] == "errno"


@pytest.mark.parametrize("stamp", ["[W socket.cpp:558]", "[W1206 10:00:00.123 socket.cpp:558]"])
def test_torch_warnings_alone_are_no_failure(tmp_path, stamp):
    """torch tries an IPv6 socket first and warns when the kernel has none; it carries on with
    IPv4 (world/dev/c3-020, a clean run). Both of torch's stamps read the same."""
    line = (f"{stamp} [c10d] The client socket cannot be initialized to connect to "
            "[localhost]:29500 (errno: 97 - Address family not supported by protocol).")
    found = _explain(tmp_path, f"{line}\n{line}\n")
    assert found.root is None and not found.hypotheses


@pytest.mark.parametrize("line, severity", [
    ("[E ProcessGroupNCCL.cpp:485] [Rank 6] Watchdog caught collective operation timeout", "E"),
    ("[rank1]:[E ProcessGroupNCCL.cpp:543] Some NCCL operations have failed", "E"),
    ("[W socket.cpp:436] [c10d] The server socket has failed to bind", "W"),
    ("[E906 12:16:32.61 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught", "E"),
])
def test_torch_s_severity_is_read_from_both_of_its_stamps(line, severity):
    """torch up to 2.0 stamps ``[E file.cpp:N]``, later glog's ``[E0906 12:16:32 ...]``; an
    error it logged is a failure line whatever its words ("before timing out")."""
    info = parse_line(line)
    assert info.severity == severity
    assert line_weight(info.message, info.severity) == (2.0 if severity == "E" else 1.0)


# world/dev/c1-055 (Lightning, two processes on one GPU; NCCL 2.7.8)
DUPLICATE = ("frodo:33793:33885 [1] init.cc:573 NCCL WARN Duplicate GPU detected : rank 1 and "
             "rank 0 both on CUDA device 83000")


def test_a_warning_whose_own_words_name_the_failure_is_one(tmp_path):
    """init.cc is a file of no subsystem: the format's words ("Duplicate GPU detected") are
    what the table files it by, and they name a failure (NCCL returns invalid usage), where a
    warning filed by its file alone ("NET/IB : No device found") only says where it printed."""
    found = _explain(tmp_path, DUPLICATE + "\n", _without("nccl.duplicate_gpu"))
    assert found.root is not None and found.root.signature.id == "component.duplicate_gpu"
    assert found.root.first.facts["table"] == "nccl_formats"


# world/dev/c16-003 (torchrun under Slurm on Kubernetes, the rendezvous host unknown)
RENDEZVOUS = ("RendezvousConnectionError: TCP client failed to connect/validate to host "
              "slinky-0:29400 - {reason}")


@pytest.mark.parametrize("reason, category", [
    ("Name or service not known", "name_resolution"),
    ("Temporary failure in name resolution", "name_resolution"),
    ("Connection refused", "connection"),
])
def test_torchrun_s_connection_error_is_read_for_the_resolver_error_it_quotes(
        tmp_path, reason, category):
    """The agent's wrapper quotes getaddrinfo's error: a host name that does not resolve is a
    name-resolution failure whatever wraps it; a refused connection stays the wrapper's."""
    found = _explain(tmp_path, RENDEZVOUS.format(reason=reason) + "\n",
                     _without("torch.store_host_unresolved"))
    assert found.root is not None and found.root.signature.category.value == category


# world/dev/c13-001 (an H100 runner whose Fabric Manager could not bind NVLS memory): torch's
# exception, then NCCL's last warning, which it echoes below "Last error:"
NVLS_EXCEPTION = (
    "torch.distributed.DistBackendError: NCCL error in: /var/lib/jenkins/workspace/torch/csrc/"
    "distributed/c10d/NCCLUtils.cpp:93, unhandled cuda error (run with NCCL_DEBUG=INFO for "
    "details), NCCL version 2.29.3\n"
    "ncclUnhandledCudaError: Call to CUDA function failed.\n"
    "Last error:\n"
    "Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error 401 'the "
    "operation cannot be performed in the present state'.\n")
# world/dev/c3-023 (a hard-coded NCCL_SOCKET_IFNAME=eth0 on a host without it), under
# torchrun's rank prefix
NO_INTERFACE = (
    "[rank0]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/"
    "distributed/c10d/ProcessGroupNCCL.cpp:2588, internal error - please report this issue to "
    "the NCCL developers, NCCL version 2.21.5\n"
    "[rank0]: ncclInternalError: Internal check failed.\n"
    "[rank0]: Last error:\n"
    "[rank0]: Bootstrap : no socket interface found\n")


@pytest.mark.parametrize("text, gone, category", [
    (NVLS_EXCEPTION, "nccl.nvls_bind_failed", "p2p"),
    (NO_INTERFACE, "nccl.no_socket_interface", "interface"),
])
def test_the_exception_is_read_for_the_last_error_it_quotes(tmp_path, text, gone, category):
    """torch echoes NCCL's last warning below "Last error:" with no NCCL prefix: read as that
    warning (NCCL's formats, their file's subsystem), it is why the call failed, and says more
    than the result the exception names (an unhandled CUDA error, an internal error)."""
    found = _explain(tmp_path, text, _without(gone))
    assert found.root is not None
    assert found.root.signature.id == f"component.last_error.{category}"
    assert found.root.first.facts["table"] == "nccl_formats"
    assert found.root.first.line == 4
    wrapper = found.findings[1]
    assert wrapper.first.line in (1, 2) and wrapper.signature.category.value != category


def test_a_last_error_read_from_one_line_does_not_outrank_the_reading_of_the_run(tmp_path):
    """ncclRemoteError is a consequence, not a wrapper of a cause: the last error it quotes
    ("Connection closed by remote peer") is read from one line, below the text model's
    reading of the whole run (a peer that went away), as any line nobody claimed."""
    text = ("[rank1]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/"
            "distributed/c10d/NCCLUtils.hpp:268, remote process exited or there was a network "
            "error, NCCL version 2.21.5\n"
            "ncclRemoteError: A call failed possibly due to a network error or a remote process "
            "exiting prematurely.\n"
            "Last error:\n"
            "socketProgress: Connection closed by remote peer node2<32926>\n")
    log = tmp_path / "run.log"
    log.write_text(text)
    found = explain([str(log)], SHIPPED, _without("nccl.connection_closed"))
    assert not found.root.signature.id.startswith("component.last_error")
    assert found.root.signature.category.value == "rank_crashed"


def test_a_line_that_does_not_follow_last_error_is_not_read_as_nccl_s_warning(tmp_path):
    """The same words with no "Last error:" above them are no NCCL warning: no finding."""
    found = _explain(tmp_path, NVLS_EXCEPTION.replace("Last error:\n", "\n"),
                     _without("nccl.nvls_bind_failed"))
    assert not any(f.signature.id.startswith("component.last_error")
                   for f in found.findings)


@pytest.mark.parametrize("line, table, category", [
    # CUDA's own error names a failure whichever file's macro printed it
    ("Cuda failure 217 'peer access is not supported between these two devices'", "cuda",
     "p2p"),
    ("node1:1:2 [0] transport/net_ib.cc:12 NCCL WARN Cuda failure 'out of memory'", "cuda",
     "out_of_memory"),
    # an error that says no more than the macro leaves the printing file's subsystem first
    ("node2:242431:242479 [5] transport/nvls.cc:158 NCCL WARN Cuda failure 1 'invalid "
     "argument'", "nccl_formats", "p2p"),
    # a system call's errno in the verbs transport's file is the verbs transport's
    ("host-01:1:2 [5] ibvwrap.c:262 NCCL WARN Call to ibv_modify_qp failed with 110 Connection "
     "timed out, on dev mlx5_1:1, curr state INIT, next state RTR", "nccl_formats",
     "infiniband"),
])
def test_a_macro_s_format_gives_way_to_the_cuda_error_it_quotes(line, table, category):
    best = lookup(line, "WARN")[0]
    assert (best.table, best.category) == (table, category)


# world/dev/c3-009 (aws-ofi-nccl in a container without /dev/infiniband) and c4-022 (an older
# plugin release on a host with no EFA provider): the plugin's function, not a file, before
# NCCL's WARN
OFI_GETINFO = ("[2025-10-16 22:16:08] ip-172-31-3-90:1929:1937 [0] nccl_net_ofi_rdma_init:7978 "
               "NCCL WARN NET/OFI OFI fi_getinfo() call failed: No data available")
OFI_NO_PROVIDER = ("ip-172-31-9-96:26565:26565 [0] get_ofi_provider:312 NCCL WARN NET/OFI Could "
                   "not find any optimal provider")


def test_the_net_plugin_s_warning_that_quotes_an_error_is_its_failure(tmp_path):
    """The plugin's own formats (generated from its source) say who printed the line; the
    errno text it quotes says a call failed: a net-plugin failure, with no signature."""
    found = _explain(tmp_path, OFI_GETINFO + "\n", _without("ofi.no_provider"))
    assert found.root is not None and found.root.signature.id == "component.net_plugin"
    assert found.root.first.facts["table"] == "net_plugin_formats"
    assert found.root.first.facts["component"] == "aws-ofi-nccl"


def test_the_net_plugin_s_warning_that_quotes_no_error_stays_context(tmp_path):
    """NCCL falls back to its socket transport when the plugin finds no provider: alone, that
    warning is no failure (a root cause needs one)."""
    found = _explain(tmp_path, OFI_NO_PROVIDER + "\n", _without("ofi.no_provider"))
    assert found.root is None
