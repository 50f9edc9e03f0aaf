"""The ranks family, check by check: each one passing and failing.

No GPU exists here: where a visible-GPU count matters it is given through the
``visible_gpus`` option (standing in for torch.cuda.device_count()).
"""

from __future__ import annotations

import pytest

from ncclcheck.context import ProbeContext, ProbeOptions, RanksOptions
from ncclcheck.model import Category, Status
from ncclcheck.probes.ranks import probe

TORCHRUN = {"TORCHELASTIC_RUN_ID": "r", "MASTER_ADDR": "node0", "MASTER_PORT": "29500",
            "GROUP_WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "4"}


def run(env, nodes=None, gpus=None, visible=None):
    options = ProbeOptions(ranks=RanksOptions(visible_gpus=visible))
    ctx = ProbeContext(env=env, nodes=nodes, gpus_per_node=gpus, timeout=10, options=options)
    return {r.id: r for r in probe(ctx)}


def torchrun(rank, local, group, world=8, **extra):
    env = dict(TORCHRUN, RANK=str(rank), LOCAL_RANK=str(local), GROUP_RANK=str(group),
               WORLD_SIZE=str(world))
    env.update(extra)
    return env


def test_healthy_torchrun_rank_passes_everything():
    results = run(torchrun(6, 2, 1), visible=4)
    bad = {k: r.summary for k, r in results.items() if r.status not in (Status.PASS, Status.SKIP)}
    assert bad == {}
    assert results["ranks.world_size"].status is Status.PASS
    assert results["ranks.rank_formula"].summary == "rank 6 == 1 x 4 + 2"


def test_motivating_case_is_explained():
    env = {"RANK": "6", "WORLD_SIZE": "4", "LOCAL_RANK": "2", "NODE_RANK": "1"}
    results = run(env, nodes=2, gpus=4)
    rank = results["ranks.rank"]
    assert rank.status is Status.FAIL and rank.category is Category.RANK_MISMATCH
    assert "rank 6 cannot exist in a world of 4" in rank.summary
    assert "2 x 4 = 8 ranks are launched" in rank.summary
    assert "Invalid rank requested : 6/4" in rank.summary
    for value in ("WORLD_SIZE=8", "Trainer(num_nodes=2, devices=4)", "world_size() returns 8"):
        assert value in rank.fix
    world = results["ranks.world_size"]
    assert world.status is Status.FAIL and "per-node count" in world.summary
    assert results["ranks.rank"].rank == 6


def test_rank_beyond_world_without_layout():
    results = run({"RANK": "4", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "MASTER_ADDR": "a",
                   "MASTER_PORT": "1"})
    assert results["ranks.rank"].status is Status.FAIL
    assert "valid ranks 0..3" in results["ranks.rank"].summary
    assert results["ranks.world_size"].status is Status.SKIP


def test_world_size_equal_to_node_count_is_named():
    results = run(torchrun(0, 0, 0, world=2), nodes=2, gpus=4)
    assert results["ranks.world_size"].status is Status.FAIL
    assert "node count" in results["ranks.world_size"].summary


def test_local_rank_beyond_gpus_per_node():
    env = torchrun(3, 99, 0)
    results = run(env, nodes=2, gpus=4, visible=4)
    local = results["ranks.local_rank"]
    assert local.status is Status.FAIL and "outside 0..3" in local.summary
    assert "--nproc-per-node 4" in local.fix


def test_local_rank_without_a_visible_gpu():
    env = torchrun(3, 3, 0)
    results = run(env, nodes=2, gpus=4, visible=2)
    assert results["ranks.local_rank"].status is Status.FAIL
    assert "sees 2 GPU(s)" in results["ranks.local_rank"].summary


def test_more_processes_than_gpus_is_duplicate_gpu():
    env = torchrun(1, 1, 0)
    results = run(env, visible=2)
    local = results["ranks.local_rank"]
    assert local.status is Status.FAIL and local.category is Category.DUPLICATE_GPU


def test_local_rank_passes_with_unknown_gpu_count():
    results = run(torchrun(1, 1, 0), nodes=2, gpus=4)
    assert results["ranks.local_rank"].status is Status.PASS


def test_node_rank_one_based():
    env = {"NODE_RANK": "2", "LOCAL_RANK": "0", "WORLD_SIZE": "8", "MASTER_ADDR": "a",
           "MASTER_PORT": "1"}
    node = run(env, nodes=2, gpus=4)["ranks.node_rank"]
    assert node.status is Status.FAIL and "1-based" in node.summary
    assert "0 to 1" in node.fix


def test_node_rank_passes():
    assert run(torchrun(5, 1, 1), nodes=2, gpus=4)["ranks.node_rank"].status is Status.PASS


def test_rank_formula_broken_under_a_guaranteeing_launcher():
    results = run(torchrun(2, 2, 1))
    formula = results["ranks.rank_formula"]
    assert formula.status is Status.FAIL
    assert formula.details["expected_rank"] == 6 and "RANK=6" in formula.fix


def test_rank_formula_not_required_under_slurm_cyclic():
    env = {"SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_NTASKS": "8", "SLURM_LOCALID": "0",
           "SLURM_NODEID": "1", "SLURM_NNODES": "2", "SLURM_NTASKS_PER_NODE": "4"}
    formula = run(env)["ranks.rank_formula"]
    assert formula.status is Status.PASS and "cyclic" in formula.summary


def test_layout_flags_disagreeing_with_the_launcher():
    results = run(torchrun(0, 0, 0), nodes=1, gpus=4)
    layout = results["ranks.layout"]
    assert layout.status is Status.FAIL
    assert "--nodes 1" in layout.summary and "GROUP_WORLD_SIZE=2" in layout.summary
    assert "num_nodes=2" in layout.fix


def test_layout_from_launcher_when_no_flags():
    layout = run(torchrun(0, 0, 0))["ranks.layout"]
    assert layout.status is Status.PASS and "2 x 4 = 8" in layout.summary


def test_layout_unknown_is_a_skip_with_advice():
    layout = run({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "a", "MASTER_PORT": "1"})["ranks.layout"]
    assert layout.status is Status.SKIP and "--nodes" in layout.summary


def test_agreement_failure_names_both_variables():
    env = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "8",
           "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4", "WORLD_SIZE": "4",
           "MASTER_ADDR": "a", "MASTER_PORT": "1"}
    agreement = run(env)["ranks.agreement"]
    assert agreement.status is Status.FAIL
    assert "OMPI_COMM_WORLD_SIZE=8 != WORLD_SIZE=4" in agreement.summary


def test_master_missing_under_torchrun_fails_and_under_mpi_warns():
    env = torchrun(0, 0, 0)
    del env["MASTER_ADDR"]
    assert run(env)["ranks.master"].status is Status.FAIL
    mpi = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2",
           "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    master = run(mpi)["ranks.master"]
    assert master.status is Status.WARN and "MASTER_ADDR and MASTER_PORT not set" in master.summary


def test_standalone_validates_the_single_process_layout():
    results = run({}, nodes=2, gpus=4)
    assert "standalone" in results["ranks.launcher"].summary
    assert results["ranks.world_size"].status is Status.PASS
    assert "checked when the job's launcher runs" in results["ranks.layout"].summary
    assert all(r.status in (Status.PASS, Status.SKIP) for r in results.values())


def test_kubeflow_pod_running_python_directly_fails():
    env = {"PET_NNODES": "2", "PET_NPROC_PER_NODE": "4", "PET_NODE_RANK": "1", "RANK": "1",
           "WORLD_SIZE": "8", "MASTER_ADDR": "m", "MASTER_PORT": "23456"}
    launcher = run(env)["ranks.launcher"]
    assert launcher.status is Status.FAIL and "torchrun" in launcher.fix


def test_sbatch_without_srun_warns():
    env = {"SLURM_JOB_ID": "1", "SLURM_NNODES": "2", "SLURM_NTASKS": "8"}
    launcher = run(env)["ranks.launcher"]
    assert launcher.status is Status.WARN and "srun" in launcher.fix


# Bad input: each value becomes a failing check with a clear summary, never an exception.
@pytest.mark.parametrize("env, check, words", [
    ({"RANK": "abc", "WORLD_SIZE": "2"}, "ranks.env", "RANK='abc' is not an integer"),
    ({"RANK": "0", "WORLD_SIZE": "0"}, "ranks.env", "WORLD_SIZE='0' is out of range (must be >= 1)"),
    ({"RANK": "0", "WORLD_SIZE": "-3"}, "ranks.env", "WORLD_SIZE='-3' is out of range"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "a", "MASTER_PORT": "70000"}, "ranks.master",
     "MASTER_PORT='70000' is out of range (must be 1..65535)"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "a", "MASTER_PORT": "http"}, "ranks.master",
     "MASTER_PORT='http' is not an integer"),
    ({"RANK": "", "WORLD_SIZE": "2"}, "ranks.env", "RANK='' is set but empty"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "", "MASTER_PORT": "1"}, "ranks.master",
     "MASTER_ADDR='' is set but empty"),
])
def test_bad_values_fail_clearly(env, check, words):
    results = run(env)
    assert results[check].status is Status.FAIL
    assert words in results[check].summary
    assert results[check].fix


def test_local_rank_99_with_four_gpus_per_node():
    results = run({"LOCAL_RANK": "99", "NODE_RANK": "0", "WORLD_SIZE": "4", "MASTER_ADDR": "a",
                   "MASTER_PORT": "1"}, nodes=1, gpus=4)
    assert results["ranks.local_rank"].status is Status.FAIL
    assert "local rank 99 is outside 0..3" in results["ranks.local_rank"].summary


def test_malformed_master_port_category_is_configuration():
    results = run({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "a", "MASTER_PORT": "http"})
    assert results["ranks.env"].category is Category.CONFIGURATION


def test_master_derived_under_srun_warns_and_says_where_it_came_from():
    env = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_NTASKS": "2",
           "SLURM_NODELIST": "node[3-4]", "PATH": ""}
    master = run(env)["ranks.master"]
    assert master.status is Status.WARN
    assert "node3:19242 derived from SLURM_NODELIST" in master.summary
    assert master.details["sources"]["master_port"].startswith("SLURM_JOB_ID")
    assert "MASTER_ADDR=node3" in master.fix
    exported = run({**env, "MASTER_ADDR": "node3", "MASTER_PORT": "29500"})["ranks.master"]
    assert exported.status is Status.PASS
