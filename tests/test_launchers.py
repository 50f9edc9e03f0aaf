"""Each launcher's environment parsing, and the order launchers are detected in."""

from __future__ import annotations

import pytest

from ncclcheck.launchers import EnvReader, detect_launcher, read_layout
from ncclcheck.launchers.slurm import tasks_per_node


def layout_of(env):
    return read_layout(env)[0]


def test_torchrun_reads_every_variable():
    env = {"TORCHELASTIC_RUN_ID": "x", "RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1",
           "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2",
           "MASTER_ADDR": "node0", "MASTER_PORT": "29500"}
    layout = layout_of(env)
    assert layout.launcher == "torchrun"
    assert (layout.rank, layout.world_size, layout.local_rank, layout.local_world_size,
            layout.node_rank, layout.num_nodes) == (5, 8, 1, 4, 1, 2)
    assert (layout.master_addr, layout.master_port) == ("node0", 29500)
    assert all(a.ok for a in layout.agreements)
    assert "TORCHELASTIC_RUN_ID" in layout.reason


def test_torchrun_world_size_disagreeing_with_groups():
    env = {"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "WORLD_SIZE": "6", "LOCAL_RANK": "0",
           "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "2"}
    broken = [a for a in layout_of(env).agreements if not a.ok]
    assert [a.quantity for a in broken] == ["world_size"]
    assert "WORLD_SIZE=6" in broken[0].describe()


def test_torchrun_wins_inside_slurm():
    env = {"TORCHELASTIC_RUN_ID": "x", "SLURM_PROCID": "0", "SLURM_STEP_ID": "0",
           "SLURM_JOB_ID": "7", "RANK": "3", "WORLD_SIZE": "4"}
    launcher, reason, others = detect_launcher(env)
    assert launcher.name == "torchrun"
    assert "slurm" in others and "slurm-batch" in others


def test_srun_task():
    env = {"SLURM_JOB_ID": "1", "SLURM_STEP_ID": "0", "SLURM_PROCID": "6", "SLURM_NTASKS": "8",
           "SLURM_LOCALID": "2", "SLURM_NODEID": "1", "SLURM_NNODES": "2",
           "SLURM_NTASKS_PER_NODE": "4"}
    layout = layout_of(env)
    assert layout.launcher == "slurm"
    assert (layout.rank, layout.world_size, layout.local_rank, layout.node_rank,
            layout.num_nodes, layout.local_world_size) == (6, 8, 2, 1, 2, 4)
    assert layout.source("world_size") == "SLURM_NTASKS"
    assert all(a.ok for a in layout.agreements)
    assert not layout.master_required


def test_srun_ntasks_disagreeing_with_nodes_and_world_size():
    env = {"SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_NTASKS": "8", "SLURM_LOCALID": "0",
           "SLURM_NODEID": "0", "SLURM_NNODES": "2", "SLURM_NTASKS_PER_NODE": "2",
           "WORLD_SIZE": "4"}
    broken = {a.describe() for a in layout_of(env).agreements if not a.ok}
    assert "SLURM_NTASKS=8 != SLURM_NNODES x SLURM_NTASKS_PER_NODE=4" in broken
    assert "SLURM_NTASKS=8 != WORLD_SIZE=4" in broken


def test_srun_old_names_and_tasks_per_node_notation():
    env = {"SLURM_STEPID": "0", "SLURM_PROCID": "1", "SLURM_NPROCS": "6", "SLURM_LOCALID": "1",
           "SLURM_NODEID": "0", "SLURM_JOB_NUM_NODES": "3", "SLURM_TASKS_PER_NODE": "2(x3)"}
    layout = layout_of(env)
    assert (layout.world_size, layout.num_nodes, layout.local_world_size) == (6, 3, 2)
    assert layout.source("world_size") == "SLURM_NPROCS"
    assert layout.source("local_world_size") == "SLURM_TASKS_PER_NODE"


def test_tasks_per_node_expansion():
    assert tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert tasks_per_node("4") == [4]
    assert tasks_per_node("4(x)") is None
    assert tasks_per_node(None) is None


def test_sbatch_without_srun():
    env = {"SLURM_JOB_ID": "42", "SLURM_NNODES": "2", "SLURM_NTASKS": "8",
           "SLURM_NTASKS_PER_NODE": "4"}
    layout = layout_of(env)
    assert layout.launcher == "slurm-batch"
    assert (layout.num_nodes, layout.local_world_size) == (2, 4)
    assert any("srun" in note for note in layout.notes)


def test_open_mpi():
    env = {"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "8",
           "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "4", "WORLD_SIZE": "4"}
    layout = layout_of(env)
    assert layout.launcher == "openmpi"
    assert (layout.rank, layout.world_size, layout.num_nodes, layout.node_rank) == (5, 8, 2, 1)
    broken = [a.describe() for a in layout.agreements if not a.ok]
    assert broken == ["OMPI_COMM_WORLD_SIZE=8 != WORLD_SIZE=4"]


def test_mpich_pmi_fd_mode():
    env = {"PMI_RANK": "3", "PMI_SIZE": "4", "PMI_FD": "5", "MPI_LOCALRANKID": "1",
           "MPI_LOCALNRANKS": "2"}
    layout = layout_of(env)
    assert layout.launcher == "mpich"
    assert (layout.rank, layout.world_size, layout.local_rank, layout.num_nodes) == (3, 4, 1, 2)


def test_mpich_pmi_port_mode_has_no_rank():
    env = {"PMI_ID": "3", "PMI_PORT": "host:1234", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"}
    layout = layout_of(env)
    assert layout.launcher == "mpich"
    assert layout.rank is None and layout.local_rank == 1


def test_kubeflow_pod_with_several_processes_per_pod():
    env = {"PET_NNODES": "2", "PET_NPROC_PER_NODE": "4", "PET_NODE_RANK": "1", "RANK": "1",
           "WORLD_SIZE": "8", "MASTER_ADDR": "job-master-0", "MASTER_PORT": "23456"}
    layout = layout_of(env)
    assert layout.launcher == "kubeflow"
    assert layout.rank is None  # RANK is the pod index here, not a process rank
    assert (layout.node_rank, layout.num_nodes, layout.local_world_size) == (1, 2, 4)
    assert all(a.ok for a in layout.agreements)
    assert any("torchrun" in note for note in layout.notes)


def test_kubeflow_old_operator_world_size_is_replica_count():
    env = {"PET_NNODES": "2", "PET_NPROC_PER_NODE": "4", "PET_NODE_RANK": "0", "RANK": "0",
           "WORLD_SIZE": "2", "MASTER_ADDR": "m", "MASTER_PORT": "1"}
    broken = [a for a in layout_of(env).agreements if not a.ok]
    assert broken and "v1.7" in broken[0].fix


def test_kubeflow_elastic_nnodes_range_is_not_a_count():
    env = {"PET_NNODES": "1:4", "PET_NODE_RANK": "0", "WORLD_SIZE": "1", "RANK": "0"}
    layout = layout_of(env)
    assert layout.num_nodes is None and not layout.problems


def test_lsf_jsrun_with_rankfile(tmp_path):
    rankfile = tmp_path / "ranks"
    rankfile.write_text("launch\nnodeA\nnodeA\nnodeB\nnodeB\n")
    env = {"LSB_JOBID": "9", "LSB_DJOB_RANKFILE": str(rankfile), "JSM_NAMESPACE_RANK": "3",
           "JSM_NAMESPACE_SIZE": "4", "JSM_NAMESPACE_LOCAL_RANK": "1"}
    layout = layout_of(env)
    assert layout.launcher == "lsf"
    assert (layout.rank, layout.world_size, layout.num_nodes, layout.local_world_size) == (3, 4, 2, 2)


def test_plain_lightning_environment():
    env = {"NODE_RANK": "1", "LOCAL_RANK": "2", "WORLD_SIZE": "8", "MASTER_ADDR": "10.0.0.1",
           "MASTER_PORT": "29500"}
    layout = layout_of(env)
    assert layout.launcher == "env"
    assert (layout.node_rank, layout.local_rank, layout.world_size, layout.rank) == (1, 2, 8, None)
    assert "NODE_RANK" in layout.reason


def test_standalone():
    launcher, reason, others = detect_launcher({"PATH": "/usr/bin"})
    assert launcher.name == "standalone" and others == []
    layout = layout_of({})
    assert (layout.rank, layout.world_size) == (0, 1)


@pytest.mark.parametrize("value, problem", [
    ("abc", "is not an integer"), ("", "is set but empty"), ("-3", "out of range"),
    ("1.5", "is not an integer"), (" ", "is set but empty"),
])
def test_reader_records_malformed_values(value, problem):
    reader = EnvReader({"RANK": value})
    assert reader.int("RANK") is None
    assert problem in reader.problems[0].describe()


def test_reader_port_range():
    reader = EnvReader({"MASTER_PORT": "70000"})
    assert reader.int("MASTER_PORT", minimum=1, maximum=65535) is None
    assert "1..65535" in reader.problems[0].describe()


# -- what each launcher knows about itself (no launcher names compared outside launchers/) ----
@pytest.mark.parametrize("env, port", [
    ({"TORCHELASTIC_RUN_ID": "j", "RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "a",
      "MASTER_PORT": "29500"}, 29501),  # torchrun's agent listens on MASTER_PORT itself
    ({"TORCHELASTIC_RUN_ID": "j", "MASTER_PORT": "65535"}, 65534),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "29500"}, 29500),
    ({"RANK": "0", "WORLD_SIZE": "2"}, None),
])
def test_the_store_port_is_the_launchers_to_choose(env, port):
    assert layout_of(env).default_store_port() == port


def test_only_the_standalone_launcher_is_a_single_process():
    assert layout_of({}).single_process
    assert not layout_of({"RANK": "0", "WORLD_SIZE": "1"}).single_process


def test_launch_advice_comes_from_the_launcher():
    batch = layout_of({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "8"})
    assert batch.advice is not None and not batch.advice.fails and "srun" in batch.advice.fix
    assert layout_of({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "1"}).advice is None
    pod = layout_of({"PET_NNODES": "2", "PET_NPROC_PER_NODE": "4", "RANK": "0"})
    assert pod.advice is not None and pod.advice.fails and "torchrun" in pod.advice.fix
    assert layout_of({"PET_NNODES": "2", "PET_NPROC_PER_NODE": "1", "RANK": "0"}).advice is None


# -- srun without MASTER_*: rank 0's host and the store port, derived as Lightning does -------
SRUN = {"SLURM_JOB_ID": "123456", "SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "SLURM_NTASKS": "4",
        "SLURM_LOCALID": "1", "SLURM_NODEID": "1", "SLURM_NNODES": "2", "PATH": ""}


def test_srun_derives_rank0_host_from_the_nodelist_and_the_port_from_the_job_id():
    layout = layout_of({**SRUN, "SLURM_NODELIST": "gpu[07-09,11]"})
    assert (layout.master_addr, layout.master_port) == ("gpu07", 18456)
    assert layout.default_store_port() == 18456
    assert layout.sources["master_addr"] == "SLURM_NODELIST (first host, expanded by parser)"
    assert layout.sources["master_port"].startswith("SLURM_JOB_ID (15000 + last four digits")


@pytest.mark.parametrize(("job_id", "port"), [("7", 15007), ("9999", 24999), ("40000", 15000),
                                               ("123456", 18456)])
def test_store_port_is_lightnings_formula(job_id, port):
    assert layout_of({**SRUN, "SLURM_JOB_ID": job_id, "SLURM_NODELIST": "a"}).master_port == port


def test_the_steps_nodelist_comes_before_the_allocations():
    env = {**SRUN, "SLURM_NODELIST": "n[1-4]", "SLURM_JOB_NODELIST": "n[1-4]",
           "SLURM_STEP_NODELIST": "n3,n4"}
    layout = layout_of(env)
    assert layout.master_addr == "n3"
    assert layout.sources["master_addr"].startswith("SLURM_STEP_NODELIST")


def test_exported_master_values_win_over_the_derived_ones():
    layout = layout_of({**SRUN, "SLURM_NODELIST": "gpu[1-2]", "MASTER_ADDR": "head",
                        "MASTER_PORT": "29500"})
    assert (layout.master_addr, layout.master_port) == ("head", 29500)
    assert layout.sources["master_addr"] == "MASTER_ADDR"
    assert layout.sources["master_port"] == "MASTER_PORT"


def test_a_malformed_master_port_is_not_papered_over_and_a_bad_nodelist_is_noted():
    layout = layout_of({**SRUN, "SLURM_NODELIST": "gpu[1-", "MASTER_PORT": "http"})
    assert (layout.master_addr, layout.master_port) == (None, None)
    assert any(p.name == "MASTER_PORT" for p in layout.problems)
    assert any("not a hostlist" in note for note in layout.notes)


def test_a_non_numeric_job_id_derives_no_port():
    assert layout_of({**SRUN, "SLURM_JOB_ID": "abc", "SLURM_NODELIST": "a"}).master_port is None
