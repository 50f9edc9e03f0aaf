"""GPU and CUDA readiness. The judgements are pure and tested with values from real GPUs
(an A10G is sm_86, a V100 sm_70, a P100 sm_60); on this CPU-only machine the GPU checks
themselves must skip and say why. Tests that need a GPU are marked ``gpu``."""

from __future__ import annotations

import pytest

from ncclcheck.model import Status
from ncclcheck.ncclib.gpu import arch_supported, driver_supports, torch_build_without_cuda
from ncclcheck.probes.nccl.gpu import gpu_checks, judge_visible_devices
from ncclcheck.probes.nccl.bootstrap import check_bootstrap
from ncclcheck.ncclib.loader import BootstrapChoice, LibraryAnswer
from ncclcheck.ncclib.version import cuda_version_tuple

ARCHS_CU121 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]


@pytest.mark.parametrize("value,ok", [("0,1,2,3", True), ("GPU-8f6e2a10-1b2c-4d5e-9f00-123456789abc", True),
                                      ("", True), ("-1", True), ("0,,1", False), ("0,1,0", False),
                                      ("0,gpu1", False), ("1, 1", False)])
def test_visible_devices(value, ok):
    finding = judge_visible_devices(value)
    assert finding.ok is ok, finding.summary
    if not ok:
        assert finding.fix and finding.category.value == "duplicate_gpu"


def test_visible_devices_stops_at_invalid_entry():
    finding = judge_visible_devices("0,1,x,3")
    assert "only 2 device(s)" in finding.summary


def test_driver_against_cuda_build():
    assert cuda_version_tuple(12040) == (12, 4)
    assert driver_supports("12.1", 12040) and driver_supports("11.8", 12020)
    assert not driver_supports("12.4", 11080)


@pytest.mark.parametrize("capability,archs,ok", [
    ((8, 6), ARCHS_CU121, True), ((8, 9), ["sm_80", "sm_86"], True), ((9, 0), ["sm_80"], False),
    ((9, 0), ["sm_80", "compute_80"], True), ((6, 0), ["sm_70", "sm_80"], False),
    ((7, 5), ["sm_70"], True), ((10, 0), ARCHS_CU121, False)])
def test_arch_list(capability, archs, ok):
    assert arch_supported(capability, archs) is ok


def test_cpu_torch_on_a_host_with_an_nvidia_driver_fails():
    """The driver is replaced (this machine has none); torch here really is a CPU-only build."""
    results = {r.id: r for r in gpu_checks({}, 0, 5, driver_version=lambda: 12040)}
    driver = results["nccl.cuda_driver"]
    assert driver.status == Status.FAIL and driver.category.value == "cuda"
    assert "CPU-only" in driver.summary and "CUDA 12.4" in driver.summary
    assert all(r.status == Status.SKIP for i, r in results.items() if i != "nccl.cuda_driver")


def test_without_a_gpu_every_gpu_check_skips_with_a_reason():
    results = gpu_checks({}, 0, 5, driver_version=lambda: None)
    assert {r.id for r in results} == {"nccl.cuda_driver", "nccl.gpu_visible", "nccl.gpu_arch",
                                       "nccl.gpu_bf16", "nccl.gpu_compute_mode"}
    for result in results:
        assert result.status == Status.SKIP
        assert "CPU-only" in result.summary or "driver" in result.summary or "GPU" in result.summary


def test_bad_visible_devices_fails_even_without_a_gpu():
    results = {r.id: r for r in gpu_checks({"CUDA_VISIBLE_DEVICES": "0,0"}, 0, 5)}
    assert results["nccl.cuda_visible_devices"].status == Status.FAIL


def _answer(interface: str | None, no_interface: bool = False) -> LibraryAnswer:
    answer = LibraryAnswer("libnccl.so.2", "ok", 0.1)
    answer.bootstrap = BootstrapChoice(interface, "10.0.0.5" if interface else None, no_interface,
                                       0 if interface else 5, "")
    return answer


def test_bootstrap_disagreeing_with_the_prediction_warns(monkeypatch):
    """The comparison with the network probe's prediction, with the prediction replaced."""
    result = check_bootstrap(_answer("eth0"), {}, {"eth0": ["10.0.0.5"], "eth1": ["10.1.0.5"]},
                             predicted=("eth1", True))
    assert result.status == Status.WARN and "predicted eth1" in result.summary
    assert result.category.value == "interface"
    assert check_bootstrap(_answer("eth0"), {}, {}, predicted=("eth0", True)).status == Status.PASS
    assert check_bootstrap(_answer("eth0"), {}, {}, predicted=(None, False)).status == Status.PASS


@pytest.mark.gpu
@pytest.mark.skipif(torch_build_without_cuda() is not None, reason="needs a CUDA build of torch")
def test_gpu_checks_on_a_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    results = {r.id: r for r in gpu_checks({}, 0, 10)}
    assert results["nccl.cuda_driver"].status == Status.PASS
    assert results["nccl.gpu_visible"].status == Status.PASS


def test_torch_nccl_version_comparison(monkeypatch):
    """torch here is a CPU build, which has no torch.cuda.nccl; a CUDA build's answer is stood in
    by a minimal module (the comparison is what is tested, not torch)."""
    import sys
    import types

    import ncclcheck.probes.nccl.torch_version as nccl
    from ncclcheck.ncclib.version import NcclVersion

    fake = types.ModuleType("torch")
    fake.__version__ = "2.4.0+cu121"
    fake.version = types.SimpleNamespace(cuda="12.1")
    fake.cuda = types.SimpleNamespace(nccl=types.SimpleNamespace(version=lambda: (2, 20, 5)))
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr(nccl, "torch_build_without_cuda", lambda: None)
    answer = LibraryAnswer("libnccl.so.2", "ok", 0.1, version=NcclVersion(2, 20, 5))
    assert nccl.check_torch_nccl(answer).status == Status.PASS
    answer.version = NcclVersion(2, 21, 5)
    differs = nccl.check_torch_nccl(answer)
    assert differs.status == Status.WARN and differs.category.value == "version_mismatch"
    assert "2.20.5" in differs.summary and "2.21.5" in differs.summary


def test_cpu_torch_has_no_nccl_to_compare():
    from ncclcheck.probes.nccl.torch_version import check_torch_nccl
    result = check_torch_nccl(None)
    assert result.status == Status.SKIP and "CPU-only" in result.summary
