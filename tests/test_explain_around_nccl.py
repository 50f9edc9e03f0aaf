"""The libraries around NCCL word one failure differently across versions; each wording reaches
the same signature.

Each line is the library's own text (filled format string) in a version other than the one the
catalogue example shows: PRRTE next to ORTE, Lightning 1.x next to 2.x, torch's glog-style
watchdog lines of 2.2 and 2.4+, Python < 3.11 and >= 3.11 spellings of a signal, Slurm's
cgroup and accounting memory messages. Fixtures are written here, not copied.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from explained import ids_of as _ids

WORDINGS = [
    # c10d: the store's server vanished, seen from the socket layer and from ncclUniqueId
    ("torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely "
     "closed. Did the remote server shutdown or crash?", "torch.store_server_gone"),
    ("[rank5]: torch.distributed.DistBackendError: [5] is setting up NCCL communicator and "
     "retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but "
     "store->get('0') got error: Failed to recv, got 0 bytes. Connection was likely closed. "
     "Did the remote server shutdown or crash?", "torch.store_server_gone"),
    # ProcessGroupNCCL watchdog wordings: 2.2 ("Exception detected by watchdog"), 2.4+
    # ("either an error or timeout"), the dump signal relayed from another rank
    ("[rank3]:[E227 16:30:43.526290891 ProcessGroupNCCL.cpp:1785] [PG ID 2 PG GUID 3 Rank 3] "
     "Exception (either an error or timeout) detected by watchdog at work: 32, last enqueued "
     "NCCL work: 32, last completed NCCL work: 31.", "torch.nccl_work_timeout"),
    ("[E ProcessGroupNCCL.cpp:1182] [Rank 5] Exception detected by watchdog at work: 18421, "
     "last enqueued NCCL work: 18421, last completed NCCL work: 18420.",
     "torch.nccl_work_timeout"),
    ("[rank4]:[E1203 15:37:17.178360488 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID "
     "0(default_pg) Rank 4] Received a dump signal due to a collective timeout from  rank 7 and "
     "we will try our best to dump the debug info. Last enqueued NCCL work: 56118, last "
     "completed NCCL work: 56118.", "torch.nccl_work_timeout"),
    ("[rank0]:[E1111 17:18:53.531 ProcessGroupNCCL.cpp:1295] [PG 0 Rank 0] Heartbeat monitor "
     "timed out! Process will be terminated after dumping debug info. workMetaList_.size()=2",
     "torch.watchdog_stuck"),
    # torchrun's agent: Python < 3.11 prints the enum, 3.11+ the number; the exception itself
    ("[2026-06-11 11:44:19,001] torch.distributed.elastic.agent.server.api: [WARNING] "
     "Received 15 death signal, shutting down workers", "torchrun.agent_signal"),
    ("torch.distributed.elastic.multiprocessing.api.SignalException: Process 41777 got "
     "signal: 15", "torchrun.agent_signal"),
    # Lightning 1.4, 1.6 and fabric wordings
    ("pytorch_lightning.utilities.exceptions.MisconfigurationException: GPUAccelerator can "
     "not run on your system since the accelerator is not available. The following "
     "accelerator(s) is available and can be passed into `accelerator` argument of `Trainer`: "
     "['cpu'].", "lightning.accelerator_unavailable"),
    ("pytorch_lightning.utilities.exceptions.MisconfigurationException: GPUs requested but "
     "none are available.", "lightning.accelerator_unavailable"),
    ("pytorch_lightning.utilities.exceptions.MisconfigurationException: "
     "`Trainer(strategy='ddp_spawn')` or `Trainer(accelerator='ddp_spawn')` is not compatible "
     "with an interactive environment.", "lightning.interactive_strategy"),
    ("pytorch_lightning.utilities.exceptions.MisconfigurationException: Selected distributed "
     "backend DistributedType.DDP is not compatible with an interactive environment.",
     "lightning.interactive_strategy"),
    ("RuntimeError: Lightning can't create new processes if CUDA is already initialized. Did "
     "you manually call `torch.cuda.*` functions, have moved the model to the device, or "
     "allocated memory on the GPU any other way?", "torch.cuda_forked"),
    # DeepSpeed hostfile selections and Horovod's copy of mpirun's exit summary
    ("ValueError: Hostname 'worker-3' not found in hostfile", "deepspeed.hostfile_invalid"),
    ("ValueError: No slot '7' specified on host 'worker-1'", "deepspeed.hostfile_invalid"),
    ("RuntimeError: Horovod detected that one or more processes exited with non-zero status, "
     "thus causing the job to be terminated. The first process to do so was:",
     "mpi.process_exit_nonzero"),
    # Open MPI 5 (PRRTE) next to ORTE
    ("PRTE was unable to reliably start one or more daemons.", "mpi.daemon_start_failed"),
    ("An PRTE daemon has unexpectedly failed after launch and before",
     "mpi.daemon_start_failed"),
    ("PRTE has lost communication with a remote daemon.", "mpi.daemon_lost"),
    ("A daemon was unable to complete a TCP connection", "mpi.tcp_connect_failed"),
    ("prterun detected that one or more processes exited with non-zero status,",
     "mpi.process_exit_nonzero"),
    ("prterun has detected an attempt to run as root.", "mpi.run_as_root"),
    ("=   KILLED BY SIGNAL: 9 (Killed)", "mpich.bad_termination"),
    # Slurm: accounting (jobacct_gather) and cgroup wordings
    ("slurmstepd: error: Exceeded job memory limit", "slurm.memory_limit"),
    ("srun: error: Unable to create step for job 88: Requested node configuration is not "
     "available", "slurm.step_create_failed"),
    # CUDA, older torch (THC) wordings
    ("THCudaCheck FAIL file=/pytorch/aten/src/THC/THCCachingHostAllocator.cpp line=278 "
     "error=2 : out of memory", "cuda.legacy_out_of_memory"),
    ("RuntimeError: cuda runtime error (59) : device-side assert triggered at "
     "/pytorch/aten/src/THC/generic/THCTensorMath.cu:26", "cuda.device_side_assert"),
    ("RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable",
     "cuda.devices_busy_legacy"),
    # Kubernetes: the pod status as JSON
    ('"lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}',
     "kubernetes.oom_killed"),
    ("  Warning  PyTorchJobFailed  2m  pytorchjob-controller  PyTorchJob default/bert is "
     "failed because 1 Worker replica(s) failed.", "kubernetes.job_replica_failed"),
]


@pytest.mark.parametrize("text,expected", WORDINGS,
                         ids=[w[1] + str(i) for i, w in enumerate(WORDINGS)])
def test_other_wording_gives_the_same_signature(tmp_path: Path, text: str, expected: str):
    found = _ids(tmp_path, text)
    # A launcher's report of a SIGKILL is read for its cause: the host's memory, inferred from
    # that same line, stands first (signals.py); the report is still found.
    inferred = "host.killed_by_sigkill" if "SIGNAL: 9" in text else None
    assert found and found[0] in (expected, inferred) and expected in found, found


def test_a_store_timeout_while_fetching_the_nccl_id_stays_a_timeout(tmp_path: Path):
    # Only a vanished server (reset, closed) means rank 0 is gone; a timeout means it is late.
    line = ("torch.distributed.DistBackendError: [1] is setting up NCCL communicator and "
            "retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but "
            "store->get('0') got error: Socket Timeout")
    assert _ids(tmp_path, line)[0] == "torch.store_wait_timeout"


def test_rank_zeros_own_failure_beats_the_store_that_went_away_with_it(tmp_path: Path):
    text = ("[rank1]: torch.distributed.DistBackendError: [1] is setting up NCCL communicator "
            "and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but "
            "store->get('0') got error: Connection reset by peer\n"
            "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
    found = _ids(tmp_path, text)
    assert found[0] == "cuda.out_of_memory" and "torch.store_server_gone" in found


def test_a_spawned_worker_signal_is_told_apart_from_its_exit_code(tmp_path: Path):
    signal = "ProcessExitedException: process 3 terminated with signal SIGSEGV"
    code = "ProcessExitedException: process 3 terminated with exit code 1"
    assert _ids(tmp_path, signal)[0] == "torch.spawn_signal"
    assert _ids(tmp_path, code)[0] == "torch.spawn_exit"


def test_deepspeeds_sigkill_keeps_its_own_oom_reading(tmp_path: Path):
    # -9 from launch.py is read as the OOM killer (deepspeed.worker_sigkill), other codes as a
    # worker that failed.
    line = ("[2023-11-13 16:59:55,650] [ERROR] [launch.py:321:sigkill_handler] ['python', "
            "'-u', 'train.py', '--local_rank=1'] exits with return code = {code}")
    assert _ids(tmp_path, line.format(code=-9))[0] == "deepspeed.worker_sigkill"
    assert _ids(tmp_path, line.format(code=-11))[0] == "deepspeed.worker_exit"


def test_a_preemption_is_not_read_as_a_failure_of_the_job(tmp_path: Path):
    line = ("slurmstepd: error: *** STEP 1234.0 ON node1 CANCELLED AT 2026-06-11T11:44:19 DUE "
            "TO PREEMPTION ***")
    assert _ids(tmp_path, line)[0] == "slurm.preempted"
