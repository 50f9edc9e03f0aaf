"""Engine rules the world's logs needed: the catch-all is tried last, mpirun's tagged output is
read, and harmless IPv6 attempts stay clean. Fixtures are written here (not copied)."""

from __future__ import annotations

import pytest

from ncclcheck.catalogue import load
from ncclcheck.explain.engine import explain
from ncclcheck.explain.lines import parse_line
from ncclcheck.explain.prepared import prepared

CATALOGUE = load()


def _root(tmp_path, text: str) -> dict | None:
    log = tmp_path / "run.log"
    log.write_text(text)
    findings = explain([str(log)]).to_dict()["findings"]
    return findings[0] if findings else None


def test_a_specific_signature_claims_its_exception_line_wherever_the_catch_all_sits():
    specific = CATALOGUE.signature("python.address_in_use")
    rest = [s for s in CATALOGUE.signatures if s.id != specific.id]
    for order in ([specific, *rest], [*rest, specific]):
        found = prepared().matcher(order).match("RuntimeError: Address already in use")
        assert found is not None and found[0].id == "python.address_in_use"


@pytest.mark.parametrize("line", [
    "ValueError: Only able to place 0 replicas, but 2 replicas were requested.",
    "AssertionError: world_size (6) must be divisible by tensor_parallel_size (4)",
    "RuntimeError: Expected all tensors to be on the same device, but found at least two "
    "devices, cuda:0 and cuda:2!",
    "lightning.fabric.utilities.exceptions.MisconfigurationException: num_nodes (2) x devices "
    "(4) does not match the 4 processes the launcher started",
])
def test_an_exception_about_the_jobs_ranks_or_devices_is_a_rank_mismatch(tmp_path, line):
    root = _root(tmp_path, "epoch 0\n" + line + "\n")
    assert root["id"] == "python.exception_about_ranks", root["id"]
    assert root["category"] == "rank_mismatch"


@pytest.mark.parametrize("line", [
    "ValueError: batch has 0 samples on rank 1",            # one rank named: user code
    "NameError: name 'num_processes' is not defined",       # a bug in the script
    "KeyError: 'gpus'",
])
def test_other_exceptions_stay_a_crashed_rank(tmp_path, line):
    root = _root(tmp_path, line + "\n")
    assert root["id"] == "python.uncaught_exception" and root["category"] == "rank_crashed"


def test_a_known_message_about_devices_keeps_its_own_signature(tmp_path):
    root = _root(tmp_path, "RuntimeError: CUDA error: all CUDA-capable devices are busy or "
                           "unavailable\n")
    assert root["id"] != "python.exception_about_ranks" and root["category"] == "cuda"


def test_mpirun_tagged_output_gives_the_rank(tmp_path):
    info = parse_line("[1,3]<stderr>:Horovod has been shut down. This was caused by an "
                      "exception on one of the ranks or an attempt to allreduce")
    assert info.rank == 3 and info.message.startswith("Horovod has been shut down")
    root = _root(tmp_path, "[1,2]<stdout>:epoch 3\n[1,3]<stderr>:" + info.message + "\n")
    assert root["id"] == "horovod.shut_down" and root["rank"] == 3


def test_an_ipv6_attempt_without_ipv6_is_not_a_finding(tmp_path):
    # c10d tries IPv6 first on hosts without it (errno 97), then succeeds over IPv4.
    text = ("[W socket.cpp:558] [c10d] The client socket cannot be initialized to connect to "
            "[localhost]:29500 (errno: 97 - Address family not supported by protocol).\n"
            "epoch 1 loss 0.3\n")
    assert _root(tmp_path, text) is None
    refused = text.replace("97 - Address family not supported by protocol",
                           "111 - Connection refused")
    assert _root(tmp_path, refused)["id"] == "torch.store_connect_refused"


def test_gloo_names_an_unresolvable_host_apart_from_a_missing_interface(tmp_path):
    host = ("RuntimeError: [enforce fail at gloo/transport/tcp/device.cc:127] rp != nullptr. "
            "Unable to find address for: dgx-1.ai\n")
    iface = ("RuntimeError: [enforce fail at gloo/transport/tcp/device.cc:83] ifa != nullptr. "
             "Unable to find address for: eth7\n")
    assert _root(tmp_path, host)["category"] == "name_resolution"
    assert _root(tmp_path, iface)["category"] == "interface"


def test_a_gai_error_only_for_missing_names_not_for_a_missing_family(tmp_path):
    line = ("[W socket.cpp:601] [c10d] The IPv6 network addresses of (node7, 29500) cannot be "
            "retrieved (gai error: {code} - {text}).\n")
    found = _root(tmp_path, line.format(code=-3, text="Temporary failure in name resolution"))
    assert found["id"] == "torch.hostname_unresolved" and found["facts"]["host"] == "node7"
    assert _root(tmp_path, line.format(code=-5, text="No address associated with hostname")) \
        is None


def test_older_lightning_banner_wording_is_read(tmp_path):
    root = _root(tmp_path, "initializing ddp: GLOBAL_RANK: 6, MEMBER: 7/4\n")
    assert root["id"] == "lightning.member_overflow"


def test_repeated_messages_are_matched_once_and_facts_are_not_shared():
    matcher = prepared().matcher(CATALOGUE.signatures)
    line = "node1:1:1 [0] init.cc:1872 NCCL WARN Invalid rank requested : 6/4"
    message = parse_line(line).message
    first = matcher.match(message)
    first[1]["rank"] = 99  # the engine adds facts to a hit; the next hit must not see them
    again = matcher.match(message)
    assert again[0].id == "nccl.invalid_rank" and again[1]["rank"] == 6
    assert message in matcher._memo


def test_a_crash_before_a_store_barrier_timeout_is_the_root_cause(tmp_path):
    root = _root(tmp_path, (
        "FileNotFoundError: Caught FileNotFoundError in DataLoader worker process 0.\n"
        "RuntimeError: Timed out initializing process group in store based barrier on rank: 1, "
        "for key: store_based_barrier_key:1 (world_size=2, worker_count=4, timeout=0:30:00)\n"))
    assert root["id"] == "python.uncaught_exception" and root["category"] == "rank_crashed"
    alone = _root(tmp_path, "RuntimeError: Timed out initializing process group in store "
                            "based barrier on rank: 1, for key: store_based_barrier_key:1\n")
    assert alone["id"] == "torch.store_barrier_timeout" and alone["category"] == "timeout"


def test_a_peer_that_closed_its_socket_is_a_crashed_rank(tmp_path):
    gloo = _root(tmp_path, "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598]"
                           " Connection closed by peer [10.0.0.7]:12717\n")
    assert gloo["id"] == "gloo.connection_closed" and gloo["category"] == "rank_crashed"
    nccl = _root(tmp_path, (
        "n1:1:2 [1] misc/socket.cc:518 NCCL WARN Net : Call to recv from 10.0.0.2<5835> "
        "failed : Broken pipe\n"
        "n1:1:2 [1] proxy.cc:1119 NCCL WARN [Proxy Service 9] Failed to execute operation "
        "Connect from rank 9, retcode 6\n"
        "n1:1:3 [1] misc/socket.cc:538 NCCL WARN Net : Connection closed by remote peer n2<47861>\n"))
    assert nccl["id"] == "nccl.connection_closed" and nccl["category"] == "rank_crashed"


def test_a_master_name_resolved_to_another_name_is_name_resolution(tmp_path):
    head = "RuntimeError: The client socket has failed to connect to any network address of "
    other = _root(tmp_path, head + "(node7, 29500). The client socket has failed to connect to "
                                   "node7.mgmt:29500 (errno: 113 - No route to host).\n")
    assert other["id"] == "torch.store_address_resolved_elsewhere"
    assert "node7.mgmt" in other["explanation"]
    same = _root(tmp_path, head + "(node7, 29500). The client socket has failed to connect to "
                                  "[NODE7]:29500 (errno: 113 - No route to host).\n")
    assert same["id"] == "torch.store_connect_failed"
    refused = _root(tmp_path, head + "(node7, 29500). The client socket has failed to connect "
                                     "to node7.mgmt:29500 (errno: 111 - Connection refused).\n")
    assert refused["id"] == "torch.store_connect_failed"


def test_the_older_tcpstore_connect_timeout_is_a_connection_failure(tmp_path):
    root = _root(tmp_path, "RuntimeError: connect() timed out. Original timeout was 900000 ms.\n")
    assert root["id"] == "torch.store_connect_timeout" and root["facts"]["timeout_ms"] == 900000


def test_a_refused_socket_beats_the_catch_all_but_a_logged_retry_is_clean(tmp_path):
    root = _root(tmp_path, "urllib3.exceptions.NewConnectionError: <conn>: Failed\n"
                           "ConnectionRefusedError: [Errno 111] Connection refused\n")
    assert root["id"] == "python.socket_connect_failed" and root["category"] == "connection"
    assert _root(tmp_path, "WARNING:urllib3.connectionpool:Retrying after ConnectionError: "
                           "read timed out (attempt 3)\n") is None


@pytest.mark.parametrize("peer", ["172.17.0.3<4001>", "fe80::e866:19ff:fe1e:a688%ip6tnl0<46681>",
                                  "127.0.1.1<4001>", "169.254.3.4<4001>"])
def test_a_peer_sought_at_a_host_only_address_is_an_interface_problem(tmp_path, peer):
    line = (f"node1:97:221 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: "
            f"Connect to {peer} failed : Connection timed out")
    assert _root(tmp_path, line)["id"] == "net.peer_at_host_only_address"
    routable = line.replace(peer, "10.1.2.3<4001>")
    assert _root(tmp_path, routable)["category"] == "connection"
