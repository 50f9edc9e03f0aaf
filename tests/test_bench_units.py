"""The benchmark's pure parts: sizes, nccl-tests arithmetic, the table, judgement, options.

No process is started here; the outcomes fed to the analysis have the shape the workers send.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema
import pytest

from ncclcheck.bench.analysis import SweepResult, bench_section, job_rows
from ncclcheck.bench.faults import Fault, parse_faults
from ncclcheck.bench.metrics import (RankRow, average_busbw, bandwidths, busbw_factor,
                                     combine_size, find_stragglers, straggler_nodes)
from ncclcheck.bench.options import BenchOptions, choose_backend
from ncclcheck.bench.progress import Progress
from ncclcheck.bench.reference import (Hardware, choose_reference,
                                       infiniband_rate, interface_speed)
from ncclcheck.bench.sizes import format_size, parse_size, sweep_sizes
from ncclcheck.bench.worker import _tolerance, error_kind
from ncclcheck.model import Report
from ncclcheck.probes.bench.allreduce import allreduce_check
from ncclcheck.probes.bench.busbw import busbw_check
from ncclcheck.probes.bench.straggler import straggler_check
from ncclcheck.network.interfaces import Interface, list_ib_ports
from ncclcheck.report.bench import bench_table, format_time_us

SCHEMA = json.loads((Path(__file__).parents[1] / "docs" / "report.schema.json").read_text())


# -- sizes --------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,value", [("1024", 1024), ("1K", 1024), ("64k", 65536),
                                         ("16M", 16 << 20), ("1G", 1 << 30), ("8MB", 8 << 20),
                                         ("2KiB", 2048), (" 3M ", 3 << 20)])
def test_parse_size_uses_powers_of_1024_like_nccl_tests(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "M", "1.5M", "-1K", "1T", "ten", "1 K B"])
def test_parse_size_rejects_garbage(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_sweep_is_geometric_inclusive_and_whole_elements():
    assert sweep_sizes(1024, 16384, 2, "float32") == [1024, 2048, 4096, 8192, 16384]
    assert sweep_sizes(1024, 65536, 4, "bfloat16") == [1024, 4096, 16384, 65536]
    assert sweep_sizes(1, 8, 2, "float32") == [4, 8]  # one element at least, duplicates dropped
    assert sweep_sizes(6, 6, 2, "float32") == [4]
    assert sweep_sizes(1000, 1000, 2, "float16") == [1000]
    with pytest.raises(ValueError):
        sweep_sizes(2048, 1024, 2, "float32")
    with pytest.raises(ValueError):
        sweep_sizes(1024, 2048, 1.0, "float32")


def test_format_size():
    assert [format_size(n) for n in (512, 1024, 3 << 20, 1 << 30, 1500)] == \
        ["512 B", "1 KB", "3 MB", "1 GB", "1500 B"]


# -- nccl-tests arithmetic -------------------------------------------------------------------------
def test_busbw_factor_is_2_n_minus_1_over_n():
    assert [busbw_factor(n) for n in (1, 2, 4, 8, 16)] == [0.0, 1.0, 1.5, 1.75, 1.875]


def test_bandwidths_match_nccl_tests_all_reduce_formulas():
    # nccl-tests all_reduce.cu: baseBw = count*typesize / 1e9 / sec; busBw = baseBw * 2(n-1)/n
    nbytes, seconds, n = 134217728, 1236.5e-6, 8
    algbw, busbw = bandwidths(nbytes, seconds, n)
    assert algbw == pytest.approx(nbytes / 1e9 / seconds)
    assert busbw == pytest.approx(algbw * 2 * (n - 1) / n)
    assert f"{algbw:6.2f}  {busbw:6.2f}" == "108.55  189.96"  # the way the table prints them
    assert bandwidths(1 << 20, 812.4e-6, 2) == pytest.approx((1.2907, 1.2907), rel=1e-4)
    assert bandwidths(1024, 0.0, 4) == (0.0, 0.0)


def test_job_time_is_the_slowest_rank_and_wrong_values_add_up():
    rows = {0: RankRow(4096, 1024, 100e-6, 0.0, 0), 1: RankRow(4096, 1024, 250e-6, 0.0, 3, 1),
            2: RankRow(4096, 1024, 120e-6, 0.0, 2)}
    row = combine_size(rows, "float32", 3)
    assert row.time_us == pytest.approx(250.0)
    assert row.slowest_rank == 1
    assert row.algbw_gbps == pytest.approx(4096 / 250e-6 / 1e9)
    assert row.busbw_gbps == pytest.approx(row.algbw_gbps * 4 / 3)
    assert (row.wrong, row.wrong_ranks, row.input_wrong_ranks) == (5, [1, 2], [1])
    assert average_busbw([row, row]) == pytest.approx(row.busbw_gbps)
    assert average_busbw([]) == 0.0


def test_straggler_is_the_rank_everyone_waited_for():
    lags = {0: 1e-6, 1: 2e-6, 2: 0.020, 3: 1.5e-6}
    hosts = {0: "a", 1: "a", 2: "b", 3: "a"}
    found = find_stragglers(lags, 0.021, hosts)
    assert [s.rank for s in found] == [2]
    assert straggler_nodes(found, hosts) == ["b"]  # node b has no other rank: the node is slow
    assert find_stragglers({0: 1e-6, 1: 3e-6}, 0.001, hosts) == []  # noise, not a straggler
    assert find_stragglers({0: 1e-6, 1: 0.009}, 0.010, hosts)[0].rank == 1  # n=2: vs the other
    assert find_stragglers({0: 0.5}, 1.0, hosts) == []


def test_tolerance_is_exact_while_sums_are_representable():
    assert _tolerance("float32", 1024) == 0.0
    assert _tolerance("bfloat16", 85) == 0.0
    assert _tolerance("bfloat16", 128) > 0
    assert _tolerance("float16", 600) == 0.0


@pytest.mark.parametrize("text,kind", [
    ("[gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 3000ms for recv", "timeout"),
    ("NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000", "duplicate_gpu"),
    ("Multiple Ranks are using the same GPU/Partition.", "duplicate_gpu"),
    ("[gloo] Connection reset by peer", "connection"),
    ("CUDA out of memory. Tried to allocate 2.00 GiB", "out_of_memory"),
    ("CUDA error: an illegal memory access was encountered", "cuda"),
    ("something else", "other")])
def test_error_kinds(text, kind):
    assert error_kind(RuntimeError(text)) == kind


# -- faults (test-only) ------------------------------------------------------------------------------
def test_fault_spec():
    assert parse_faults("corrupt:1, hang:2@3") == [Fault("corrupt", 1), Fault("hang", 2, 3)]
    assert parse_faults("") == [] and parse_faults(None) == []
    for bad in ("corrupt", "corrupt:x", "melt:1", "hang:1@x"):
        with pytest.raises(ValueError):
            parse_faults(bad)


# -- options -----------------------------------------------------------------------------------------
def test_quick_sweep_for_run_is_small_and_full_sweep_is_larger():
    quick = BenchOptions.for_run().resolved("gloo")
    assert len(sweep_sizes(quick.min_bytes, quick.max_bytes, quick.factor, quick.dtype)) <= 5
    assert quick.max_bytes <= 4 << 20 and quick.iters <= 10
    full = BenchOptions().resolved("nccl")
    assert full.max_bytes == 1 << 30 and full.factor == 2.0
    assert BenchOptions(max_bytes=512).resolved("gloo").min_bytes == 512
    assert BenchOptions(min_bytes=1 << 30).resolved("gloo").max_bytes == 1 << 30
    assert choose_backend("auto", 0) == "gloo" and choose_backend("auto", 8) == "nccl"
    assert choose_backend("gloo", 8) == "gloo"


# -- references ------------------------------------------------------------------------------------
def test_reference_per_hardware():
    """GPU names as torch and the driver report them (fixtures: no GPU here)."""
    pick = lambda **kw: (choose_reference(Hardware("nccl", **kw)) or None)  # noqa: E731
    assert pick(gpu_name="NVIDIA A100-SXM4-80GB", gpus_per_node=8).key == "azure-nd-a100-v4"
    assert pick(gpu_name="NVIDIA H100 80GB HBM3", gpus_per_node=8).key == "azure-nd-h100-v5"
    assert pick(gpu_name="NVIDIA H200", gpus_per_node=8).key == "azure-nd-h200-v5"
    assert pick(gpu_name="Tesla V100-SXM2-32GB", gpus_per_node=8).key == "azure-nd-v2"
    assert pick(gpu_name="NVIDIA H100 PCIe", gpus_per_node=8).key == "pcie"
    assert pick(gpu_name="NVIDIA A100-PCIE-40GB", gpus_per_node=8).key == "pcie"
    assert pick(gpu_name="NVIDIA A10G", gpus_per_node=4).key == "pcie"
    assert pick(gpu_name="NVIDIA A10G", gpus_per_node=1) is None
    assert pick(nodes=2, ib_rate_gbit=200.0).key == "ib-200"
    assert pick(nodes=2, ib_rate_gbit=400.0).key == "ib-400"
    assert pick(nodes=2, eth_speed_mbit=25000).busbw_gbps == pytest.approx(2.3, abs=0.05)
    assert pick(nodes=2) is None
    assert choose_reference(Hardware("gloo", gpus_per_node=8, gpu_name="A100")) is None


def test_infiniband_and_ethernet_speeds_from_the_network_owner(tmp_path):
    """The rates come from ncclcheck.network's reading of a (fake) sysfs tree."""
    port = tmp_path / "ib" / "mlx5_0" / "ports" / "1"
    port.mkdir(parents=True)
    (port / "state").write_text("4: ACTIVE\n")
    (port / "rate").write_text("200 Gb/sec (4X HDR)\n")
    down = tmp_path / "ib" / "mlx5_1" / "ports" / "1"
    down.mkdir(parents=True)
    (down / "state").write_text("1: DOWN\n")
    (down / "rate").write_text("400 Gb/sec (4X NDR)\n")
    assert infiniband_rate(list_ib_ports(tmp_path / "ib")) == 200.0
    assert infiniband_rate(list_ib_ports(tmp_path / "none")) is None
    assert interface_speed({"NCCL_CONF_FILE": str(tmp_path / "none")}, LINKS) == 100000
    assert interface_speed({"NCCL_SOCKET_IFNAME": "eth0"}, LINKS) == 25000


LINKS = [Interface("lo", True, True, speed_mbps=None, loopback=True),
         Interface("eth0", True, True, speed_mbps=25000),
         Interface("eth1", True, True, speed_mbps=100000)]


def test_nccl_conf_socket_ifname_reaches_the_reference(tmp_path):
    """NCCL_SOCKET_IFNAME set in nccl.conf chooses the link the reference is taken from, as one
    exported does; an exported one wins over the file, as in NCCL."""
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_DEBUG=WARN\nNCCL_SOCKET_IFNAME=eth0\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".nccl.conf").write_text("NCCL_SOCKET_IFNAME=eth0\n")

    def reference(env):
        speed = interface_speed(env, LINKS)
        return choose_reference(Hardware("nccl", nodes=2, eth_speed_mbit=speed)).title

    assert reference({"HOME": str(tmp_path)}).startswith("100 Gb/s")  # no ~/.nccl.conf there
    assert reference({"NCCL_CONF_FILE": str(conf)}).startswith("25 Gb/s")
    assert reference({"HOME": str(home)}).startswith("25 Gb/s")
    assert reference({"NCCL_CONF_FILE": str(conf), "NCCL_SOCKET_IFNAME": "eth1"}).startswith(
        "100 Gb/s")


# -- analysis: outcomes -> checks ---------------------------------------------------------------------
def _row(nbytes, time_s=1e-3, wrong=0, input_wrong=0, lag_s=1e-6):
    return {"bytes": nbytes, "count": nbytes // 4, "time_s": time_s, "lag_s": lag_s,
            "wrong": wrong, "input_wrong": input_wrong}


def _result(outcomes, **kw):
    result = SweepResult("gloo", len(outcomes), "float32", 20, 5, [1024, 4096], 10.0, **kw)
    result.outcomes = outcomes
    return result


def _outcome(rank, rows, host="h", error=None):
    return {"rank": rank, "host": host, "rows": rows, "error": error}


def test_healthy_sweep_passes_and_fits_the_report_schema():
    result = _result({r: _outcome(r, [_row(1024), _row(4096, 2e-3)]) for r in range(2)})
    rows = job_rows(result)
    check = allreduce_check(result, rows)
    assert check.status.value == "pass" and "0 wrong values" in check.summary
    section = bench_section(result, rows, None)
    report = Report([check], {"host": "h", "launcher": "standalone", "python": "3"}, section)
    jsonschema.validate(report.to_dict(), SCHEMA)
    assert section.avg_busbw_gbps == pytest.approx((1024 / 1e-3 + 4096 / 2e-3) / 2e9, rel=1e-3)


def test_wrong_values_fail_and_name_the_rank_whose_input_was_wrong():
    result = _result({0: _outcome(0, [_row(1024, wrong=1), _row(4096, wrong=1)]),
                      1: _outcome(1, [_row(1024, wrong=1, input_wrong=1),
                                      _row(4096, wrong=1, input_wrong=1)], host="n1")})
    check = allreduce_check(result, job_rows(result))
    assert check.status.value == "fail"
    assert "4 wrong values" in check.summary and "rank 1 (n1)" in check.summary
    assert check.details["ranks"] == [1] and check.fix


def test_a_silent_rank_is_named_as_stopped():
    result = _result({0: _outcome(0, [_row(1024)], error={
        "kind": "timeout", "message": "Timed out", "step": 1, "bytes": 4096})},
        torn_down=[1], progress={0: 3, 1: 2})
    assert job_rows(result) == []
    check = allreduce_check(result, [])
    assert check.status.value == "fail" and check.category.value == "timeout"
    assert "rank 1 stopped answering" in check.summary and "4 KB" in check.summary
    assert "rank 0 (h) waited for it in vain" in check.summary


def test_of_several_stuck_ranks_the_one_that_got_least_far_is_named():
    result = _result({}, torn_down=[0, 1, 2], progress={0: 3, 1: 2, 2: 3})
    check = allreduce_check(result, [])
    assert check.details["ranks"] == [1]
    assert "rank 1 stopped answering and was torn down; ranks 0, 2 waited" in check.summary


def test_a_dead_rank_is_rank_crashed_and_duplicate_gpu_is_named():
    result = _result({0: _outcome(0, [])}, exited={1: 3}, stderr_tail={1: "boom"})
    check = allreduce_check(result, [])
    assert check.category.value == "rank_crashed" and "exit status 3" in check.summary
    dup = {"kind": "duplicate_gpu", "message": "ranks 0, 1 on h all use GPU GPU-1 (cuda:0)",
           "step": -1, "bytes": None}
    result = _result({0: _outcome(0, [], error=dup), 1: _outcome(1, [], error=dup)})
    check = allreduce_check(result, [])
    assert check.category.value == "duplicate_gpu" and "ranks 0, 1" in check.summary


def test_busbw_threshold():
    result = _result({r: _outcome(r, [_row(1 << 20, 1e-3)]) for r in range(2)})
    rows = job_rows(result)
    assert busbw_check(result, rows, 5.0, 1).status.value == "fail"
    assert busbw_check(result, rows, 0.5, 1).status.value == "pass"
    assert busbw_check(result, rows, None, 1).status.value == "pass"
    result.backend = "nccl"
    assert busbw_check(result, rows, 5.0, 1).category.value == "p2p"
    assert busbw_check(result, rows, 5.0, 2).category.value == "net_plugin"
    assert busbw_check(result, [], None, 1) is None


def test_straggler_check_names_rank_and_node():
    outcomes = {r: _outcome(r, [_row(1024, 21e-3, lag_s=20e-3 if r == 2 else 1e-6)],
                            host="slow" if r == 2 else "fast") for r in range(4)}
    result = _result(outcomes)
    check = straggler_check(result, job_rows(result))
    assert check.status.value == "warn" and "node slow" in check.summary
    assert check.details["stragglers"] == [2]


# -- presentation --------------------------------------------------------------------------------------
def test_table_footer_is_nccl_tests_byte_for_byte():
    bench = {"backend": "gloo", "world_size": 2, "avg_busbw_gbps": 1.2345678, "rows": [
        {"bytes": 1048576, "count": 262144, "dtype": "float32", "time_us": 812.4,
         "algbw_gbps": 1.29, "busbw_gbps": 1.29, "wrong": 0}]}
    text = bench_table(bench)
    assert "# Out of bounds values : 0 OK\n" in text
    assert "# Avg bus bandwidth    : 1.23457\n" in text  # printf %g, as nccl-tests
    assert "     1048576        262144     float     sum      -1    812.4    1.29    1.29       0" in text
    assert all(line.startswith("#") or line[:12].strip().isdigit() for line in text.splitlines())
    bench["rows"][0]["wrong"] = 7
    assert "# Out of bounds values : 7 FAILED" in bench_table(bench)
    assert [format_time_us(t) for t in (12345.6, 812.44, 9.876)] == ["  12346", "  812.4", "   9.88"]


def test_progress_goes_to_its_stream_only_when_every_rank_finished_a_size():
    stream = io.StringIO()
    progress = Progress([1024, 4096], 2, "gloo", stream)
    progress.update({"event": "done", "rank": 0, "step": 0})
    assert stream.getvalue() == ""
    progress.update({"event": "done", "rank": 1, "step": 0})
    progress.update({"event": "start", "rank": 1, "step": 1})
    assert stream.getvalue() == "bench: 1/2 sizes done (1 KB, gloo, 2 ranks)\n"
    progress.close()


def test_a_rank_without_a_gpu_is_rank_mismatch():
    from ncclcheck.bench.worker import NoGpuForRank
    assert error_kind(NoGpuForRank("LOCAL_RANK 4 has no GPU: only 4 are visible")) == "rank_mismatch"
    error = {"kind": "rank_mismatch", "message": "LOCAL_RANK 4 has no GPU", "step": -1,
             "bytes": None}
    result = _result({0: _outcome(0, [], error=error), 1: _outcome(1, [])})
    check = allreduce_check(result, [])
    assert check.category.value == "rank_mismatch" and "--nproc-per-node" in check.fix
