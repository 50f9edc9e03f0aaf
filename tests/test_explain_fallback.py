"""The keyword fallback: a run that visibly failed with a message no signature knows gets its
most likely category from the taxonomy's words on its error lines; a healthy log whose INFO
lines and warnings use the same words stays clean. Fixtures are written here (not copied)."""

from __future__ import annotations

import pytest

from ncclcheck.explain.engine import SHIPPED, explain
from ncclcheck.explain.fallback import ErrorCues, line_weight

# One error line per cue family, in wordings no signature knows.
CUE_FAMILIES = {
    "infiniband": "ERROR trainer: mlx5_0 port 1 went DOWN, aborting the job",
    "net_plugin": "ERROR trainer: aws-ofi provider could not open an EFA endpoint",
    "shared_memory": "ERROR trainer: /dev/shm holds 64M only, aborting",
    "p2p": "ERROR trainer: NVLink 3 of GPU 2 reports a fatal fault",
    "out_of_memory": "FATAL trainer: OOM while pinning host buffers",
    "name_resolution": "ERROR trainer: gethostbyname(head-node) gave nothing",
    "connection": "ERROR trainer: failed to connect to node2:29500",
    "port_in_use": "ERROR trainer: listener on 29500 found its address in use",
    "cuda": "ERROR trainer: CUDA driver fault on GPU 3 (Xid 79)",
    "version_mismatch": "ERROR trainer: libfoo.so: undefined symbol bar_v2",
    "timeout": "ERROR trainer: watchdog fired after 600 s in all_reduce",
    "rank_mismatch": "ERROR trainer: launcher set WORLD_SIZE 8 for 4 workers",
    "rank_crashed": "ERROR trainer: worker 3 went away on SIGSEGV",
    "duplicate_gpu": "ERROR trainer: ranks 0 and 1 share the same GPU",
    "configuration": "ERROR trainer: NCCL_ALGO=Foo is an invalid value",
    "interface": "ERROR trainer: SOCKET_IFNAME ib9 names nothing here",
}


def _findings(tmp_path, text: str, model: object = SHIPPED) -> list[dict]:
    log = tmp_path / "run.log"
    log.write_text(text)
    return explain([str(log)], model).to_dict()["findings"]


@pytest.mark.parametrize("category", sorted(CUE_FAMILIES))
def test_each_cue_family_names_its_category(tmp_path, category):
    line = CUE_FAMILIES[category]
    # the keyword guess alone (the text model, when confident, reads such a line before it)
    findings = _findings(tmp_path, f"epoch 1 loss 0.3\n{line}\n", model=None)
    assert len(findings) == 1
    root = findings[0]
    assert root["id"] == f"fallback.{category}" and root["category"] == category
    assert root["root_cause"] and root["line"] == 2 and root["text"] == line
    assert root["inferred_from"]["line"] == 2
    assert "inferred from keywords" in root["title"]
    assert "line 2" in root["explanation"] and "keywords" in root["explanation"]
    assert root["fix"]


def test_cue_words_in_info_lines_and_warnings_stay_clean(tmp_path):
    text = "\n".join([
        "node1:11:11 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.0.1<0>",
        "node1:11:11 [0] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v5 symbol.",
        "node1:11:11 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC",
        "node1:11:11 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
        "[W socket.cpp:601] [c10d] The IPv6 network addresses of (node7, 29500) cannot be "
        "retrieved (gai error: -5 - No address associated with hostname).",
        "UserWarning: /dev/shm is small, shared memory may run out",
        "[WARNING] launcher: NCCL_SOCKET_IFNAME is not set, using eth0",
        ">> Train Epoch: [0] Top1 error: 100.0000 Top5 error: 100.0000 max mem: 18134 MB",
        "epoch 1 val_error=0.31 out of memory retries 0",
    ]) + "\n"
    assert _findings(tmp_path, text) == []


def test_a_warning_alone_is_never_a_failure():
    cues = ErrorCues()
    cues.feed("run.log", 1, "x", "node1:1:1 [0] NCCL WARN NET/IB : ibv_open_device failed")
    assert cues.scores and cues.verdict(failed=False) is None  # scored, but no failure line
    assert cues.verdict(failed=True) is None  # a lone warning's cue is below the bar anyway


def test_a_close_call_gives_no_verdict(tmp_path):
    text = "ERROR trainer: /dev/shm full while mlx5_0 port was DOWN\n"
    assert _findings(tmp_path, text) == []


def test_a_recognised_failure_is_never_replaced(tmp_path):
    text = ("ERROR trainer: mlx5_0 port 1 went DOWN\n"
            "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    root = _findings(tmp_path, text)[0]
    assert not root["id"].startswith("fallback.")


def test_a_cue_beats_a_mere_consequence(tmp_path):
    text = ("ERROR trainer: mlx5_0 port 1 went DOWN, aborting the job\n"
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1275, "
            "remote process exited or there was a network error, NCCL version 2.19.3\n")
    findings = _findings(tmp_path, text)
    # the keyword cues (or the text model, which reads the same line) name the category
    assert findings[0]["category"] == "infiniband"
    assert findings[0]["id"] in ("fallback.infiniband", "model.infiniband")
    assert any(f["consequence"] for f in findings[1:])


def test_line_weights_rank_failures_over_warnings_and_info():
    assert line_weight("RuntimeError: something broke") == 2.0
    assert line_weight("node1:1:1 [0] NCCL WARN Call to ibv_reg_mr failed") == 1.0
    assert line_weight("node1:1:1 [0] NCCL INFO NET/IB : Using mlx5_0") == 0.5
    assert line_weight("UserWarning: something failed") == 0.0
    assert line_weight("epoch 1 loss 0.3") == 0.0


@pytest.mark.parametrize("line", [
    "#       size         count    type   redop     time   algbw   busbw  error     time   algbw",
    "Validation: 0 failed batches, 0 skipped",
    "checkpoint upload failed once and was retried successfully",
])
def test_lines_that_report_success_are_not_failure_lines(line):
    """nccl-tests' header names an "error" column; a count of 0 failures or a retry that
    succeeded reports a success: none may open a healthy log to the model's guesses."""
    assert line_weight(line) == 0.0


@pytest.mark.parametrize("line", ["# Out of bounds values : 12 FAILED",
                                  "upload failed after 3 retries"])
def test_a_failure_near_those_words_still_counts(line):
    assert line_weight(line) == 2.0


@pytest.mark.parametrize("line", ["(hang here)", "the job hangs forever at the first barrier",
                                  "rank 3 hung in all_reduce", "training froze after epoch 2",
                                  "work request complete err: status 5 and vendor err 249"])
def test_a_run_said_to_hang_or_a_terse_err_is_a_failure_line(line):
    """A hang has no error line of its own: whoever watched it says so in the log."""
    assert line_weight(line) == 2.0


@pytest.mark.parametrize("line", [
    "Guessing device ID based on global rank. This can cause a hang if the mapping is wrong",
    "huggingface/tokenizers: Disabling parallelism to avoid deadlocks...",
    "changing the hanger", "err: 0", "errno 5"])
def test_advice_about_hangs_and_numbered_errs_are_not_failure_lines(line):
    assert line_weight(line) == 0.0


def test_the_configured_timeout_torch_prints_in_every_work_is_not_a_timeout_cue():
    from ncclcheck.explain.fallback import line_cues
    from ncclcheck.model import Category
    work = ("[rank1]:[E415 21:17:08.99 ProcessGroupNCCL.cpp:552] [Rank 1] Collective "
            "WorkNCCL(SeqNum=335, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
            "raised the following async exception: a peer went away")
    assert Category.TIMEOUT not in line_cues(work)
    assert Category.TIMEOUT in line_cues(work.replace("raised", "ran for 600083 ms and timed out"))


@pytest.mark.parametrize("line,category", [
    ("FATAL trainer: ENOMEM while pinning host buffers", "out_of_memory"),
    ("ERROR trainer: ECONNREFUSED from node2:29500", "connection"),
    ("ERROR trainer: listener on 29500 got EADDRINUSE", "port_in_use"),
])
def test_an_enumeration_s_name_is_read_by_the_component_that_owns_it(tmp_path, line, category):
    """An errno name is the C library's word, read from its own table before any keyword."""
    findings = _findings(tmp_path, f"epoch 1 loss 0.3\n{line}\n", model=None)
    assert [f["id"] for f in findings] == [f"component.{category}"]
    assert findings[0]["facts"]["table"] == "errno" and findings[0]["line"] == 2
