"""Naming a cause from the log's context when NCCL gave only a generic error.

Every fixture here is written for the test (not copied from a real log): a context line (an
NCCL setting, a launch command, an INFO line) and one of NCCL's generic errors.
"""

from __future__ import annotations

import pytest

from ncclcheck.catalogue import load
from ncclcheck.explain.engine import explain
from ncclcheck.report import render as render_document
from ncclcheck.report.formats import EXPLANATION
from ncclcheck.explain.hangs import HANG_RULES
from ncclcheck.explain.readers.throughput import RULE as THROUGHPUT_FELL
from ncclcheck.explain.readers.watchdog_lag import RULE as WATCHDOG_LAG
from ncclcheck.explain.signals import SIGNAL_RULES
from ncclcheck.hang.facts import RULES as SNAPSHOT_RULES

CATALOGUE = load()

GENERIC = [
    "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version 2.18.5",
    "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, internal error - please report this issue to the NCCL developers, NCCL version 2.19.3",
    "node1:3301:3350 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer; remote process exited or there was a network error",
    "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.",
]
INTERNAL_ERROR = "ncclInternalError: Internal check failed."
# For each inferred signature: the context lines that support it (written, see module doc).
CONTEXT = {
    "nccl.versions_differ": ["node1:11:11 [0] NCCL INFO NCCL version 2.18.5+cuda12.1",
                             "node2:12:12 [0] NCCL INFO NCCL version 2.21.5+cuda12.4"],
    "nccl.ifname_virtual": ["mpirun -np 16 -x NCCL_SOCKET_IFNAME=lo -x NCCL_DEBUG=INFO ./train"],
    "nccl.bootstrap_virtual_interface": ["node1:11:11 [0] NCCL INFO Bootstrap : Using docker0:172.17.0.1<0>"],
    "nccl.container_bridge_address": ["node1:11:11 [0] NCCL INFO Bootstrap : Using eth0:172.17.0.3<0>"],
    "nccl.graph_file_set": ["node1:11:11 [0] NCCL INFO NCCL_TOPO_FILE set by environment to /etc/topo.xml"],
    "nccl.ofi_plugin_in_use": ["node1:11:11 [0] NCCL INFO NET/OFI Using aws-ofi-nccl 1.7.4"],
    "nccl.ifname_set": ["export NCCL_SOCKET_IFNAME=ens9f0"],
    "launcher.node_rank_out_of_range": ["torchrun --node_rank=3 --nnodes=2 --nproc-per-node=4 train.py"],
    "nccl.nvls_setup_failed": ["node2:2431:2475 [1] NCCL INFO transport/nvls.cc:330 -> 1"],
}
# Inferred signatures that explain a specific failure (``explains``), not a generic NCCL error:
# (context line, the failure it explains, a context line that must not explain it).
EXPLAINED = {
    "torch.store_name_unreachable": (
        "[W socket.cpp:558] [c10d] The client socket has failed to connect to [gpu-head]:29500 "
        "(errno: 113 - No route to host).",
        "[E socket.cpp:610] [c10d] The client socket has failed to connect to any network "
        "address of (10.1.2.3, 29500).",
        "[W socket.cpp:558] [c10d] The client socket has failed to connect to [gpu-head]:29500 "
        "(errno: 111 - Connection refused)."),
    "torch.socket_family_unsupported": (
        "[W socket.cpp:558] [c10d] The client socket cannot be initialized to connect to "
        "[localhost]:29500 (errno: 97 - Address family not supported by protocol).",
        "[E socket.cpp:610] [c10d] The client socket has failed to connect to any network "
        "address of (localhost, 29500).",
        "[W socket.cpp:558] [c10d] The client socket has failed to connect to [gpu-head]:29500 "
        "(errno: 111 - Connection refused)."),
    "slurm.task_sees_one_gpu": (
        "#SBATCH --gpus-per-task=1",
        "RuntimeError: CUDA error: invalid device ordinal",
        "#SBATCH --gpus-per-node=8"),
    "launcher.nproc_exceeds_visible_gpus": (
        "CUDA_VISIBLE_DEVICES=0,1 torchrun --nnodes=1 --nproc_per_node=4 train.py",
        "RuntimeError: CUDA error: invalid device ordinal",
        "CUDA_VISIBLE_DEVICES=0,1,2,3 torchrun --nnodes=1 --nproc_per_node=4 train.py"),
    "torch.expandable_segments_ipc": (
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
        "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:455 'invalid argument'",
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False"),
}


def _explain(tmp_path, lines: list[str], fmt: str | None = None):
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    result = explain([str(log)])
    return render_document(EXPLANATION, result.to_dict(), fmt) if fmt else result.to_dict()["findings"]


def test_inferred_signatures_are_kept_out_of_line_matching():
    inferred = {s.id for s in CATALOGUE.inferred_signatures}
    assert inferred == set(CONTEXT) | set(EXPLAINED) | {"lightning.duplicate_global_rank",
                                                        "nccl.system_error_one_host",
                                                        "nccl.invalid_usage_shared_gpu",
                                                        "nvidia.smi_gpu_shared",
                                                        "nccl.peers_same_address",
                                                        "slurm.tasks_exceed_gpus",
                                                        "nccl.networks_differ",
                                                        "nccl.ib_on_some_nodes",
                                                        "nccltests.ranks_alone",
                                                        "nccl.ib_without_verbs",
                                                        "lightning.local_ranks_repeat",
                                                        *(CATALOGUE.by_rule(rule).id
                                                          for rule in SIGNAL_RULES),
                                                        *(CATALOGUE.by_rule(rule).id
                                                          for rule in HANG_RULES.values()),
                                                        CATALOGUE.by_rule(WATCHDOG_LAG).id,
                                                        CATALOGUE.by_rule(THROUGHPUT_FELL).id,
                                                        *(CATALOGUE.by_rule(rule).id
                                                          for rule in SNAPSHOT_RULES.values())}
    assert {s.id for s in CATALOGUE.inferred_signatures
            if s.explains and "generic" not in s.explains and not s.rule} == set(EXPLAINED)
    assert not inferred & {s.id for s in CATALOGUE.line_signatures}
    for sig in CATALOGUE.inferred_signatures:
        assert "(inferred)" in sig.title and sig.example


# Context lines that are NCCL's error trace ("file.cc:330 -> 1"): a failure of their own.
TRACES = {"nccl.nvls_setup_failed"}


@pytest.mark.parametrize("sig_id", sorted(set(CONTEXT) - TRACES))
@pytest.mark.parametrize("generic", GENERIC, ids=lambda g: g[:24])
def test_a_generic_error_is_explained_by_its_context(tmp_path, sig_id, generic):
    lines = CONTEXT[sig_id] + ["epoch 0 step 10", generic]
    findings = _explain(tmp_path, lines)
    root = findings[0]
    assert root["id"] == sig_id and root["root_cause"], [f["id"] for f in findings]
    assert root["category"] == CATALOGUE.signature(sig_id).category.value
    assert root["line"] == len(lines)  # where it failed: the generic error's line
    source = root["inferred_from"]
    assert source["line"] == len(CONTEXT[sig_id]) and source["text"] == CONTEXT[sig_id][-1]
    assert "{" not in root["explanation"] + root["fix"]
    assert root["explanation"].startswith("NCCL reported only a generic error")
    assert any(f["id"] != sig_id and not f["root_cause"] for f in findings)


@pytest.mark.parametrize("sig_id", sorted(set(CONTEXT) - TRACES))
def test_context_alone_is_not_a_finding(tmp_path, sig_id):
    assert _explain(tmp_path, CONTEXT[sig_id] + ["epoch 0 step 10 loss 0.1"]) == []


@pytest.mark.parametrize("sig_id", sorted(TRACES))
def test_an_error_trace_alone_is_a_failure_its_place_explains(tmp_path, sig_id):
    findings = _explain(tmp_path, CONTEXT[sig_id] + ["epoch 0 step 10 loss 0.1"])
    root = findings[0]
    assert root["id"] == sig_id and root["inferred_from"]["line"] == 1
    assert [f["id"] for f in findings[1:]] == ["nccl.error_trace"]


def test_an_error_trace_without_a_warning_is_a_generic_failure(tmp_path):
    """NCCL's trace lines (an error travelling up its calls) with no WARN line: a generic
    failure that the context explains; the trace alone names no cause."""
    trace = ["node1:16674:17023 [0] NCCL INFO graph/search.cc:733 -> 2",
             "node1:16674:17023 [0] NCCL INFO graph/search.cc:740 -> 2"]
    root = _explain(tmp_path, trace)[0]
    assert root["id"] == "nccl.error_trace" and root["facts"]["code"] == 2
    graph = ["node1:16674:17023 [0] NCCL INFO NCCL_GRAPH_FILE set by environment to /opt/graph.xml"]
    assert _explain(tmp_path, graph + trace)[0]["id"] == "nccl.graph_file_set"
    # a ring's arrows and a tree's are not traces
    healthy = ["node1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
               "node1:1:1 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1"]
    assert _explain(tmp_path, healthy) == []


def test_a_specific_error_is_not_replaced_by_an_inference(tmp_path):
    lines = CONTEXT["nccl.ifname_virtual"] + [
        "node2:2251:2251 [2] init.cc:1872 NCCL WARN Invalid rank requested : 6/4", GENERIC[0]]
    root = _explain(tmp_path, lines)[0]
    assert root["id"] == "nccl.invalid_rank" and root["inferred_from"] is None


def test_harmless_context_values_infer_nothing(tmp_path):
    same_version = ["node1:11:11 [0] NCCL INFO NCCL version 2.18.5+cuda12.1",
                    "node2:12:12 [0] NCCL INFO NCCL version 2.18.5+cuda12.1"]
    excluded = ["node1:11:11 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ^lo,docker"]
    good_launch = ["torchrun --nnodes=2 --node_rank=1 train.py"]
    for context in (same_version, excluded, good_launch):
        root = _explain(tmp_path, context + [INTERNAL_ERROR])[0]
        assert root["id"] == "nccl.internal_error", (context, root["id"])


def test_the_most_telling_fact_wins(tmp_path):
    lines = (CONTEXT["nccl.ifname_set"] + CONTEXT["nccl.versions_differ"]
             + CONTEXT["nccl.ofi_plugin_in_use"] + [GENERIC[1]])
    assert _explain(tmp_path, lines)[0]["id"] == "nccl.versions_differ"


def test_table_and_markdown_say_where_the_cause_was_inferred_from(tmp_path):
    lines = CONTEXT["nccl.graph_file_set"] + [GENERIC[0]]
    for fmt in ("table", "markdown"):
        text = _explain(tmp_path, lines, fmt)
        assert "inferred from line 1 of" in text and "NCCL_TOPO_FILE" in text


def test_secrets_on_a_context_line_are_masked(tmp_path):
    lines = ["HF_TOKEN=hf_abcdef123456 NCCL_SOCKET_IFNAME=lo torchrun --nnodes=2 train.py",
             GENERIC[0]]
    findings = _explain(tmp_path, lines)
    assert findings[0]["id"] == "nccl.ifname_virtual"
    assert "hf_abcdef123456" not in str(findings) and "***" in findings[0]["inferred_from"]["text"]


def test_the_same_global_rank_announced_twice_is_a_rank_mismatch(tmp_path):
    banners = [f"initializing ddp: GLOBAL_RANK: {r}, MEMBER: {r + 1}/8" for r in (0, 1, 2, 3)]
    findings = _explain(tmp_path, ["GPU available: True"] + banners + banners)
    root = findings[0]
    assert root["id"] == "lightning.duplicate_global_rank" and root["category"] == "rank_mismatch"
    assert root["inferred_from"]["line"] == root["line"] == 6
    assert root["facts"]["rank"] == 0 and root["facts"]["world_size"] == 8


def test_a_restarted_job_announcing_every_rank_again_is_clean(tmp_path):
    banners = [f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/4" for r in range(4)]
    assert _explain(tmp_path, banners + ["restarting"] + banners) == []


@pytest.mark.parametrize("sig_id", sorted(EXPLAINED))
def test_a_specific_failure_is_explained_by_its_context(tmp_path, sig_id):
    context, failure, _ = EXPLAINED[sig_id]
    findings = _explain(tmp_path, [context, "epoch 0 step 10", failure])
    root = findings[0]
    assert root["id"] == sig_id and root["line"] == 3, [f["id"] for f in findings]
    assert root["inferred_from"]["line"] == 1
    assert "{" not in root["explanation"] + root["fix"]
    assert findings[1]["id"] in CATALOGUE.signature(sig_id).explains


@pytest.mark.parametrize("sig_id", sorted(EXPLAINED))
def test_a_context_that_does_not_fit_explains_nothing(tmp_path, sig_id):
    _, failure, harmless = EXPLAINED[sig_id]
    findings = _explain(tmp_path, [harmless, failure])
    assert findings[0]["id"] in CATALOGUE.signature(sig_id).explains
    assert all(f["id"] != sig_id for f in findings)
    assert _explain(tmp_path, [EXPLAINED[sig_id][0], "epoch 0 step 10 loss 0.1"]) == []


def test_a_generic_error_is_not_explained_by_a_signature_for_a_specific_failure(tmp_path):
    context = EXPLAINED["launcher.nproc_exceeds_visible_gpus"][0]
    root = _explain(tmp_path, [context, GENERIC[0]])[0]
    assert root["id"] != "launcher.nproc_exceeds_visible_gpus"


# A connection NCCL could not make (to a routable address: the interface is named elsewhere).
CONNECT_FAILED = ("node2:4410:4460 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
                  "10.0.0.2<48425> failed : Connection refused")


@pytest.mark.parametrize("sig_id", ["nccl.ifname_virtual", "nccl.bootstrap_virtual_interface"])
def test_a_failed_connection_is_explained_by_a_virtual_interface(tmp_path, sig_id):
    findings = _explain(tmp_path, CONTEXT[sig_id] + ["epoch 0 step 10", CONNECT_FAILED])
    root = findings[0]
    assert root["id"] == sig_id and root["category"] == "interface", [f["id"] for f in findings]
    assert root["inferred_from"]["text"] == CONTEXT[sig_id][-1]
    assert findings[1]["id"] == "nccl.connect_failed"


def test_a_failed_connection_on_a_real_interface_stays_a_connection_failure(tmp_path):
    lines = ["node1:11:11 [0] NCCL INFO Bootstrap : Using ens5:10.0.0.1<0>", CONNECT_FAILED]
    root = _explain(tmp_path, lines)[0]
    assert root["id"] == "nccl.connect_failed" and root["category"] == "connection"


def test_every_explained_failure_names_a_signature():
    known = set(CATALOGUE.by_id)
    for sig in CATALOGUE.inferred_signatures:
        assert set(sig.explains) - {"generic"} <= known, sig.id


SYSTEM_ERROR = GENERIC[0]


def test_a_system_error_on_one_node_points_at_shared_memory(tmp_path):
    lines = ["node1:11:11 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct",
             "node1:12:12 [1] NCCL INFO Channel 00 : 1[1] -> 0[0] via SHM/direct/direct",
             SYSTEM_ERROR]
    root = _explain(tmp_path, lines)[0]
    assert root["id"] == "nccl.system_error_one_host" and root["category"] == "shared_memory"
    assert root["line"] == 3 and root["inferred_from"]["line"] == 3


@pytest.mark.parametrize("across_nodes", [
    ["node1:11:11 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
     "node2:12:12 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>"],
    ["node1:11:11 [0] NCCL INFO Channel 00 : 3[3] -> 4[0] [send] via NET/Socket/0"],
    ["torchrun --nnodes=2 --node_rank=0 --nproc-per-node=4 train.py"],
], ids=["two hosts", "network transport", "launch across nodes"])
def test_a_system_error_across_nodes_is_not_put_on_shared_memory(tmp_path, across_nodes):
    root = _explain(tmp_path, across_nodes + [SYSTEM_ERROR])[0]
    assert root["id"] == "nccl.unhandled_system_error", root["id"]


def test_an_internal_error_on_one_node_is_not_put_on_shared_memory(tmp_path):
    root = _explain(tmp_path, [INTERNAL_ERROR])[0]
    assert root["id"] == "nccl.internal_error"


WATCHDOG = ("[rank3]:[E906 12:16:32.61 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, "
            "NumelOut=1, Timeout(ms)=600000) ran for 600083 milliseconds before timing out.")


@pytest.mark.parametrize("request_lines", [
    ["#SBATCH --nodes=1", "#SBATCH --gres=gpu:6", "#SBATCH --ntasks-per-node=96"],
    ["srun -N2 --ntasks-per-node=8 --gpus-per-node=a100:4 python train.py"],
], ids=["sbatch", "srun"])
def test_more_slurm_tasks_than_gpus_explains_a_hang(tmp_path, request_lines):
    findings = _explain(tmp_path, request_lines + ["Initializing distributed: GLOBAL_RANK: 0, "
                                                   "MEMBER: 1/96", WATCHDOG])
    root = findings[0]
    assert root["id"] == "slurm.tasks_exceed_gpus" and root["category"] == "rank_mismatch"
    assert "--ntasks-per-node" in root["inferred_from"]["text"]
    assert "{" not in root["explanation"] + root["fix"]


@pytest.mark.parametrize("request_lines", [
    ["#SBATCH --gres=gpu:8", "#SBATCH --ntasks-per-node=8"],
    ["#SBATCH --gres=gpu:8", "#SBATCH --ntasks-per-node=1", "srun torchrun --nproc-per-node=8 t.py"],
], ids=["one task per GPU", "torchrun inside one task"])
def test_a_slurm_request_that_fits_its_gpus_explains_nothing(tmp_path, request_lines):
    assert _explain(tmp_path, request_lines + [WATCHDOG])[0]["id"] == "torch.watchdog_timeout"
    assert _explain(tmp_path, request_lines + ["epoch 1 loss 0.2"]) == []


def test_two_ranks_on_one_gpu_from_more_processes_than_gpus_is_a_rank_mismatch(tmp_path):
    launch = "CUDA_VISIBLE_DEVICES=0,1 torchrun --nnodes=1 --nproc_per_node=4 train.py"
    duplicate = ("node1:9104:9104 [0] init.cc:880 NCCL WARN Duplicate GPU detected : rank 2 and "
                 "rank 0 both on CUDA device 1b000")
    root = _explain(tmp_path, [launch, duplicate])[0]
    assert root["id"] == "launcher.nproc_exceeds_visible_gpus"
    assert root["category"] == "rank_mismatch"
    assert _explain(tmp_path, [duplicate])[0]["category"] == "duplicate_gpu"


def test_a_topology_nccl_could_not_describe_is_read_by_whether_a_file_was_forced(tmp_path):
    missing = "node1:2196:2275 [1] graph/xml.h:101 NCCL WARN Attribute busid of node nic not found"
    assert _explain(tmp_path, [missing])[0]["category"] == "version_mismatch"
    forced = "node1:2196:2196 [1] NCCL INFO NCCL_TOPO_FILE set by environment to /opt/topo.xml"
    root = _explain(tmp_path, [forced, missing])[0]
    assert root["id"] == "nccl.graph_file_set" and root["category"] == "configuration"


# Each node's choice of network, as NCCL 2.19+ and older versions print it.
PLUGIN_LOADED = ["node1:5:5 [0] NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin (v7)",
                 "node1:5:5 [0] NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so",
                 "node1:5:5 [0] NCCL INFO Successfully loaded external plugin libnccl-net.so"]
PLUGIN_ABSENT = ["node2:7:7 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
                 "node2:7:7 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation",
                 "node2:7:7 [0] NCCL INFO NET/Plugin : Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory"]


@pytest.mark.parametrize("absent", PLUGIN_ABSENT, ids=["2.19+", "2.4", "2.12"])
@pytest.mark.parametrize("loaded", PLUGIN_LOADED, ids=["loaded", "path", "external"])
def test_a_net_plugin_on_some_nodes_only_is_a_fault_even_without_an_error(tmp_path, loaded,
                                                                          absent):
    findings = _explain(tmp_path, [loaded, "node1:5:5 [0] NCCL INFO Init COMPLETE", absent])
    root = findings[0]
    assert root["id"] == "nccl.networks_differ" and root["category"] == "net_plugin"
    assert root["line"] == 3 and "line 1" in root["explanation"]
    assert "{" not in root["explanation"] + root["fix"]


def test_the_same_plugin_choice_on_every_node_is_no_fault(tmp_path):
    both_loaded = [PLUGIN_LOADED[0], PLUGIN_LOADED[0].replace("node1:5:5", "node2:7:7")]
    both_absent = [PLUGIN_ABSENT[0].replace("node2:7:7", "node1:5:5"), PLUGIN_ABSENT[0]]
    # one host reporting both (it found a plugin after a miss) is not two nodes differing
    one_host = [PLUGIN_ABSENT[0].replace("node2:7:7", "node1:5:5"), PLUGIN_LOADED[0]]
    for lines in (both_loaded, both_absent, one_host):
        assert _explain(tmp_path, lines) == [], lines


def test_infiniband_on_some_nodes_and_sockets_on_others(tmp_path):
    lines = ["node1:5:5 [0] NCCL INFO Using network IB",
             "node2:7:7 [0] NCCL INFO Using network Socket",
             "node1:5:5 [0] NCCL INFO comm 0x1 rank 0 nranks 2 - Init COMPLETE"]
    root = _explain(tmp_path, lines)[0]
    assert root["id"] == "nccl.ib_on_some_nodes" and root["category"] == "infiniband"
    assert root["facts"]["network1"] == "IB" and root["facts"]["network2"] == "Socket"
    same = ["node1:5:5 [0] NCCL INFO Using network IB", "node2:7:7 [0] NCCL INFO Using network IB"]
    assert _explain(tmp_path, same) == []
    plugin = ["node1:5:5 [0] NCCL INFO Using network AWS Libfabric",
              "node2:7:7 [0] NCCL INFO Using network Socket"]
    assert _explain(tmp_path, plugin)[0]["id"] == "nccl.networks_differ"


def _tests_rank(rank: int, pid: int, host: str) -> str:
    return f"#  Rank {rank:2d} Group  0 Pid {pid:6d} on {host:>10} device  0 [0x00] NVIDIA H100"


@pytest.mark.parametrize("lines", [
    [_tests_rank(0, 1320, "node1"), _tests_rank(0, 2066, "node2")],
    ["mpirun -np 2 ./build/all_reduce_perf -b 8 -e 1G", _tests_rank(0, 1320, "node1"),
     _tests_rank(0, 1321, "node1")],
    ["#   Rank  0 Pid   1320 on ip-172-31-20-228 device  0 [0x00] Tesla V100-SXM2-16GB",
     "#   Rank  0 Pid   2066 on ip-172-31-22-230 device  0 [0x00] Tesla V100-SXM2-16GB"],
], ids=["two hosts", "mpirun on one host", "older table"])
def test_nccl_tests_processes_that_each_ran_alone(tmp_path, lines):
    root = _explain(tmp_path, lines)[0]
    assert root["id"] == "nccltests.ranks_alone" and root["category"] == "rank_mismatch"
    assert root["line"] == len(lines) and "{" not in root["explanation"] + root["fix"]


@pytest.mark.parametrize("lines", [
    ["mpirun -np 2 ./build/all_reduce_perf", _tests_rank(0, 1320, "node1"),
     _tests_rank(1, 2066, "node2")],
    [_tests_rank(0, 1320, "node1"), _tests_rank(1, 1320, "node1"),  # one process, two GPUs,
     _tests_rank(0, 1400, "node1"), _tests_rank(1, 1400, "node1")],  # run twice
    ["mpirun -np 4 ./build/all_reduce_perf", _tests_rank(0, 10, "node1"), _tests_rank(1, 11, "node1"),
     _tests_rank(2, 12, "node2"), _tests_rank(3, 13, "node2")],
], ids=["one job", "one process run twice", "one job on two nodes"])
def test_nccl_tests_processes_of_one_job_are_no_fault(tmp_path, lines):
    assert _explain(tmp_path, lines) == []


def _lightning_ranks(local_ranks: list[int], devices: str = "0,1") -> list[str]:
    """Lightning's two start-up lines per process (written: these need GPUs to print)."""
    world = len(local_ranks)
    lines = []
    for rank, local in enumerate(local_ranks):
        lines += [f"LOCAL_RANK: {local} - CUDA_VISIBLE_DEVICES: [{devices}]",
                  f"Initializing distributed: GLOBAL_RANK: {rank}, MEMBER: {rank + 1}/{world}"]
    return lines


@pytest.mark.parametrize("nodes_line", ["#SBATCH --nodes=2", "#SBATCH -N 2",
                                        "trainer = Trainer(gpus=2, accelerator='ddp', num_nodes=2)",
                                        "torchrun --nnodes=2 --nproc-per-node=2 train.py"])
def test_processes_of_a_node_sharing_a_local_rank(tmp_path, nodes_line):
    lines = [nodes_line] + _lightning_ranks([0, 0, 0, 0])
    root = _explain(tmp_path, lines)[0]
    assert root["id"] == "lightning.local_ranks_repeat" and root["category"] == "rank_mismatch"
    assert root["line"] == 4  # the second process announcing local rank 0
    assert root["facts"]["per_node"] == 2 and root["facts"]["used"] == 1
    assert "{" not in root["explanation"] + root["fix"]


@pytest.mark.parametrize("lines", [
    ["#SBATCH --nodes=2"] + _lightning_ranks([0, 1, 0, 1]),
    ["#SBATCH --nodes=4"] + _lightning_ranks([0, 0, 0, 0]),  # one process per node
    _lightning_ranks([0, 0, 0, 0]),                          # the node count is not known
    ["torchrun --nnodes=1:2 --nproc-per-node=1 train.py"] + _lightning_ranks([0, 0]),  # elastic
    ["#SBATCH --nodes=2", "LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0,1]"]  # only rank 0 printed
    + [f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/4" for r in range(4)],
], ids=["two per node", "one per node", "nodes unknown", "elastic range", "one device line"])
def test_local_ranks_that_cover_each_node_are_no_fault(tmp_path, lines):
    assert _explain(tmp_path, lines) == []


VERBS_PROVIDER = ("libibverbs: Warning: no userspace device-specific driver found for "
                  "/sys/class/infiniband_verbs/uverbs0")


@pytest.mark.parametrize("generic", GENERIC + ["node1: Test NCCL failure common.cu:775 'internal error'"],
                         ids=lambda g: g[:24])
def test_a_generic_error_gives_way_to_a_specific_failure_in_the_same_log(tmp_path, generic):
    two_nodes = ["node1:11:11 [0] NCCL INFO Channel 00 : 3[3] -> 4[0] [send] via NET/Socket/0"]
    findings = _explain(tmp_path, two_nodes + [VERBS_PROVIDER, "epoch 0", generic])
    assert findings[0]["id"] == "rdma.verbs_provider_missing", [f["id"] for f in findings]
    assert findings[0]["category"] == "infiniband" and findings[0]["root_cause"]


def test_a_generic_error_keeps_its_place_before_an_unspecific_one(tmp_path):
    crashed = "  exitcode  : 1 (pid: 23018)"  # torchrun: a worker failed (rank_crashed)
    findings = _explain(tmp_path, [INTERNAL_ERROR, crashed])
    assert findings[0]["id"] == "nccl.internal_error", [f["id"] for f in findings]
    assert len(findings) == 2


VERBS_MISSING = "node1:11:11 [0] NCCL INFO Failed to open libibverbs.so[.1]"


def test_infiniband_reached_only_through_sockets_is_a_fault(tmp_path):
    lines = [VERBS_MISSING, "node1:11:11 [0] NCCL INFO NET/Socket : Using [0]ib0:192.168.10.1<0>"]
    root = _explain(tmp_path, lines)[0]
    assert root["id"] == "nccl.ib_without_verbs" and root["category"] == "infiniband"
    assert root["facts"]["ifname"] == "ib0" and "line 1" in root["explanation"]
    # no IB interface: a host without InfiniBand, where the missing library is harmless
    ethernet = [VERBS_MISSING, "node1:11:11 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>"]
    assert _explain(tmp_path, ethernet) == []
    with_verbs = ["node1:11:11 [0] NCCL INFO NET/Socket : Using [0]ib0:192.168.10.1<0>"]
    assert _explain(tmp_path, with_verbs) == []


def test_an_invalid_usage_nothing_explains_reads_as_ranks_sharing_a_gpu(tmp_path):
    """NCCL's init returns "invalid usage" for ranks on one GPU; its other reasons at init
    print lines of their own, which then decide (NCCL versions that differ between ranks)."""
    error = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
             "ProcessGroupNCCL.cpp:1970, invalid usage (run with NCCL_DEBUG=WARN for details), "
             "NCCL version 2.20.5")
    alone = _explain(tmp_path, [error])
    assert alone[0]["id"] == "nccl.invalid_usage_shared_gpu" and alone[0]["root_cause"]
    assert alone[0]["category"] == "duplicate_gpu"
    assert alone[0]["inferred_from"]["text"] == error
    versions = _explain(tmp_path, ["node1:11:11 [0] NCCL INFO NCCL version 2.20.5+cuda12.4",
                                   "node2:12:12 [0] NCCL INFO NCCL version 2.18.1+cuda12.1",
                                   error])
    assert versions[0]["category"] == "version_mismatch", versions[0]["id"]
    warned = _explain(tmp_path, ["node1:11:11 [0] init.cc:573 NCCL WARN Duplicate GPU detected : "
                                 "rank 0 and rank 1 both on CUDA device 1cb00000", error])
    assert warned[0]["id"] == "nccl.duplicate_gpu"


SMI_ROWS = ("|    0   N/A  N/A   2695172      C   python                          26167MiB |",
            "|    1   N/A  N/A   2695173      C   python                          25020MiB |",
            "|    0   N/A  N/A   2695173      C   python                            871MiB |")


def test_nvidia_smi_with_two_processes_of_one_program_on_a_gpu_is_a_device_mapping_fault(
        tmp_path):
    """A rank with a second context on GPU 0 (pid 2695173 on GPUs 1 and 0), as nvidia-smi
    prints its process table (driver 5xx columns; older drivers print no GI/CI ids)."""
    found = _explain(tmp_path, list(SMI_ROWS))
    assert found[0]["id"] == "nvidia.smi_gpu_shared" and found[0]["root_cause"]
    assert found[0]["facts"]["gpu"] == 0 and found[0]["facts"]["processes"] == 2
    old = [row.replace("   N/A  N/A", "") for row in SMI_ROWS]
    assert _explain(tmp_path, old)[0]["id"] == "nvidia.smi_gpu_shared"


def test_nvidia_smi_with_one_process_per_gpu_is_clean(tmp_path):
    healthy = list(SMI_ROWS[:2]) + [
        "|    2   N/A  N/A   2695180      G   /usr/lib/xorg/Xorg                  4MiB |",
        "|    2   N/A  N/A   2695181      G   /usr/bin/gnome-shell                4MiB |",
        "|    3   N/A  N/A   2695190      C   python                          24000MiB |",
        "|    3   N/A  N/A   2695191      C   /opt/other/inference_server      1200MiB |"]
    log = tmp_path / "smi.log"
    log.write_text("\n".join(healthy) + "\n")
    result = explain([str(log)]).to_dict()
    assert not [f for f in result["findings"] if f["category"]] and not result["hypotheses"]
