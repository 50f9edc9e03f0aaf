"""nccl.known_issues and its table (ncclcheck/catalogue/known_issues.toml).

The judgement is pure: scenes written by hand stand for what the probe reads (versions, RAS,
the GPUs the driver lists, the net plugin, in-process restart). The end-to-end tests load a real
libnccl: the newest, which the test environment installs, and NCCL 2.28.3 from its PyPI wheel
(the slow test downloads it: about 300 MB and 5-60 s depending on the mirror). The job's
in-process restart is NVIDIA's real resiliency extension, from its PyPI wheel (about 450 KB),
unpacked onto the probe's PYTHONPATH: what the probe looks for is that package being importable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from plugins.build import gcc

from ncclcheck.catalogue.known_issues import (CONDITIONS, KnownIssues, Scene, VersionRange,
                                              applies, load, parse, version_of)
from ncclcheck.model import Category, Status
from ncclcheck.probes.nccl.known_issues import (TorchInstall, known_issue_results,
                                                read_plugin_versions)

ROOT = Path(__file__).resolve().parents[1]
RESILIENCY_WHEEL = "nvidia-resiliency-ext==0.4.1"


def scene(**kw) -> Scene:
    base = dict(versions={"nccl": (2, 32, 3), "torch": (2, 13, 0)}, settings={}, ras=True,
                inprocess_restart=False, infiniband=False, arch="x86_64", gpus=(), plugins=())
    base.update(kw)
    return Scene(**base)


# -- the table ---------------------------------------------------------------------------------
def test_every_entry_is_well_formed_and_sourced():
    table = load()
    assert len(table.issues) >= 10 and len(table.renames) >= 5
    assert {i.library for i in table.issues} == {"nccl", "torch", "aws-ofi-nccl", "driver"}
    for issue in table.issues:
        assert issue.sources and all(s.startswith("https://") for s in issue.sources), issue.id
        assert issue.fix.strip() and issue.symptom.strip() and issue.title.strip()
        if issue.fixed:  # the first fixed release is outside the affected range, and named
            assert not issue.affects(version_of(issue.fixed)), issue.id
            assert issue.fixed in issue.fix, issue.id
        assert all(c.kind in CONDITIONS for c in issue.when)
    for rename in table.renames:
        assert rename.old != rename.new and rename.sources


@pytest.mark.parametrize("text,inside,outside", [
    (">=2.24.3,<2.27.3", [(2, 24, 3), (2, 26, 6), (2, 27, 2)], [(2, 24, 2), (2, 27, 3), (3, 0)]),
    ("==2.27.7", [(2, 27, 7)], [(2, 27, 6), (2, 27, 8)]),
    (">=390,<396.26", [(390, 48), (396, 24, 1)], [(396, 26), (535, 104, 5)]),
])
def test_version_ranges(text, inside, outside):
    rng = VersionRange.parse(text)
    assert all(v in rng for v in inside) and not any(v in rng for v in outside)


@pytest.mark.parametrize("bad", ['[[issue]]\nid="x"\nlibrary="nccl"\naffected="2.3"\ntitle="t"\n'
                                 'symptom="s"\nfix="f"\nsources=["https://a"]',
                                 '[[issue]]\nid="x"\nlibrary="cudnn"\naffected="==1"\ntitle="t"\n'
                                 'symptom="s"\nfix="f"\nsources=["https://a"]',
                                 '[[issue]]\nid="x"\nlibrary="nccl"\naffected="==1"\ntitle="t"\n'
                                 'symptom="s"\nfix="f"\nsources=["a thread"]',
                                 '[[issue]]\nid="x"\nlibrary="nccl"\naffected="==1"\ntitle="t"\n'
                                 'symptom="s"\nfix="f"\nsources=["https://a"]\nwhen=["moon"]'])
def test_a_malformed_entry_is_refused(bad):
    with pytest.raises(ValueError):
        parse(bad)


def test_version_labels():
    assert version_of("2.28.3-1") == (2, 28, 3) and version_of("1.9.1-aws") == (1, 9, 1)
    assert version_of("2.13.0+cpu") == (2, 13, 0) and version_of(None) is None


# -- the judgement -------------------------------------------------------------------------------
def test_the_newest_releases_pass():
    result = known_issue_results(load(), scene())
    assert result.status is Status.PASS and result.details["issues"] == []
    assert "nccl 2.32.3" in result.summary


def test_ras_crash_warns_with_its_fix_release_and_source_unless_ras_is_off():
    result = known_issue_results(load(), scene(versions={"nccl": (2, 26, 2)}))
    assert result.status is Status.WARN and result.category is Category.VERSION_MISMATCH
    (entry,) = result.details["issues"]
    assert entry["id"] == "nccl.ras_report_race" and entry["fixed"] == "2.27.3"
    assert "https://github.com/NVIDIA/nccl/releases/tag/v2.27.3-1" in result.summary
    assert "NCCL_RAS_ENABLE=0" in result.fix and "2.27.3" in result.fix
    off = known_issue_results(load(), scene(versions={"nccl": (2, 26, 2)}, ras=False))
    assert off.status is Status.PASS
    assert off.details["conditions_not_met"] == [  # affected, but its condition does not hold
        "nccl.ras_report_race (only with NCCL's RAS on (the default since 2.24))"]
    assert "1 more affect these releases only under conditions" in off.summary


def test_in_process_restart_on_2_28_3_warns_only_where_it_is_installed():
    on = known_issue_results(load(), scene(versions={"nccl": (2, 28, 3)}, inprocess_restart=True))
    assert [e["id"] for e in on.details["issues"]] == ["nccl.inprocess_restart_segfault"]
    assert on.details["issues"][0]["fixed"] == "2.28.9" and "2.28.9" in on.fix
    assert known_issue_results(load(), scene(versions={"nccl": (2, 28, 3)})).status is Status.PASS
    assert known_issue_results(load(), scene(versions={"nccl": (2, 28, 9)},
                                             inprocess_restart=True)).status is Status.PASS


@pytest.mark.parametrize("gpus,warns", [(("NVIDIA H100 80GB HBM3",), True),
                                        (("NVIDIA A100-SXM4-80GB",), False), ((), False)])
def test_a_gpu_family_scope_reads_the_gpu_names(gpus, warns):
    """Fixtures of what the probe reads from /proc/driver/nvidia/gpus/*/information."""
    result = known_issue_results(load(), scene(versions={"nccl": (2, 18, 1)}, gpus=gpus,
                                               ras=False))
    assert (result.status is Status.WARN) == warns
    if warns:
        assert "NCCL_PROTO=^LL128" in result.fix


def test_a_condition_that_cannot_be_told_is_listed_not_warned():
    result = known_issue_results(load(), scene(versions={"nccl": (2, 18, 1)}, gpus=None))
    assert result.status is Status.PASS
    assert result.details["undecided"] == ["nccl.ll128_tree_corruption"]


def test_torch_entry_needs_the_old_nccl_it_names():
    old = scene(versions={"torch": (2, 4, 0), "nccl": (2, 12, 10)}, ras=False)
    assert [e["id"] for e in known_issue_results(load(), old).details["issues"]] == [
        "torch.single_device_nccl_2_12"]
    new = scene(versions={"torch": (2, 4, 0), "nccl": (2, 21, 5)})
    assert known_issue_results(load(), new).status is Status.PASS


def test_plugin_and_setting_conditions_together():
    both = scene(versions={"nccl": (2, 30, 4), "aws-ofi-nccl": (1, 19, 2)},
                 plugins=("aws-ofi-nccl",), settings={"NCCL_PROTO": "simple"})
    assert [e["id"] for e in known_issue_results(load(), both).details["issues"]] == [
        "aws_ofi_nccl.tuner_algo_proto_segfault"]
    unset = scene(versions={"nccl": (2, 30, 4), "aws-ofi-nccl": (1, 19, 2)},
                  plugins=("aws-ofi-nccl",))
    assert known_issue_results(load(), unset).status is Status.PASS


def test_several_issues_are_all_named():
    result = known_issue_results(load(), scene(versions={"nccl": (2, 27, 7)}))
    assert [e["id"] for e in result.details["issues"]] == ["nccl.ras_segfault_2_27_7"]
    assert "no fixed release yet" in result.summary
    both = known_issue_results(load(), scene(versions={"nccl": (2, 29, 2)}, arch="aarch64"))
    assert both.details["issues"][0]["id"] == "nccl.arm_cas_hang"


# -- renamed settings: what the installed library reads decides ------------------------------------
def test_an_old_name_warns_only_when_the_installed_torch_reads_the_new_one():
    env = {"NCCL_ASYNC_ERROR_HANDLING": "1"}
    reads = TorchInstall((2, 13, 0), frozenset({"TORCH_NCCL_ASYNC_ERROR_HANDLING"}))
    result = known_issue_results(load(), scene(settings=env), torch=reads)
    assert result.status is Status.WARN
    assert result.details["renamed_settings"][0]["new_name"] == "TORCH_NCCL_ASYNC_ERROR_HANDLING"
    assert "Rename NCCL_ASYNC_ERROR_HANDLING to TORCH_NCCL_ASYNC_ERROR_HANDLING" in result.fix
    old_torch = TorchInstall((2, 1, 2), frozenset({"NCCL_ASYNC_ERROR_HANDLING"}))
    assert known_issue_results(load(), scene(settings=env), torch=old_torch).status is Status.PASS
    unread = TorchInstall(None, None)  # no library to read: the version decides
    old = scene(settings=env, versions={"torch": (2, 1, 2)})
    assert known_issue_results(load(), old, torch=unread).status is Status.PASS
    assert known_issue_results(load(), scene(settings=env), torch=unread).status is Status.WARN
    both = dict(env, TORCH_NCCL_ASYNC_ERROR_HANDLING="1")  # the new one is set too: nothing to do
    assert known_issue_results(load(), scene(settings=both), torch=reads).status is Status.PASS


def test_an_old_nccl_name_follows_the_loaded_library_names():
    env = {"NCCL_MIN_NCHANNELS": "4"}
    new_lib = known_issue_results(load(), scene(settings=env),
                                  nccl_reads=lambda n: n == "NCCL_MIN_CTAS")
    assert new_lib.details["renamed_settings"][0]["new_name"] == "NCCL_MIN_CTAS"
    old_lib = known_issue_results(load(), scene(settings=env), nccl_reads=lambda n: False)
    assert old_lib.status is Status.PASS


def test_the_installed_torch_is_read_without_importing_it():
    from ncclcheck.probes.nccl.known_issues import read_torch
    torch = read_torch()
    assert torch.version is not None and torch.version >= (2, 2)
    assert torch.names is not None and "TORCH_NCCL_ASYNC_ERROR_HANDLING" in torch.names


def test_an_aws_ofi_nccl_plugin_names_its_version_in_its_strings(tmp_path):
    """A stand-in plugin gcc builds with the banner aws-ofi-nccl keeps in .rodata."""
    ofi = gcc("plugin.c", tmp_path / "libnccl-net.so", "-DNET_VERSION=8",
              '-DBANNER="Initializing aws-ofi-nccl 1.19.2"')
    assert read_plugin_versions([str(ofi)]) == {"aws-ofi-nccl": (1, 19, 2)}
    other = gcc("plugin.c", tmp_path / "libnccl-net-x.so", "-DNET_VERSION=8",
                '-DBANNER="Initializing another plugin 3.1.4"')
    assert read_plugin_versions([str(other), str(tmp_path / "missing.so")]) == {}


# -- a real library ----------------------------------------------------------------------------
def nccl_json(lib: Path | None, extra_env: dict[str, str] | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_NCCL"))}
    env.update(extra_env or {})
    argv = [sys.executable, "-m", "ncclcheck", "nccl", "--format", "json", "--local"]
    if lib is not None:
        argv[4:4] = ["--nccl-lib", str(lib)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    return {c["id"]: c for c in json.loads(done.stdout)["checks"]}


@pytest.fixture(scope="module")
def inprocess_restart(tmp_path_factory) -> dict[str, str]:
    """The environment of a job that uses in-process restart: the real nvidia-resiliency-ext
    wheel unpacked onto PYTHONPATH (its dependencies are not needed: the probe only finds it)."""
    folder = tmp_path_factory.mktemp("resiliency")
    got = subprocess.run([sys.executable, "-m", "pip", "download", RESILIENCY_WHEEL, "--no-deps",
                          "-q", "-d", str(folder)], capture_output=True, text=True, timeout=300)
    wheels = list(folder.glob("nvidia_resiliency_ext-*.whl"))
    if not wheels:
        pytest.skip(f"pip could not download {RESILIENCY_WHEEL}: {got.stderr[-300:]}")
    with zipfile.ZipFile(wheels[0]) as wheel:
        wheel.extractall(folder / "site")
    assert (folder / "site" / "nvidia_resiliency_ext").is_dir()  # a namespace package
    return {"PYTHONPATH": f"{folder / 'site'}{os.pathsep}{ROOT}"}


def test_the_newest_nccl_in_this_environment_passes(inprocess_restart):
    checks = nccl_json(None, inprocess_restart)
    known = checks["nccl.known_issues"]
    if checks["nccl.library"]["status"] != "pass":
        pytest.skip("no libnccl in this environment")
    assert known["status"] == "pass", known["summary"]


@pytest.mark.slow
def test_nccl_2_28_3_from_its_wheel_warns_and_the_newest_passes(tmp_path, inprocess_restart):
    """pip downloads nvidia-nccl-cu12==2.28.3 (about 300 MB) and the check reads the real
    library through --nccl-lib, in a job that has the real in-process restart package."""
    got = subprocess.run([sys.executable, "-m", "pip", "download", "nvidia-nccl-cu12==2.28.3",
                          "--no-deps", "-q", "-d", str(tmp_path)], capture_output=True,
                         text=True, timeout=600)
    wheels = list(tmp_path.glob("nvidia_nccl_cu12-2.28.3-*.whl"))
    if not wheels:
        pytest.skip(f"pip could not download nvidia-nccl-cu12==2.28.3: {got.stderr[-300:]}")
    with zipfile.ZipFile(wheels[0]) as wheel:
        wheel.extract("nvidia/nccl/lib/libnccl.so.2", tmp_path)
    lib = tmp_path / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
    restart = inprocess_restart
    checks = nccl_json(lib, restart)
    assert "NCCL 2.28.3" in checks["nccl.library"]["summary"]
    known = checks["nccl.known_issues"]
    assert known["status"] == "warn" and known["category"] == "version_mismatch", known
    (issue,) = known["details"]["issues"]
    assert issue["id"] == "nccl.inprocess_restart_segfault" and issue["fixed"] == "2.28.9"
    assert issue["sources"][0].startswith("https://github.com/NVIDIA/nvidia-resiliency-ext")
    assert "fixed in 2.28.9" in known["summary"] and issue["sources"][0] in known["summary"]
    without = nccl_json(lib)["nccl.known_issues"]  # no in-process restart: nothing applies
    assert without["status"] == "pass"
    assert without["details"]["conditions_not_met"][0].startswith("nccl.inprocess_restart")
    newest = nccl_json(None, restart)
    assert newest["nccl.known_issues"]["status"] == "pass", newest["nccl.known_issues"]
