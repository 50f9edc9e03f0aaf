"""The families agree because they ask one owner per fact: a test per inconsistency issue #11
found (config-file trimming, " eth0", NCCL_DEBUG_FILE in nccl.conf, the unknown-name list,
the NCCL wheel preference, version decoding), checked against the real libnccl where it can be.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ncclcheck.model import Status
from ncclcheck.ncclib.config_files import Setting, effective_settings, read_config_files
from ncclcheck.ncclib.discovery import discover
from ncclcheck.ncclib.library_names import SHIPPED, name_source, read_library_names
from ncclcheck.ncclib.loader import ask_library
from ncclcheck.probes.nccl.settings import LintFacts, closest_name, lint_one
from ncclcheck.ncclib.config_files import nccl_environment
from ncclcheck.network.interfaces import list_interfaces, predict_nccl_bootstrap
from ncclcheck.probes.nccl.bootstrap import check_bootstrap
from ncclcheck.probes.nccl.facts import local_interfaces

BARE = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent-facts"}  # no ~/.nccl.conf

# Loads libnccl, lets ncclGetUniqueId read the config files, prints what libc's environment holds.
REAL_ENV_CHILD = r"""
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
lib.ncclGetUniqueId(ctypes.create_string_buffer(128))
libc = ctypes.CDLL(None)
libc.getenv.restype = ctypes.c_char_p
out = {}
for name in json.loads(sys.argv[2]):
    value = libc.getenv(name.encode())
    out[name] = value.decode() if value is not None else None
print("ENV " + json.dumps(out), flush=True)
"""


@pytest.fixture(scope="module")
def libnccl() -> str:
    found = discover({}, cache={}).resolution.found
    assert found, "the nvidia-nccl-cu12 wheel must be installed (scripts/test.sh)"
    return found


def real_environment(library: str, env: dict[str, str], names: list[str]) -> dict:
    """What the real libnccl set from its config files, read back from the process env."""
    out = subprocess.run([sys.executable, "-c", REAL_ENV_CHILD, library, json.dumps(names)],
                         env=env, capture_output=True, text=True, timeout=60)
    line = next(x for x in out.stdout.splitlines() if x.startswith("ENV "))
    return json.loads(line[4:])


def test_config_file_spaces_are_kept_by_both_families_as_by_libnccl(tmp_path, libnccl):
    conf = tmp_path / "job.conf"
    conf.write_text("NCCL_SOCKET_IFNAME = eth0\nNCCL_IB_HCA=mlx5 \r\n")
    env = {**BARE, "NCCL_CONF_FILE": str(conf)}
    etc = str(tmp_path / "absent")
    net_view = nccl_environment(env, etc)
    nccl_view = {n: s.value for n, s in
                 effective_settings(env, read_config_files(env, etc)).items()}
    names = ["NCCL_SOCKET_IFNAME ", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA"]
    real = real_environment(libnccl, env, names)
    assert real == {"NCCL_SOCKET_IFNAME ": " eth0", "NCCL_SOCKET_IFNAME": None,
                    "NCCL_IB_HCA": "mlx5 "}
    for view in (net_view, nccl_view):
        assert {n: view.get(n) for n in names} == real


def test_leading_space_in_ifname_fails_in_the_linter_the_net_probe_and_libnccl(libnccl):
    interfaces = list_interfaces()
    name = next(i.name for i in interfaces if i.running and i.addresses)
    value = f" {name}"
    env = {**BARE, "NCCL_SOCKET_IFNAME": value}
    verdict = lint_one(Setting("NCCL_SOCKET_IFNAME", value, "environment"),
                       LintFacts(interfaces=local_interfaces(interfaces)))
    predicted = predict_nccl_bootstrap(env, interfaces)
    real = ask_library(libnccl, env, timeout=30).bootstrap
    assert real is not None and real.no_interface and real.interface is None
    assert predicted is None
    assert verdict.status == Status.FAIL and "spaces" in verdict.summary
    # and without the space all three find it
    plain = {**BARE, "NCCL_SOCKET_IFNAME": name}
    assert ask_library(libnccl, plain, timeout=30).bootstrap.interface == name
    assert predict_nccl_bootstrap(plain, interfaces).name == name
    assert lint_one(Setting("NCCL_SOCKET_IFNAME", name, "environment"),
                    LintFacts(interfaces=local_interfaces(interfaces))).status == Status.PASS


def test_debug_file_in_nccl_conf_neither_breaks_the_bootstrap_check_nor_writes_the_file(
        tmp_path, libnccl):
    user_log = tmp_path / "user-nccl.log"
    conf = tmp_path / "nccl.conf"
    conf.write_text(f"NCCL_DEBUG_FILE={user_log}\n")
    env = {**BARE, "NCCL_CONF_FILE": str(conf)}
    answer = ask_library(libnccl, env, timeout=30)
    assert answer.bootstrap is not None and answer.bootstrap.rc == 0
    assert answer.bootstrap.interface is not None, answer.log
    interfaces = list_interfaces()
    result = check_bootstrap(answer, env, local_interfaces(interfaces),
                             predicted=(answer.bootstrap.interface, True))
    assert result.status == Status.PASS, result.summary
    assert not user_log.exists()


def test_success_without_a_named_interface_is_not_called_a_failure():
    from ncclcheck.ncclib.loader import BootstrapChoice, LibraryAnswer
    answer = LibraryAnswer("libnccl.so.2", "ok", 0.1)
    answer.bootstrap = BootstrapChoice(rc=0)
    result = check_bootstrap(answer, {}, {})
    assert "failed" not in result.summary and "rc 0" in result.summary


def test_every_name_the_library_reads_is_known(libnccl):
    library_names = read_library_names(libnccl)
    assert library_names and len(library_names) > 200
    source = name_source(libnccl, "2.32.3")
    assert source.from_library and libnccl in source.label
    facts = LintFacts(names=source)
    unknown = [n for n in sorted(library_names)
               if lint_one(Setting(n, "1", "environment"), facts).rule == "unknown_name"]
    assert unknown == []
    sort = lint_one(Setting("NCCL_IB_SORT_MERGE_NICS", "1", "environment"), facts)
    assert "NCCL_IB_MERGE_NICS" not in sort.summary and sort.names_from == source.label


def test_suggestions_only_name_what_the_library_reads(libnccl):
    source = name_source(libnccl)
    for typo in ("NCCL_SOCKET_MAGIK", "NCCL_SHM_MEMCPY_MOD", "NCCL_IB_SORT_MERGE_NIC"):
        guess = closest_name(typo, source)
        assert guess is None or guess in source.known
        verdict = lint_one(Setting(typo, "1", "environment"), LintFacts(names=source))
        assert "names read from" in verdict.summary
    assert closest_name("NCCL_SOCKET_MAGIK", source) != "NCCL_SOCKET_MAGIC"  # 2.32.3 lacks it


def test_without_a_readable_library_the_shipped_table_is_used_and_said(tmp_path):
    not_elf = tmp_path / "libnccl.so.2"
    not_elf.write_bytes(b"not a library")
    for library in (None, str(not_elf), str(tmp_path / "missing.so")):
        assert name_source(library) is SHIPPED
    verdict = lint_one(Setting("NCCL_NOT_A_THING", "1", "environment"), LintFacts())
    assert verdict.rule == "unknown_name" and "shipped table" in verdict.summary


def test_library_names_are_read_fast_and_cached(libnccl):
    import time
    read_library_names(libnccl)
    started = time.monotonic()
    for _ in range(100):
        read_library_names(libnccl)
    assert time.monotonic() - started < 0.5


def test_every_family_prefers_the_same_nccl_wheel(monkeypatch):
    """cu12 and cu13 both installed, torch depends on cu12: everybody says cu12's version."""
    import importlib.metadata as metadata
    installed = {"nvidia-nccl-cu12": "2.21.5", "nvidia-nccl-cu13": "2.28.9", "torch": "2.5.1"}

    def version(name):
        if name in installed:
            return installed[name]
        raise metadata.PackageNotFoundError(name)
    monkeypatch.setattr(metadata, "version", version)
    monkeypatch.setattr(metadata, "requires",
                        lambda name: ["nvidia-nccl-cu12==2.21.5; platform_system == 'Linux'"]
                        if name == "torch" else None)
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    from ncclcheck.cluster.identity import versions
    from ncclcheck.ncclib.discovery import installed_wheel
    from ncclcheck.probes.net import facts
    assert facts.installed_nccl_version() == "2.21.5"
    assert versions()["nccl"] == "2.21.5"
    assert installed_wheel() == "nvidia-nccl-cu12 2.21.5"


def test_wheel_preference_without_a_torch_dependency():
    from ncclcheck.ncclib.wheel import installed_nccl_wheel
    both = {"nvidia-nccl-cu12": "2.21.5", "nvidia-nccl-cu13": "2.28.9"}
    tagged = installed_nccl_wheel({**both, "torch": "2.9.0+cu128"}.get, lambda: ())
    assert tagged.name == "nvidia-nccl-cu12" and "CUDA tag" in tagged.why
    newest = installed_nccl_wheel({**both, "torch": "2.9.0"}.get, lambda: ())
    assert newest.name == "nvidia-nccl-cu13"
    assert installed_nccl_wheel({}.get, lambda: ()) is None


@pytest.mark.parametrize("value,expected", [
    (2708, (2, 7, 8)), (22107, (2, 21, 7)), (23203, (2, 32, 3)), ("2.21.5-1", (2, 21, 5)),
    ("v2.27.7", (2, 27, 7)), ((2, 21, 5), (2, 21, 5)), ([2, 28], (2, 28, 0)),
])
def test_version_decoding_agrees(monkeypatch, value, expected):
    from ncclcheck.cluster import identity
    from ncclcheck.ncclib.version import from_any
    from ncclcheck.network.interfaces import parse_version
    assert parse_version(value) == expected
    decoded = from_any(value)
    assert (decoded.major, decoded.minor, decoded.patch) == expected
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: value)
    assert identity._nccl_version() == ".".join(map(str, expected))
