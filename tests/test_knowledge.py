"""The knowledge tables: complete and categorised, in agreement with the software they were read
from where that software is here, reproduced byte for byte by their generators where the
sources are at hand, and looked up correctly on real lines of the corpus."""

from __future__ import annotations

import ctypes
import json
import errno
import ctypes.util
import os
import platform
import re
import sys
import sysconfig
from pathlib import Path

import pytest

from ncclcheck.catalogue import knowledge
from ncclcheck.catalogue.knowledge_index import TABLES, format_regex, table
from ncclcheck.model import CATEGORIES

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests" / "data" / "logs"
sys.path.insert(0, str(ROOT / "scripts" / "knowledge"))

import knowledge_common  # noqa: E402  (scripts/knowledge/ is put on sys.path above)
import knowledge_cuda  # noqa: E402
import knowledge_libc  # noqa: E402
import knowledge_lightning  # noqa: E402
import knowledge_ncclresult  # noqa: E402
import knowledge_torch  # noqa: E402

HEADER = ("table", "component", "origin", "version", "generated_by", "rule", "entries")
COMPONENTS = {"nccl", "glibc", "cuda", "torch", "gloo", "ibverbs", "lightning", "aws-ofi-nccl"}
SITE = Path(sysconfig.get_paths()["purelib"])


# -- every table: complete, categorised, says where it comes from ------------------------------
@pytest.mark.parametrize("name", TABLES)
def test_every_table_says_what_it_read_and_every_entry_has_a_category(name):
    data = table(name)
    assert all(data.get(key) for key in HEADER), [k for k in HEADER if not data.get(k)]
    assert data["table"] == name and data["generated_by"].startswith(knowledge_common.SCRIPT)
    assert data["component"] in COMPONENTS
    bad = [e for e in data["entries"] if e["category"] not in CATEGORIES]
    assert not bad, bad[:3]
    assert "/work" not in knowledge_common.path_of(name).read_text("utf-8")


def test_the_nccl_formats_come_from_at_least_three_releases_and_every_file_has_a_category():
    data = table("nccl_formats")
    releases = {r for e in data["entries"] for r in e["releases"]}
    assert len(releases) >= 3 and releases == set(data["version"].split(", "))
    assert {e["level"] for e in data["entries"]} == {"WARN", "INFO"}
    assert {e["file"] for e in data["entries"]} <= set(data["files"])
    assert set(data["files"].values()) <= set(CATEGORIES)
    assert set(data["line_shapes"]) == releases


def test_the_net_plugin_s_formats_come_from_at_least_three_releases():
    """aws-ofi-nccl's own messages, as its macros print them ("NET/OFI " first), each filed
    under the net plugin whatever it says."""
    data = table("net_plugin_formats")
    releases = {r for e in data["entries"] for r in e["releases"]}
    assert len(releases) >= 3 and releases == set(data["version"].split(", "))
    assert {e["level"] for e in data["entries"]} == {"WARN", "INFO"}
    assert all(e["format"].startswith("NET/OFI ") for e in data["entries"])
    assert {e["category"] for e in data["entries"]} == {"net_plugin"}


def test_named_tables_are_whole_enumerations():
    numbers = {name: [e["number"] for e in table(name)["entries"]] for name in
               ("errno", "eai", "nccl_result")}
    assert numbers["nccl_result"] == list(range(len(numbers["nccl_result"])))
    assert {e["name"] for e in table("errno")["entries"]} == \
        {n for n in dir(errno) if n.startswith("E") and n.isupper()}
    wc = [e["number"] for e in table("ibverbs")["entries"] if e["kind"] == "wc_status"]
    assert wc == list(range(len(wc)))


def test_the_mapping_rules_hold_on_the_entries_they_name():
    cat = {e["name"]: e["category"] for n in ("errno", "eai", "cuda", "nccl_result", "ibverbs")
           for e in table(n)["entries"]}
    assert cat["ECONNREFUSED"] == cat["ETIMEDOUT"] == cat["EHOSTUNREACH"] == "connection"
    assert (cat["EADDRINUSE"], cat["ENOMEM"], cat["EINVAL"]) == ("port_in_use", "out_of_memory",
                                                                  "other")
    assert cat["EAI_NONAME"] == cat["EAI_AGAIN"] == "name_resolution"
    assert cat["cudaErrorMemoryAllocation"] == cat["CUDA_ERROR_OUT_OF_MEMORY"] == "out_of_memory"
    assert cat["cudaErrorPeerAccessUnsupported"] == "p2p" and cat["cudaErrorIllegalAddress"] == "cuda"
    assert cat["IBV_WC_RETRY_EXC_ERR"] == "infiniband" and cat["ncclTimeout"] == "timeout"


# -- the tables agree with the live software ----------------------------------------------------
@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="errno texts are glibc's")
def test_errno_texts_are_the_c_library_s():
    for e in table("errno")["entries"]:
        assert os.strerror(e["number"]) == e["text"], e


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="gai_strerror texts are glibc's")
def test_eai_texts_are_gai_strerror_s():
    for e in table("eai")["entries"]:
        assert knowledge_libc.gai_strerror(e["number"]) == e["text"], e


def _nccl_wheel():
    try:
        return knowledge_ncclresult.wheel_folder()
    except FileNotFoundError as missing:
        pytest.skip(str(missing))


def test_nccl_result_texts_are_the_wheel_s_ncclGetErrorString():
    lib = knowledge_ncclresult.library(_nccl_wheel())
    for e in table("nccl_result")["entries"]:
        assert lib.ncclGetErrorString(e["number"]).decode() == e["text"], e
    after = len(table("nccl_result")["entries"])
    assert lib.ncclGetErrorString(after).decode() == "unknown result code", \
        "the wheel knows a result the table lacks: regenerate nccl_result"


def _cudart():
    try:
        return knowledge_cuda.cudart(knowledge_cuda.cuda_home())
    except (FileNotFoundError, OSError) as missing:
        pytest.skip(f"no CUDA toolkit here: {missing}")


def test_cuda_runtime_texts_are_libcudart_s():
    lib = _cudart()
    runtime = [e for e in table("cuda")["entries"] if e["api"] == "runtime"]
    for e in runtime:
        assert lib.cudaGetErrorString(e["number"]).decode() == e["text"], e


@pytest.mark.skipif(not ctypes.util.find_library("ibverbs"), reason="libibverbs.so.1 not installed")
def test_ibverbs_texts_are_libibverbs_s():
    lib = ctypes.CDLL(ctypes.util.find_library("ibverbs"))
    for fn in ("ibv_wc_status_str", "ibv_event_type_str"):
        getattr(lib, fn).restype = ctypes.c_char_p
    for e in table("ibverbs")["entries"]:
        fn = "ibv_wc_status_str" if e["kind"] == "wc_status" else "ibv_event_type_str"
        assert getattr(lib, fn)(e["number"]).decode() == e["text"], e


# -- the generators reproduce the committed tables ----------------------------------------------
def _same_or_skip(data: dict, name: str, because: str) -> None:
    if data["version"] != table(name)["version"]:
        pytest.skip(f"{name}: {because} here is {data['version']}, the table's is "
                    f"{table(name)['version']}")
    assert knowledge_common.render(data) == knowledge_common.path_of(name).read_text("utf-8")


@pytest.mark.parametrize("name", ["errno", "eai"])
def test_the_libc_tables_regenerate_byte_for_byte(name):
    build = {"errno": knowledge_libc.errno_table, "eai": knowledge_libc.eai_table}[name]
    _same_or_skip(build(), name, "the C library and Python")


def test_the_cuda_and_nccl_result_tables_regenerate_byte_for_byte():
    _nccl_wheel()
    _same_or_skip(knowledge_ncclresult.nccl_result_table(), "nccl_result", "the nccl wheel")
    _cudart()
    _same_or_skip(knowledge_cuda.cuda_table(), "cuda", "the CUDA toolkit")


def _one_release(name: str, version: str) -> list[dict]:
    return [dict(e, releases=[version]) for e in table(name)["entries"] if version in e["releases"]]


@pytest.mark.parametrize("name, build, version", [
    ("torch", knowledge_torch.torch_table, knowledge_torch.torch_version),
    ("lightning", knowledge_lightning.lightning_table, knowledge_lightning.lightning_version)])
def test_the_installed_release_s_messages_regenerate_exactly(name, build, version):
    """The old release's wheel is not kept here: the installed release's share of the table
    is what its generator must give again."""
    try:
        here = version(SITE)
    except (FileNotFoundError, StopIteration, TypeError):
        pytest.skip(f"{name} is not installed")
    if here not in table(name)["version"].split(", "):
        pytest.skip(f"installed {name} {here} is not a release the table read")
    assert build([SITE])["entries"] == _one_release(name, here)


@pytest.mark.parametrize("name", ["nccl_formats", "ibverbs", "net_plugin_formats"])
def test_the_repository_tables_regenerate_byte_for_byte(name):
    """Needs the fetched NVIDIA/nccl, linux-rdma/rdma-core or aws/aws-ofi-nccl git directory,
    named by NCCLCHECK_NCCL_GIT_DIR / NCCLCHECK_RDMA_CORE_GIT_DIR / NCCLCHECK_OFI_GIT_DIR; the
    structure is tested above."""
    import make_knowledge  # deferred: only where the repository is at hand
    variable = {"nccl_formats": "NCCLCHECK_NCCL_GIT_DIR",
                "ibverbs": "NCCLCHECK_RDMA_CORE_GIT_DIR",
                "net_plugin_formats": "NCCLCHECK_OFI_GIT_DIR"}[name]
    if not os.environ.get(variable):
        pytest.skip(f"{variable} is not set: the repository {name} is read from is not here")
    option = {"nccl_formats": "--nccl", "ibverbs": "--rdma-core",
              "net_plugin_formats": "--ofi"}[name]
    assert make_knowledge.main([name, option, os.environ[variable], "--check"]) == 0


# -- formats as regular expressions -------------------------------------------------------------
@pytest.mark.parametrize("fmt, printed", [
    ("NET/IB : Got completion from peer %s with status=%d opcode=%d len=%u vendor err %u (%s)",
     "NET/IB : Got completion from peer 10.0.0.2<36753> with status=12 opcode=0 len=0 vendor err "
     "129 (Recv)"),
    ("socketStartConnect: Connect to %s failed : %s", "socketStartConnect: Connect to "
     "10.0.0.1<34567> failed : Connection refused"),
    ("%s:%d -> %d", "init.cc:1234 -> 2"),
    ("Cuda failure %d '%s'", "Cuda failure 2 'out of memory'"),
    ("busId %lx commId 0x%llx 100%% %5.2f %p", "busId 1b000 commId 0xab12 100% 12.50 0x7f00"),
])
def test_a_format_s_regex_matches_what_it_prints_and_not_other_words(fmt, printed):
    assert re.match(format_regex(fmt), printed)
    if not fmt.startswith("%"):
        assert not re.match(format_regex(fmt), "something else " + printed)


# -- lookups on real lines of the corpus --------------------------------------------------------
def _line(path: str, contains: str) -> str:
    return next(ln for ln in (LOGS / path).read_text("utf-8", "replace").splitlines()
                if contains in ln)


@pytest.mark.parametrize("path, contains, table_name, component, category, how", [
    # NCCL before 2.18 wrote "with error 12, opcode 1": no format of the releases read, the
    # printed file and the status number still say what failed
    ("world/dev/c13-011-k8s-ib-error12-nic-connection.log", "net_ib.cc", "nccl_formats", "nccl",
     "infiniband", "file"),
    ("world/dev/c13-011-k8s-ib-error12-nic-connection.log", "net_ib.cc", "ibverbs", "ibverbs",
     "infiniband", "number"),
    ("world/dev/c24-003-cuda-802-system-not-yet-initialized-fabricmanager.log", "cudaError",
     "cuda", "cuda", "cuda", "name"),
    ("world/dev/c14-023-wekws-second-torchrun-task-port-29400.log", "errno: 98", "errno",
     "glibc", "port_in_use", "number"),
    ("world/dev/c5-032-bunya-slurm-short-hostname-resolves-admin-net-no-route.log", "errno: 113",
     "errno", "glibc", "connection", "number"),
    ("world/dev/c1-015-gloo-ioexception-connect-127-0-1-1-refused.log", "Connection refused",
     "errno", "glibc", "connection", "text"),
    ("world/dev/c6-002-xgboost-docker-mgpu-posix-fallocate-shm.log", "posix_fallocate",
     "errno", "glibc", "shared_memory", "text"),
    # a checks.h macro's format, printed with include/shm.h: the file decides
    ("world/dev/c6-002-xgboost-docker-mgpu-posix-fallocate-shm.log", "posix_fallocate",
     "nccl_formats", "nccl", "shared_memory", "format"),
    ("world/dev/c6-016-torch12-shm-open-permission-denied-dev-shm.log", "shm_open",
     "nccl_formats", "nccl", "shared_memory", "file"),
    ("world/dev/c8-013-deepspeed-docker-hostfile-node0-unresolvable.log", "Name or service",
     "eai", "glibc", "name_resolution", "text"),
    ("world/dev/c5-032-bunya-slurm-short-hostname-resolves-admin-net-no-route.log",
     "failed to connect to any network address", "torch", "torch", "connection", "text"),
    ("world/dev/c6-005-yolox-docker-barrier-unhandled-system-error-ipc-host.log",
     "unhandled system error", "nccl_result", "nccl", "other", "text"),
    ("world/dev/c4-008-nccl278-ibv-modify-qp-no-such-device-exclude-hca.log", "net_ib.cc:395 ->",
     "nccl_result", "nccl", "other", "number"),
    ("world/dev/c4-008-nccl278-ibv-modify-qp-no-such-device-exclude-hca.log", "net_ib.cc:395 ->",
     "nccl_formats", "nccl", "infiniband", "file"),
    ("world/dev/c12-002-graphnet-lightning-ddp-interactive.log", "MisconfigurationException",
     "lightning", "lightning", "configuration", "text"),
    # the AWS OFI net plugin prints its function, not its file: its own formats place it
    ("world/dev/c3-009-aws-ofi-nccl-container-missing-dev-infiniband.log", "fi_getinfo",
     "net_plugin_formats", "aws-ofi-nccl", "net_plugin", "format"),
    ("world/dev/c4-022-nccl246-efa-ofi-no-optimal-provider-socket-fallback.log",
     "optimal provider", "net_plugin_formats", "aws-ofi-nccl", "net_plugin", "format"),
    ("world/dev/c12-008-dofa-lightning-requested-gpu-cuda-visible-devices.log", "requested gpu",
     "lightning", "lightning", "rank_mismatch", "text"),
])
def test_a_real_line_gets_the_table_component_and_category(path, contains, table_name,
                                                           component, category, how):
    hits = knowledge.lookup(_line(path, contains))
    assert any(h.table == table_name and h.component == component and h.category == category
               and h.how == how for h in hits), [h.to_dict() for h in hits]


def test_a_warn_line_s_own_file_decides_before_its_words():
    line = _line("world/dev/c13-011-k8s-ib-error12-nic-connection.log", "net_ib.cc")
    top = knowledge.best(line)
    assert (top.how, top.file, top.level) == ("number", "transport/net_ib.cc", "WARN")
    assert top.entry["name"] == "IBV_WC_RETRY_EXC_ERR"


def test_an_nccl_line_of_an_unknown_release_is_placed_by_its_file_and_tag():
    line = ("gpu7:1:2 [3] transport/net_ib/brand_new.cc:42 (ncclIbNew) NCCL WARN NET/IB : "
            "something no release here printed")
    hits = {h.how: h for h in knowledge.lookup(line)}
    assert hits["file"].category == hits["tag"].category == "infiniband"
    assert knowledge.parse_nccl(line).function == "ncclIbNew"


@pytest.mark.parametrize("line", [
    "Epoch 3: 100%|##########| 938/938 [00:12<00:00, 75.1it/s, loss=0.213, v_num=0]",
    "INFO:root:all good, nothing failed here",
    "",
])
def test_an_ordinary_line_gets_nothing(line):
    assert knowledge.lookup(line) == []


# -- the anchors, chosen when the tables change (knowledge_index.json) -------------------------
def test_the_committed_anchors_are_the_ones_the_tables_give():
    from ncclcheck.catalogue.knowledge_index import COMPILED_INDEX, compiled_anchors
    committed = json.loads((ROOT / "ncclcheck" / "catalogue" / COMPILED_INDEX).read_text("utf-8"))
    assert committed == json.loads(json.dumps(compiled_anchors())), \
        f"{COMPILED_INDEX} is stale: run `python scripts/compile_catalogue.py` and commit it"


def test_stale_anchors_are_chosen_again_from_the_tables(monkeypatch):
    from ncclcheck.catalogue import knowledge_index
    committed = dict(knowledge_index._anchors())
    assert committed["digest"] == knowledge_index.tables_digest()
    monkeypatch.setattr(knowledge_index, "tables_digest", lambda: "a table edited since")
    chosen = knowledge_index._anchors()
    assert "digest" not in chosen
    assert json.loads(json.dumps(chosen)) == {k: committed[k] for k in chosen}


def test_a_lookup_makes_only_the_candidates_of_its_line_s_anchors():
    """No entry is made a candidate at start; a line makes those its words anchor."""
    from ncclcheck.catalogue import knowledge_index
    idx = knowledge_index.index.__wrapped__()
    assert idx.made == 0 and len(idx.entries) > 2000
    line = "ConnectionRefusedError: [Errno 111] Connection refused"
    words = knowledge_index.WORD.findall(line.lower())
    hits = knowledge._candidates(words, idx)
    assert any(c.key == "Connection refused" for c in hits)
    assert 0 < idx.made == len(hits) < 20
