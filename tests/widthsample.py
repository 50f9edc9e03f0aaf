"""A report with every part the table draws: a check per status, long summaries and fixes,
checks from several hosts and ranks (the where column), the sweep and its --isolate lines."""

from __future__ import annotations

from ncclcheck.model import BenchSection, Category, CheckResult, Report, Status


def sample_report() -> Report:
    long = ("the interface eth0 on node-a17.example.internal answers at 10 Gb/s while its "
            "peers run at 100 Gb/s, so every all-reduce across the job waits for it; "
            "NCCL_SOCKET_IFNAME=eth0 names it and NCCL_IB_HCA is unset")
    fix = ("Set NCCL_SOCKET_IFNAME to the fast interface (exact: =ib0), check the link speed "
           "with ethtool and ibstat, and drain the node with --on-fail drain under Slurm when "
           "it stays slow; then rerun ncclcheck run --checks net,bench --timeout 120.")
    checks = [
        CheckResult("ranks.world_size", Status.PASS, "world size 16 matches 2 nodes x 8 GPUs"),
        CheckResult("net.nccl_interface", Status.WARN, long, {}, fix, Category.INTERFACE,
                    host="node-a17.example.internal", rank=9),
        CheckResult("bench.allreduce", Status.ERROR, "nothing measured: the all-reduce sweep "
                    "completed 0 of 4 sizes: the deadline came before its first size (1 KB) in "
                    "the 1.4 s it had of --timeout 2", {}, "Give the benchmark more time: "
                    "--timeout 60 (this run had 2); or leave the sweep out of `run` with "
                    "--no-bench.", Category.TIMEOUT, host="node-b03", rank=0),
        CheckResult("nccl.shm", Status.FAIL, "/dev/shm: 64 MiB free of 64 MiB, below the 1 GiB "
                    "NCCL needs for its shared-memory transport between local ranks", {},
                    "Give the container a larger /dev/shm: docker run --shm-size=8g, or "
                    "mount a tmpfs of 8 GiB at /dev/shm in the pod spec.",
                    Category.SHARED_MEMORY, host="node-b03", rank=3),
        CheckResult("net.infiniband", Status.SKIP, "no InfiniBand / RoCE device"),
    ]
    rows = [{"bytes": 1024 * 16 ** i, "count": 256 * 16 ** i, "dtype": "float32",
             "time_us": 40.0 * (i + 1), "algbw_gbps": 0.5 * (i + 1),
             "busbw_gbps": 0.9 * (i + 1), "wrong": 0} for i in range(4)]
    per_node = [{"host": f"node-{c}{n:02d}.example.internal", "pairs": 5, "slow_pairs": 0,
                 "median_busbw_gbps": 41.0, "min_busbw_gbps": 39.5,
                 "partners": [f"node-{c}{m:02d}.example.internal" for m in range(6) if m != n]}
                for c in "ab" for n in range(3)]
    isolate = {"mode": "nodes", "pairs": 15, "bytes": 16777216, "rounds": 5,
               "median_busbw_gbps": 41.0, "slow_below_gbps": 28.7, "per_node": per_node,
               "slow_nodes": [], "slow_links": [], "suspects": [], "suspect_links": []}
    bench = BenchSection("gloo", 16, "float32", 10, 3, rows, 2.25, 3.6, 4194304,
                         ["node-a17.example.internal", "node-b03"], None, None,
                         {"busbw_gbps": 460, "title": "8x H100 SXM, NVLink 4, NVSwitch, "
                          "nccl-tests all_reduce_perf in-place", "bytes": 17179869184,
                          "share": 0.008}, isolate=isolate)
    context = {"host": "node-b03", "launcher": "torchrun", "python": "3.11.7",
               "torch": "2.13.0+cu128", "timeout_s": 2}
    return Report(checks, context, bench)
