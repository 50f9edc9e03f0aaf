"""bench.expected_busbw and its table (ncclcheck/bench/expected_busbw.toml).

No GPU is lent to these tests: the hardware is the facts the benchmark reads (the GPU name as
torch reports it, the ranks per node, the InfiniBand rate, the socket interface's speed), given
by hand; the sweep's rows are made up at the sizes a real sweep measures. tests/gpu runs the
check on a real GPU.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from ncclcheck.bench.metrics import SizeRow
from ncclcheck.bench.reference import Hardware, compare, expectation, parse_table, table
from ncclcheck.bench.sizes import parse_size
from ncclcheck.model import Category, Status
from ncclcheck.probes.bench.expected import expected_check
from ncclcheck.report.bench import bench_table

H100 = Hardware("nccl", "NVIDIA H100 80GB HBM3", 8, 1)
GIB = 1 << 30


def rows(busbw_at: dict[int, float]) -> list[SizeRow]:
    return [SizeRow(n, n // 4, "float32", 1.0, b / 1.75, b, 0) for n, b in sorted(busbw_at.items())]


def test_every_row_has_sources_a_share_and_a_size_where_it_was_measured():
    rows_ = table()
    assert {r.kind for r in rows_} == {"measured", "link"}
    for row in rows_:
        assert row.sources and all(s.startswith("https://") for s in row.sources)
        assert 0 < row.min_share <= 1 and row.share_basis
        if row.kind == "measured":
            assert row.nbytes and row.busbw_gbps > 0 and row.gpus and row.gpu
    with pytest.raises(ValueError):
        parse_table('[[expected]]\nkey="x"\ntitle="t"\nkind="measured"\nmin_share=2\n'
                    'sources=["https://a"]')
    with pytest.raises(ValueError):
        parse_table('[[expected]]\nkey="x"\ntitle="t"\nkind="measured"\nmin_share=1\n'
                    'sources=["a colleague"]')


def test_a_healthy_8_gpu_h100_node_at_the_figures_size_passes_with_its_share():
    check = expected_check(H100, rows({GIB: 470.0, 16 * GIB: 482.0}), 8, None)
    assert check.status is Status.PASS
    assert check.details["share"] == pytest.approx(482 / 460, abs=1e-3)
    assert check.details["at_bytes"] == 16 * GIB and check.details["like_for_like"]
    assert "105% of the 460 GB/s expected of 8x H100 SXM" in check.summary
    assert check.details["expected"]["sources"][0].startswith(
        "https://github.com/Azure/azurehpc-health-checks/")


def test_below_the_share_fails_like_for_like_and_only_warns_short_of_the_size():
    low = expected_check(H100, rows({GIB: 380.0, 16 * GIB: 400.0}), 8, None)
    assert low.status is Status.FAIL and low.category is Category.P2P
    assert "below --min-share 1" in low.summary and "azurehpc-health-checks" in low.fix
    short = expected_check(H100, rows({256 << 20: 380.0, GIB: 400.0}), 8, None)
    assert short.status is Status.PASS and "not judged" in short.summary  # run's quick sweep
    assert "--max-bytes 16GB" in short.summary
    assert short.details["like_for_like"] is False and short.details["at_bytes"] == GIB
    broken = expected_check(H100, rows({GIB: 150.0}), 8, None)  # a third: broken at any size
    assert broken.status is Status.WARN and broken.category is Category.P2P


def test_min_share_overrides_the_rows_default():
    sweep = rows({16 * GIB: 400.0})  # 87% of 460
    assert expected_check(H100, sweep, 8, 0.85).status is Status.PASS
    assert expected_check(H100, sweep, 8, 0.9).status is Status.FAIL
    assert expected_check(H100, sweep, 8, 0.85).details["min_share_from"] == "--min-share"


def test_across_nodes_the_network_is_the_expectation():
    ib = Hardware("nccl", "NVIDIA H100 80GB HBM3", 8, 2, ib_rate_gbit=200.0)
    check = expected_check(ib, rows({GIB: 5.0}), 16, None)
    assert check.status is Status.FAIL and check.category is Category.NET_PLUGIN
    assert check.details["expected"]["key"] == "ib-200" and check.details["min_share"] == 0.5
    assert "--isolate nodes" in check.fix
    assert expected_check(ib, rows({GIB: 15.0}), 16, None).status is Status.PASS
    eth = Hardware("nccl", None, 1, 2, eth_speed_mbit=100000)
    assert expected_check(eth, rows({GIB: 9.0}), 2, None).details["expected"]["busbw_gbps"] \
        == pytest.approx(9.38, abs=0.01)


@pytest.mark.parametrize("hw,why", [
    (Hardware("gloo", None, 2, 1), "gloo runs on the CPU"),
    (Hardware("nccl", "NVIDIA A10G", 1, 1), "one GPU on one node"),
    (Hardware("nccl", None, 1, 2), "no InfiniBand port is active"),
])
def test_no_expectation_is_a_skip_that_says_why(hw, why):
    assert isinstance(expectation(hw), str)
    check = expected_check(hw, rows({GIB: 1.0}), 2, None)
    assert check.status is Status.SKIP and why in check.summary
    assert expected_check(H100, rows({GIB: 1.0}), 1, None).status is Status.SKIP
    assert expected_check(H100, [], 8, None) is None


def test_the_comparison_takes_the_first_size_at_or_above_the_figures():
    ref = expectation(H100)
    got = compare(ref, rows({8 * GIB: 450.0, 16 * GIB: 470.0, 32 * GIB: 480.0}))
    assert got.at_bytes == 16 * GIB and got.like_for_like
    assert parse_size("16G") == 16 * GIB


def test_the_table_prints_the_expected_figure_and_the_share():
    bench = {"backend": "nccl", "world_size": 8, "avg_busbw_gbps": 300.0, "rows": [
        {"bytes": GIB, "count": GIB // 4, "dtype": "float32", "time_us": 4000.0,
         "algbw_gbps": 268.0, "busbw_gbps": 470.0, "wrong": 0}],
        "reference": {"key": "azure-nd-h100-v5", "title": "8x H100 SXM", "busbw_gbps": 460.0,
                      "bytes": 16 * GIB, "share": 1.022}}
    assert "# Expected busbw       : 460 (8x H100 SXM at 17179869184 bytes); this run 102% " \
           "of it" in bench_table(bench)


@pytest.mark.parametrize("value", ["0", "1.5", "nan", "-0.2"])
def test_min_share_is_checked_on_the_command_line(value):
    done = subprocess.run([sys.executable, "-m", "ncclcheck", "bench", "--min-share", value],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
