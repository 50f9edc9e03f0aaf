"""The explain library: prefixes, streaming, root-cause choice, grouping, NCCL summary."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

from ncclcheck.explain.engine import explain, literal_index
from ncclcheck.explain.lines import parse_line
from ncclcheck.explain.scan import Scanner

LOGS = Path(__file__).resolve().parent / "data" / "logs"


def _explain_text(tmp_path: Path, text: str, name: str = "job.log") -> dict:
    path = tmp_path / name
    path.write_text(text, "utf-8")
    return explain([str(path)]).to_dict()


def test_prefixes_are_peeled_in_any_nesting():
    info = parse_line("[rank5]:[E906 12:16:32.611181197 ProcessGroupNCCL.cpp:607] [Rank 5] "
                      "Watchdog caught collective operation timeout", 2026)
    assert info.rank == 5 and info.time.month == 9 and info.message.startswith("[Rank 5]")
    info = parse_line(" 3: node2:2251:2251 [2] init.cc:1872 NCCL WARN Invalid rank requested")
    assert (info.rank, info.host, info.pid) == (3, "node2", 2251)
    assert info.message.startswith("init.cc:1872 NCCL WARN")
    info = parse_line("[2026-06-11 11:44:19] vm:1:1 [0] bootstrap.cc:129 (bootstrapNetInit) "
                      "NCCL WARN Bootstrap : no socket interface found")
    assert info.time.isoformat() == "2026-06-11T11:44:19" and info.host == "vm"
    info = parse_line("[default3]:RuntimeError: CUDA error: invalid device ordinal")
    assert info.local_rank == 3 and info.message.startswith("RuntimeError")
    info = parse_line("E1202 16:51:00.420000 15551 torch/distributed/run.py:1002] failed", 2026)
    assert info.time.hour == 16 and info.message == "failed"


def test_earliest_primary_wins_when_all_have_timestamps(tmp_path):
    log = ("[2026-06-11 11:44:25] n1:1:1 [0] misc/ibvwrap.cc:186 NCCL WARN Call to ibv_modify_qp "
           "failed with 110 Connection timed out\n"
           "[2026-06-11 11:44:19] n2:2:2 [0] misc/shmutils.cc:87 NCCL WARN Error while creating "
           "shared memory segment /dev/shm/nccl-a (size 9637888), error: No space left\n")
    findings = _explain_text(tmp_path, log)["findings"]
    assert findings[0]["id"] == "nccl.shm_failed" and findings[0]["root_cause"]
    assert findings[0]["host"] == "n2"


def test_priority_decides_without_timestamps(tmp_path):
    log = ("RuntimeError: NCCL error in: x.cpp:1, unhandled system error (run with NCCL_DEBUG=INFO "
           "for details), NCCL version 2.19.3\n"
           "n1:1:1 [0] misc/shmutils.cc:87 NCCL WARN Error while creating shared memory segment "
           "/dev/shm/nccl-a (size 1), error: No space left on device (28)\n")
    assert _explain_text(tmp_path, log)["findings"][0]["id"] == "nccl.shm_failed"


def test_consequences_never_beat_a_primary_failure_even_when_earlier(tmp_path):
    log = ("[2026-06-11 11:44:10] n1:1:1 [0] misc/socket.cc:47 NCCL WARN socketProgress: "
           "Connection closed by remote peer n2<4000>\n"
           "[2026-06-11 11:44:30] n2:2:2 [0] include/alloc.h:185 NCCL WARN Cuda failure "
           "'out of memory'\n")
    findings = _explain_text(tmp_path, log)["findings"]
    assert [f["id"] for f in findings] == ["nccl.cuda_out_of_memory", "nccl.connection_closed"]
    assert findings[1]["consequence"] is True


def test_findings_are_grouped_and_counted_not_repeated_per_rank(tmp_path):
    lines = [f"[rank{r}]:[E906 12:16:32.6 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught "
             "collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, "
             "NumelOut=1, Timeout(ms)=600000) ran for 600083 milliseconds before timing out."
             for r in range(8)]
    findings = _explain_text(tmp_path, "\n".join(lines) + "\n")["findings"]
    assert len(findings) == 1
    assert findings[0]["count"] == 8 and findings[0]["ranks"] == list(range(8))
    assert findings[0]["facts"]["op"] == "ALLREDUCE"


def test_warning_is_root_only_without_failures(tmp_path):
    warn = ("n1:1:1 [0] transport/net_socket.cc:338 NCCL WARN NET/Socket : the total number of "
            "sockets is greater than the maximum allowed, setting NCCL_NSOCKS_PERTHREAD to 4\n")
    assert _explain_text(tmp_path, warn)["findings"][0]["id"] == "nccl.too_many_sockets"
    both = warn + "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    assert _explain_text(tmp_path, both)["findings"][0]["id"] == "cuda.illegal_memory_access"


def test_last_error_echo_is_read_across_block_boundaries():
    text = b"junk line\n" * 3 + b"torch.distributed.DistBackendError: boom\nLast error:\n" \
        b"Invalid rank requested : 6/4\n" + b"tail\n" * 3
    for block in (7, 16, 64, 1 << 20):
        found = {c.text: c for c in Scanner(literal_index(), block=block).lines(io.BytesIO(text))}
        assert "Invalid rank requested : 6/4" in found, block
        # the line below "Last error:" is NCCL's last warning, whichever block it falls in
        assert found["Invalid rank requested : 6/4"].last_error, block
        assert not any(c.last_error for t, c in found.items() if t != "Invalid rank requested "
                       ": 6/4"), block


def test_line_numbers_survive_blocks():
    text = (b"".join(b"line %d\n" % i for i in range(1, 5000))
            + b"x NCCL WARN Invalid rank requested : 6/4\n")
    found = list(Scanner(literal_index(), block=4096).lines(io.BytesIO(text)))
    assert [c.number for c in found] == [5000]


def test_a_hit_deep_in_one_huge_line_is_found(tmp_path):
    path = tmp_path / "one-line.log"
    with open(path, "wb") as out:
        out.write(b"a" * (9 << 20))
        out.write(b" NCCL WARN Invalid rank requested : 6/4 ")
        out.write(b"b" * (3 << 20))
    findings = explain([str(path)]).to_dict()["findings"]
    assert findings[0]["id"] == "nccl.invalid_rank" and findings[0]["line"] == 1
    assert len(findings[0]["text"]) <= 70_000


def test_gzip_and_per_rank_files(tmp_path):
    raw = (LOGS / "written" / "nccl-shm-docker.log").read_bytes()
    (tmp_path / "rank3.log.gz").write_bytes(gzip.compress(raw))
    result = explain([str(tmp_path)]).to_dict()
    assert result["findings"][0]["id"] == "nccl.shm_failed"
    assert result["findings"][0]["rank"] == 3  # from the file name, the line names no rank


def test_nccl_summary_from_info_lines():
    result = explain([str(LOGS / "clean" / "nccl-info-multinode-ok.log")]).to_dict()
    nccl = result["nccl"]
    assert nccl["version"] == "2.26.2" and nccl["cuda_runtime"] == "12.8"
    assert nccl["cuda_driver"] == "12.8" and nccl["interfaces"] == ["eth0"]
    assert {"P2P/IPC", "NET/Socket"} <= set(nccl["transports"])
    assert nccl["networks"] == ["Socket"] and nccl["nranks"] == [4]
    assert nccl["init_complete"] == 2 and any("libnccl-net.so" in p for p in nccl["plugins"])
    assert explain([str(LOGS / "real" / "gloo-busy-master-port.log")]).nccl is None


def test_invalid_utf8_and_binary_bytes_do_not_break_matching(tmp_path):
    path = tmp_path / "mixed.log"
    path.write_bytes(b"\xff\xfe\x00garbage\x80\n" + bytes(range(256)) * 64 + b"\n"
                     b"n1:1:1 [0] init.cc:1 NCCL WARN Invalid rank requested : 6/4 \xe9\xff\n")
    findings = explain([str(path)]).to_dict()["findings"]
    assert findings[0]["id"] == "nccl.invalid_rank"
    assert findings[0]["facts"] == {"rank": 6, "nranks": 4}


def test_interface_name_comes_from_the_nccl_settings_in_the_log():
    """The real libnccl log: the WARN line has no name, NCCL's ENV line gives it."""
    root = explain([str(LOGS / "real" / "nccl-socket-ifname-nothing.log")]).to_dict()["findings"][0]
    assert root["id"] == "nccl.no_socket_interface" and root["facts"] == {"ifname": "eth9"}
    assert "NCCL_SOCKET_IFNAME=eth9" in root["explanation"] and "(now eth9)" in root["fix"]


def test_many_matching_lines_are_folded_in_bounded_memory(tmp_path):
    """A log where every line is a failure: findings are counted as they come, not stored."""
    import tracemalloc

    from ncclcheck.catalogue import load
    from ncclcheck.explain.findings import Findings, Hit

    path = tmp_path / "storm.log"
    with open(path, "w") as out:
        for i in range(6_000):
            out.write(f"[rank{i % 512}]:n{i % 64}:{i}:{i} [0] misc/socket.cc:47 NCCL WARN "
                      f"socketProgress: Connection closed by remote peer n{i % 7}<{i}>\n")
    result = explain([str(path)]).to_dict()
    assert [(f["id"], f["count"]) for f in result["findings"]] == \
        [("nccl.connection_closed", 6_000)]
    assert len(result["findings"][0]["ranks"]) == 512

    sig = load().signature("nccl.connection_closed")
    folded = Findings()
    tracemalloc.start()
    try:
        for i in range(20_000):
            folded.add(Hit(sig, {"peer": f"n{i}<{i}>"}, "storm.log", i, "x" * 200, i % 100_000,
                           f"n{i % 9000}", None, i))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert folded.ranked()[0].count == 20_000
    assert peak < 4 << 20, peak  # 20,000 stored hits would need over 12 MiB
