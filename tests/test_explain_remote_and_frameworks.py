"""Remote shells, socket errors and LLM frameworks: other versions' wordings reach the same
signature, and the category follows what the message means.

Each line is the library's own text (a filled format string) in a version or variant other
than the catalogue example: OpenSSH before 8.0 (ssh_exchange_identification), dash and zsh next
to bash, Python 2's -m error next to Python 3's, Gloo's connect errors before and after its
2023 rewrite, Megatron-LM's and ColossalAI's layout checks, older vLLM asserts. Fixtures are
written here, not copied.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from explained import ids_of as _ids

WORDINGS = [
    # OpenSSH: resolution is name_resolution, a closed or reset handshake is connection
    ("pdsh@node1: worker-3: ssh: Could not resolve hostname worker-3: Temporary failure in "
     "name resolution", "ssh.hostname_unresolved"),
    ("ssh_exchange_identification: Connection closed by remote host", "ssh.handshake_failed"),
    ("ssh_exchange_identification: read: Connection reset by peer", "ssh.handshake_failed"),
    ("Connection closed by 10.0.0.12 port 2222", "ssh.handshake_failed"),
    ("Connection timed out during banner exchange", "ssh.handshake_failed"),
    ("@         WARNING: UNPROTECTED PRIVATE KEY FILE!          @", "ssh.key_permissions"),
    ('Load key "/root/.ssh/id_rsa": bad permissions', "ssh.key_permissions"),
    # pdsh's rsh module
    ("pdsh@node1: worker-2: connect: No route to host", "pdsh.connect_failed"),
    ("pdsh@node1: worker-2: rcmd: socket: all ports in use", "pdsh.rcmd_not_permitted"),
    # the remote shell without the launcher's environment: bash 5.1+, bash < 5.1, dash, zsh
    ("bash: orted: command not found", "shell.launcher_command_not_found"),
    ("bash: line 1: prted: command not found", "shell.launcher_command_not_found"),
    ("sh: 1: deepspeed: not found", "shell.launcher_command_not_found"),
    ("zsh:1: command not found: torchrun", "shell.launcher_command_not_found"),
    ("bash: /opt/conda/bin/python: No such file or directory",
     "shell.launcher_command_not_found"),
    ("orted: error while loading shared libraries: libopen-rte.so.40: cannot open shared "
     "object file: No such file or directory", "shell.launcher_command_not_found"),
    ('The rsh PLS component was not able to find the executable "orted" in',
     "shell.launcher_command_not_found"),
    ("worker-1: /usr/bin/python3: Error while finding module specification for "
     "'deepspeed.launcher.launch' (ModuleNotFoundError: No module named 'deepspeed')",
     "shell.python_module_missing"),
    ("host-1: /usr/bin/python: No module named deepspeed.pt", "shell.python_module_missing"),
    # sockets: torch 1.x c10d, Python, Gloo old and new
    ("RuntimeError: Connection refused", "torch.legacy_socket_error"),
    ("RuntimeError: No route to host", "torch.legacy_socket_error"),
    ("RuntimeError: Connection reset by peer", "python.connection_reset"),
    ("BrokenPipeError: [Errno 32] Broken pipe", "python.connection_reset"),
    ("[W socket.cpp:663] [c10d] The server socket has failed to bind to 10.0.0.99:29500 "
     "(errno: 99 - Cannot assign requested address).", "python.cannot_assign_address"),
    ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:152] timed out "
     "connecting: SO_ERROR: Connection refused, remote=[10.1.0.12]:47211",
     "gloo.connect_failed"),
    # model-parallel layouts: Megatron-LM 2021-2025, ColossalAI, TensorRT-LLM, vLLM
    ("AssertionError: world size (6) is not divisible by tensor model parallel size (4)",
     "parallel.world_size_not_divisible"),
    ("RuntimeError: world_size (12) is not divisible by 8", "parallel.world_size_not_divisible"),
    ("AssertionError: World size 6 is not divisible by tp_size 4 * pp_size 1",
     "parallel.world_size_not_divisible"),
    ("AssertionError: Expected the world size 6 to be equal to data parallel size (1) * "
     "pipeline parallel size (2) * tensor parallel size (4)",
     "parallel.world_size_not_divisible"),
    ("ValueError: world_size must equal to tp_size * pp_size * cp_size, but got 4 != 2 * 1 * 1.",
     "parallel.world_size_not_divisible"),
    ("[TensorRT-LLM][ERROR] Assertion failed: mpiSize == tp * pp "
     "(/src/cpp/tensorrt_llm/runtime/worldConfig.cpp:99)", "trtllm.engine_world_size"),
    ("ValueError: Total number of hidden layers (30) must be divisible by pipeline parallel "
     "size (4).", "parallel.heads_not_divisible"),
    ("AssertionError: please set tensor_parallel_size to less than max local gpu count",
     "vllm.not_enough_gpus"),
    ("RuntimeError: please set tensor_parallel_size (4) to less than max local gpu count (2)",
     "vllm.not_enough_gpus"),
    ("ValueError: The number of required GPUs exceeds the total number of available GPUs in "
     "the cluster.", "vllm.not_enough_gpus"),
    ("Failed: Cuda error csrc/custom_all_reduce.cuh:455 'invalid argument'",
     "vllm.custom_allreduce_cuda_error"),
    ("[2025-01-20 19:10:07] Received sigquit from a child process. It usually means the child "
     "failed.", "llmserve.worker_failed"),
    ("ValueError: You can't train a model that has been loaded in 8-bit precision on multiple "
     "devices in any distributed mode.", "accelerate.device_map_distributed"),
]


@pytest.mark.parametrize("text,expected", WORDINGS,
                         ids=[w[1] + str(i) for i, w in enumerate(WORDINGS)])
def test_other_wording_gives_the_same_signature(tmp_path: Path, text: str, expected: str):
    found = _ids(tmp_path, text, lines_only=True)
    assert found and found[0] == expected, found


def test_pdsh_exit_255_is_ssh_other_codes_are_the_remote_command(tmp_path: Path):
    # ssh exits 255 when it fails itself; any other code is the remote command's own.
    assert _ids(tmp_path, "pdsh@n1: w1: ssh exited with exit code 255")[0] == "launcher.ssh_failed"
    assert _ids(tmp_path, "pdsh@n1: w1: ssh exited with exit code 1")[0] == \
        "pdsh.remote_command_failed"


def test_a_remote_shell_outside_the_environment_beats_its_exit_code(tmp_path: Path):
    text = ("w1: /usr/bin/python: No module named deepspeed.launcher\n"
            "pdsh@n1: w1: ssh exited with exit code 1")
    assert _ids(tmp_path, text)[:2] == ["shell.python_module_missing",
                                        "pdsh.remote_command_failed"]


def test_an_unresolvable_host_beats_the_launchers_ssh_summary(tmp_path: Path):
    # DeepSpeed's ssh check and mpirun's daemon failure both follow the lookup that failed.
    text = ("RuntimeError: Using hostfile at /job/hostfile but host=worker-0.job was not "
            "reachable via ssh. If you are running with a single node please remove "
            "/job/hostfile or setup passwordless ssh.\n"
            "ssh: Could not resolve hostname worker-0.job: Name or service not known\n"
            "ORTE was unable to reliably start one or more daemons.")
    found = _ids(tmp_path, text)
    assert found[0] == "ssh.hostname_unresolved"
    assert "launcher.ssh_failed" in found and "mpi.daemon_start_failed" in found


def test_a_workers_own_error_beats_the_servers_start_up_summary(tmp_path: Path):
    text = ("(VllmWorker rank=1) ERROR: Failed: Cuda error csrc/custom_all_reduce.cuh:307 "
            "'peer access is not supported between these two devices'\n"
            "RuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {}")
    found = _ids(tmp_path, text)
    assert found[0] == "vllm.custom_allreduce_cuda_error" and "llmserve.worker_failed" in found


def test_a_loopback_peer_keeps_its_own_reading_over_a_plain_gloo_connect_error(tmp_path: Path):
    line = ("RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:769] "
            "connect [127.0.1.1]:21701: Connection refused")
    assert _ids(tmp_path, line)[0] == "gloo.loopback_peer"
