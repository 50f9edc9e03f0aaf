"""Plugin discovery and API-version judgement: tiny plugins gcc builds here (tests/plugins/
plugin.c) exporting the symbols of different plugin API versions, judged against the versions
the real libnccl of the nvidia-nccl-cu12 wheel asks for."""

from __future__ import annotations

import pytest

from ncclcheck.model import Status
from ncclcheck.ncclib.discovery import discover
from ncclcheck.ncclib.plugins import (FoundPlugin, candidate_names, find_plugins, judge, kind,
                                      supported_versions)
from ncclcheck.probes.nccl.plugins import check_net, check_plugin
from plugins.build import gcc


@pytest.fixture(scope="module")
def libnccl() -> str:
    found = discover({}, cache={})
    assert found.resolution.found, "the nvidia-nccl-cu12 wheel must be installed"
    return found.resolution.found


@pytest.fixture(scope="module")
def supported(libnccl):
    return supported_versions(libnccl)


def test_supported_versions_come_from_the_real_library(supported):
    net = supported["ncclNetPlugin"]
    assert net == sorted(net) and len(net) >= 3 and net == list(range(net[0], net[-1] + 1))
    for family in ("ncclCollNetPlugin", "ncclTunerPlugin", "ncclProfiler"):
        assert supported[family], family


def search(env, libnccl, plugin_kind="net"):
    return find_plugins(kind(plugin_kind), env, libnccl, {})


def test_supported_plugin_passes_and_names_the_version_nccl_uses(tmp_path, libnccl, supported):
    newest, older = supported["ncclNetPlugin"][-1], supported["ncclNetPlugin"][-2]
    gcc("plugin.c", tmp_path / "libnccl-net.so", f"-DNET_VERSION={newest}",
        f"-DNET_VERSION_OLD={older}", f"-DCOLLNET_VERSION={newest}")
    found = search({"LD_LIBRARY_PATH": str(tmp_path)}, libnccl)
    assert [p.path for p in found.found] == [str(tmp_path / "libnccl-net.so")]
    result = check_plugin(found, supported, None)
    assert result.status == Status.PASS, result.summary
    assert f"will use v{newest}" in result.summary
    assert result.details["found"][0]["exports"]["ncclNetPlugin"] == [f"v{older}", f"v{newest}"]


@pytest.mark.parametrize("version,word", [(2, "older than"), (99, "newer than")])
def test_unsupported_plugin_version_fails(tmp_path, libnccl, supported, version, word):
    gcc("plugin.c", tmp_path / "libnccl-net.so", f"-DNET_VERSION={version}")
    result = check_plugin(search({"LD_LIBRARY_PATH": str(tmp_path)}, libnccl), supported, None)
    assert result.status == Status.FAIL and result.category.value == "net_plugin"
    assert word in result.summary and f"v{version}" in result.summary
    assert f"ncclNetPlugin_v{supported['ncclNetPlugin'][-1]}" in result.fix


def test_plugin_without_versioned_symbols_fails(tmp_path, libnccl, supported):
    gcc("plugin.c", tmp_path / "libnccl-net.so")
    result = check_plugin(search({"LD_LIBRARY_PATH": str(tmp_path)}, libnccl), supported, None)
    assert result.status == Status.FAIL and "exports no ncclNetPlugin_vN" in result.summary


def test_old_collnet_alongside_a_good_net_plugin_warns(tmp_path, libnccl, supported):
    newest = supported["ncclNetPlugin"][-1]
    gcc("plugin.c", tmp_path / "libnccl-net.so", f"-DNET_VERSION={newest}", "-DCOLLNET_VERSION=3")
    result = check_plugin(search({"LD_LIBRARY_PATH": str(tmp_path)}, libnccl), supported, None)
    assert result.status == Status.WARN and "ncclCollNetPlugin" not in result.summary.split(";")[0]
    assert "CollNet" in result.summary


def test_named_plugin_found_as_libnccl_net_name(tmp_path, libnccl, supported):
    """NCCL_NET_PLUGIN=aws-ofi: NCCL tries 'aws-ofi' then libnccl-net-aws-ofi.so."""
    newest = supported["ncclNetPlugin"][-1]
    gcc("plugin.c", tmp_path / "libnccl-net-aws-ofi.so", f"-DNET_VERSION={newest}")
    found = search({"LD_LIBRARY_PATH": str(tmp_path), "NCCL_NET_PLUGIN": "aws-ofi"}, libnccl)
    assert found.tried == ["aws-ofi", "libnccl-net-aws-ofi.so"]
    assert found.found and found.found[0].requested_as == "libnccl-net-aws-ofi.so"
    assert check_plugin(found, supported, None).status == Status.PASS


def test_plugin_by_full_path(tmp_path, libnccl, supported):
    path = gcc("plugin.c", tmp_path / "custom" / "mynet.so", "-DNET_VERSION=1")
    found = search({"NCCL_NET_PLUGIN": str(path)}, libnccl)
    assert found.found[0].path == str(path)
    assert check_plugin(found, supported, None).status == Status.FAIL


def test_named_plugin_missing_fails_unset_passes(tmp_path, libnccl, supported):
    missing = check_plugin(search({"NCCL_NET_PLUGIN": "sharp"}, libnccl), supported, None)
    assert missing.status == Status.FAIL and "libnccl-net-sharp.so" in missing.summary
    assert missing.category.value == "net_plugin"
    unset = check_plugin(search({"LD_LIBRARY_PATH": str(tmp_path)}, libnccl), supported, None)
    assert unset.status == Status.PASS and "built-in" in unset.summary


def test_none_disables(libnccl, supported):
    found = search({"NCCL_NET_PLUGIN": "none"}, libnccl)
    assert found.disabled and check_plugin(found, supported, None).status == Status.PASS


def test_candidate_names():
    net = kind("net")
    assert candidate_names(net, None) == ["libnccl-net.so"]
    assert candidate_names(net, "None") is None
    assert candidate_names(net, "ofi,libnccl-net-x.so,/p/y.so") == [
        "ofi", "libnccl-net-ofi.so", "libnccl-net-x.so", "/p/y.so"]
    assert candidate_names(kind("tuner"), "mine") == ["mine", "libnccl-tuner-mine.so"]


def test_plugin_with_missing_dependency_fails(tmp_path, libnccl, supported):
    newest = supported["ncclNetPlugin"][-1]
    dep = gcc("requester.c", tmp_path / "deps" / "libfabricstub.so", "-Wl,-soname,libfabricstub.so")
    gcc("plugin.c", tmp_path / "libnccl-net.so", f"-DNET_VERSION={newest}", f"-L{dep.parent}",
        "-Wl,--no-as-needed", "-lfabricstub")
    dep.unlink()
    result = check_plugin(search({"LD_LIBRARY_PATH": str(tmp_path)}, libnccl), supported, None)
    assert result.status == Status.FAIL and "libfabricstub.so" in result.summary


@pytest.mark.parametrize("plugin_kind,flag,family", [
    ("tuner", "TUNER_VERSION", "ncclTunerPlugin"), ("profiler", "PROFILER_VERSION", "ncclProfiler"),
    ("env", "ENV_VERSION", "ncclEnvPlugin")])
def test_other_plugin_kinds(tmp_path, libnccl, supported, plugin_kind, flag, family):
    good = supported[family][-1]
    gcc("plugin.c", tmp_path / "ok" / f"libnccl-{plugin_kind}.so", f"-D{flag}={good}")
    gcc("plugin.c", tmp_path / "bad" / f"libnccl-{plugin_kind}.so", f"-D{flag}=77")
    passing = check_plugin(search({"LD_LIBRARY_PATH": str(tmp_path / "ok")}, libnccl,
                                  plugin_kind), supported, None)
    failing = check_plugin(search({"LD_LIBRARY_PATH": str(tmp_path / "bad")}, libnccl,
                                  plugin_kind), supported, None)
    assert passing.status == Status.PASS and f"v{good}" in passing.summary
    assert failing.status == Status.FAIL and passing.id == failing.id == f"nccl.plugin.{plugin_kind}"


def test_judge_without_known_versions_cannot_tell():
    plugin = FoundPlugin("/x/libnccl-net.so", "libnccl-net.so", "", {"ncclNetPlugin": [8]})
    assert judge(plugin, "ncclNetPlugin", {}).usable is None


def test_nccl_net_names_an_available_transport(tmp_path, libnccl, supported):
    nothing = search({"LD_LIBRARY_PATH": str(tmp_path)}, libnccl)
    assert check_net({"NCCL_NET": "Socket"}, nothing, []).status == Status.PASS
    assert check_net({"NCCL_NET": "IB"}, nothing, ["mlx5_0"]).status == Status.PASS
    ib = check_net({"NCCL_NET": "IB"}, nothing, [])
    assert ib.status == Status.FAIL and ib.category.value == "net_plugin"
    ofi = check_net({"NCCL_NET": "AWS Libfabric"}, nothing, [])
    assert ofi.status == Status.FAIL and "no external net plugin" in ofi.summary
    gcc("plugin.c", tmp_path / "libnccl-net.so", f"-DNET_VERSION={supported['ncclNetPlugin'][-1]}")
    with_plugin = search({"LD_LIBRARY_PATH": str(tmp_path)}, libnccl)
    assert check_net({"NCCL_NET": "AWS Libfabric"}, with_plugin, []).status == Status.PASS
    assert check_net({}, nothing, []).status == Status.PASS


def test_comma_list_skips_a_plugin_that_cannot_load(tmp_path, libnccl, supported):
    """NCCL_NET_PLUGIN=broken,good: dlopen fails on the first (missing dependency), NCCL moves on."""
    newest = supported["ncclNetPlugin"][-1]
    dep = gcc("requester.c", tmp_path / "deps" / "libgonestub.so", "-Wl,-soname,libgonestub.so")
    gcc("plugin.c", tmp_path / "libnccl-net-broken.so", f"-DNET_VERSION={newest}",
        f"-L{dep.parent}", "-Wl,--no-as-needed", "-lgonestub")
    dep.unlink()
    gcc("plugin.c", tmp_path / "libnccl-net-good.so", f"-DNET_VERSION={newest}")
    found = search({"LD_LIBRARY_PATH": str(tmp_path), "NCCL_NET_PLUGIN": "broken,good"}, libnccl)
    assert len(found.found) == 2
    result = check_plugin(found, supported, None)
    assert result.status == Status.PASS and "libnccl-net-good.so" in result.summary
