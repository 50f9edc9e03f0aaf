"""Real hangs: torchrun starts a small Gloo job (tests/flightrec/fr_job.py), one rank misbehaves,
every rank's flight recorder writes its dump, and `ncclcheck explain` on the job's folder (the
dumps and torchrun's output) names the rank, the collective and the group."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

JOB = Path(__file__).parent / "flightrec" / "fr_job.py"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_job(folder: Path, scenario: str, nodes: tuple[int, ...] = (4,), **env: str) -> Path:
    """Run the job with ``nodes`` torchrun agents (processes per node each) on this host; the
    folder gets every dump and each agent's output."""
    folder.mkdir()
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("TORCH_", "MASTER_", "RANK", "WORLD_", "LOCAL_"))}
    environ.update({"FR_SCENARIO": scenario, "FR_DIR": str(folder),
                    "TORCH_FR_BUFFER_SIZE": "200", "OMP_NUM_THREADS": "1", **env})
    port = _port()
    agents = []
    for node, nproc in enumerate(nodes):
        out = open(folder / f"torchrun-node{node}.log", "w")
        agents.append((subprocess.Popen(
            [*TORCHRUN, "--nnodes", str(len(nodes)), "--node-rank", str(node),
             "--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1",
             "--master-port", str(port), str(JOB)],
            stdout=out, stderr=subprocess.STDOUT, env=environ), out))
    try:
        for agent, _ in agents:
            agent.wait(timeout=120)
    finally:
        for agent, out in agents:
            if agent.poll() is None:
                agent.kill()
                agent.wait()
            out.close()
    return folder


# Every job the tests read, by name: (scenario, torchrun agents' processes, environment).
JOBS: dict[str, tuple[str, tuple[int, ...], dict[str, str]]] = {
    "skip": ("skip", (4,), {"FR_CULPRIT": "1", "FR_AT": "3", "FR_COUNT": "6"}),
    "other_op": ("other_op", (4,), {"FR_CULPRIT": "2", "FR_AT": "3"}),
    "subgroup": ("subgroup", (4,), {"FR_AT": "3"}),
    "killed": ("killed", (3, 1), {"FR_CULPRIT": "3", "FR_AT": "3"}),
    "stuck": ("stuck", (4,), {"FR_CULPRIT": "1", "FR_AT": "4"}),
    "completed": ("completed", (4,), {}),
    "json_hosts": ("skip", (4,), {"FR_CULPRIT": "2", "FR_AT": "9", "FR_COUNT": "12",
                                  "FR_FORMAT": "json", "FR_HOSTS": "1",
                                  "TORCH_FR_BUFFER_SIZE": "4"}),
}
PARALLEL_JOBS = 2  # jobs at once: half a job is its ranks waiting; three gained nothing on 2 cores


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> dict[str, Path]:
    """Each job run once for the module, two at a time (each on its own port and folder)."""
    root = tmp_path_factory.mktemp("fr-jobs")

    def one(name: str) -> Path:
        scenario, nodes, env = JOBS[name]
        return run_job(root / name, scenario, nodes, **env)

    with ThreadPoolExecutor(PARALLEL_JOBS) as pool:
        return dict(zip(JOBS, pool.map(one, JOBS)))


def explain_json(folder: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "ncclcheck", "explain", "--format", "json",
                          str(folder)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def root_of(folder: Path) -> dict:
    result = explain_json(folder)
    root = result["findings"][0]
    assert root["root_cause"] and root["category"] == "desync", root
    return root


def test_a_rank_that_skips_a_collective(jobs):
    root = root_of(jobs["skip"])
    facts = root["facts"]
    assert root["id"] == "fr.rank_never_arrived"
    # rank 1 skipped the third call: it has five, the others wait at their sixth
    assert (facts["ranks"], facts["seq"], facts["collective"]) == ([1], 6, "all_reduce")
    assert facts["process_group"]["desc"] == "default_pg"
    assert facts["frames"]["waiting"].startswith("main (")


def test_a_rank_calling_a_different_op(jobs):
    root = root_of(jobs["other_op"])
    facts = root["facts"]
    assert root["id"] == "fr.collective_mismatch"
    assert (facts["ranks"], facts["seq"], facts["collective"]) == ([2], 3, "all_reduce")
    assert facts["ops"]["2"] == "broadcast"


def test_a_desync_inside_a_subgroup(jobs):
    root = root_of(jobs["subgroup"])
    facts = root["facts"]
    assert (facts["ranks"], facts["seq"], facts["collective"]) == ([3], 3, "all_reduce")
    assert facts["process_group"]["ranks"] == [2, 3]
    assert facts["process_group"]["desc"] != "default_pg"


def test_a_rank_killed_mid_job_on_another_node(jobs):
    """Node 1 runs rank 3 only; it kills itself (SIGKILL) and leaves no dump; node 0's ranks
    wait at the collective. The dumps say who; node 1's torchrun output says why."""
    result = explain_json(jobs["killed"])
    root = result["findings"][0]
    facts = root["facts"]
    assert root["id"] == "fr.rank_never_arrived"
    assert (facts["ranks"], facts["seq"], facts["missing_dumps"]) == ([3], 3, [3])
    assert "Rank 3's own log says why" in root["explanation"] and "signal" in root["explanation"]
    assert not [f for f in result["findings"][1:] if f["root_cause"]]


def test_a_rank_stuck_in_python(jobs):
    root = root_of(jobs["stuck"])
    facts = root["facts"]
    assert (facts["ranks"], facts["seq"], facts["collective"]) == ([1], 4, "all_reduce")
    assert facts["frames"]["culprit"].startswith("main (")


def test_all_completed_is_no_failure(jobs):
    result = explain_json(jobs["completed"])
    assert not [f for f in result["findings"] if f["category"]]
    assert "fr.all_completed" in {n["id"] for n in result["notes"]}
    assert result["hypotheses"] == []


def test_json_dumps_under_host_named_files_with_a_wrapped_buffer(jobs):
    folder = jobs["json_hosts"]
    names = sorted(p.name for p in folder.iterdir() if p.name.startswith("nccl_trace"))
    assert names == ["nccl_trace_rank_node-a1_0", "nccl_trace_rank_node-a1_2",
                     "nccl_trace_rank_node-b7_1", "nccl_trace_rank_node-b7_3"]
    assert (folder / names[0]).read_bytes()[:1] == b"{"
    root = root_of(folder)
    facts = root["facts"]
    assert (facts["ranks"], facts["seq"]) == ([2], 12)
    assert facts["wrapped"]  # four entries kept of twelve: the oldest were dropped


def test_a_missing_dump_is_named_and_the_rest_analysed(jobs, tmp_path):
    folder = Path(shutil.copytree(jobs["skip"], tmp_path / "job"))  # the same job, one dump less
    (folder / "nccl_trace_rank_3").unlink()
    result = explain_json(folder)
    assert result["findings"][0]["facts"]["ranks"] == [1]
    assert "fr.missing_dumps" in {n["id"] for n in result["notes"]}
