"""explain's known_versions reader: a release a log names that the known-issues table lists
gets a note (category null) with its source and fixed release; it never adds a finding, so a
clean log stays clean. Log lines are real lines of the corpus, or NCCL's and the plugin's own
formats with the version changed."""

from __future__ import annotations

from pathlib import Path

from ncclcheck.explain.engine import explain

CORPUS = Path(__file__).parent / "data" / "logs" / "world" / "dev"
HEALTHY_2_26_2 = CORPUS / "c35-013-vllm-dp-nccl-sanity-test-healthy.log"


def notes(path: Path) -> dict[str, dict]:
    return {n["id"]: n for n in explain([str(path)]).to_dict()["notes"]}


def test_a_healthy_log_naming_an_affected_nccl_gets_a_note_and_no_finding():
    result = explain([str(HEALTHY_2_26_2)]).to_dict()
    assert all(f["category"] is None for f in result["findings"])
    assert all(h["category"] is None for h in result["hypotheses"])
    note = {n["id"]: n for n in result["notes"]}["known_issue.nccl.ras_report_race"]
    assert note["category"] is None
    assert "names nccl 2.26.2" in note["text"] and "fixed in 2.27.3" in note["text"]
    assert "https://github.com/NVIDIA/nccl/issues/1669" in note["text"]
    assert "NCCL_RAS_ENABLE=0" in note["text"]


def test_the_torch_error_text_names_the_version_too(tmp_path):
    log = tmp_path / "rank0.log"
    log.write_text(
        "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/"
        "c10d/NCCLUtils.cpp:77, unhandled cuda error (run with NCCL_DEBUG=INFO for details), "
        "NCCL version 2.28.3\n")
    assert "known_issue.nccl.inprocess_restart_segfault" in notes(log)
    text = notes(log)["known_issue.nccl.inprocess_restart_segfault"]["text"]
    assert "only with NVIDIA Resiliency Extension's in-process restart" in text


def test_a_fixed_release_and_an_unknown_one_get_no_note(tmp_path):
    log = tmp_path / "rank0.log"
    log.write_text("node1:2345:2345 [0] NCCL INFO NCCL version 2.32.3+cuda12.9\n"
                   "node1:2345:2345 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.20.0\n")
    assert not [n for n in notes(log) if n.startswith("known_issue.")]


def test_the_plugin_banner_names_its_release(tmp_path):
    log = tmp_path / "rank0.log"
    log.write_text("node1:2345:2345 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
                   "node1:2345:2345 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.12.0-aws\n")
    found = notes(log)
    assert "known_issue.aws_ofi_nccl.vf_sorting_efa_1_12_0" in found
    assert "fixed in 1.12.1" in found["known_issue.aws_ofi_nccl.vf_sorting_efa_1_12_0"]["text"]
