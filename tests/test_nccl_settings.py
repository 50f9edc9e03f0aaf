"""The settings linter, rule by rule with passing and failing values, NCCL's config files, and
the motivating case's variables."""

from __future__ import annotations

import pytest

from ncclcheck.context import ProbeContext
from ncclcheck.model import Status
from ncclcheck.ncclib.config_files import Setting, effective_settings, read_config_files
from ncclcheck.probes.nccl import settings as settings_module
from ncclcheck.ncclib.known_names import is_linted
from ncclcheck.probes.nccl.settings import LintFacts, lint, lint_one, parse_c_int
from ncclcheck.network.iflist import IfList
from ncclcheck.ncclib.version import NcclVersion
from ncclcheck.probes import family, run_family
from ncclcheck.probes.nccl.config_files import check_config_files

FACTS = LintFacts(interfaces={"eth0": ["10.0.0.5"], "ib0": ["192.168.1.5"], "lo": ["127.0.0.1"]},
                  loaded_version=NcclVersion(2, 21, 5), loaded_path="/opt/nccl/libnccl.so.2",
                  local_world_size=4, host="node1")


def verdict(name, value, facts=FACTS):
    return lint_one(Setting(name, value, "environment"), facts)


# (name, good values, bad values, status of the bad ones, rule of the bad ones)
RULES = [
    ("NCCL_DEBUG", ["WARN", "info", "VERSION"], ["VERBOSE", "1"], Status.FAIL, "value"),
    ("NCCL_DEBUG_SUBSYS", ["INIT,NET", "^COLL", "ALL"], ["INIT,NETWORK"], Status.WARN, "value"),
    ("NCCL_SOCKET_NTHREADS", ["1", "4", "16"], ["0", "x", "-2"], Status.FAIL, "value"),
    ("NCCL_SOCKET_NTHREADS", [], ["17", "64"], Status.WARN, "value"),
    ("NCCL_NSOCKS_PERTHREAD", ["1", "8"], ["0", "four"], Status.FAIL, "value"),
    ("NCCL_SOCKET_FAMILY", ["AF_INET", "AF_INET6"], ["IPv4", "inet"], Status.WARN, "value"),
    ("NCCL_IB_TIMEOUT", ["1", "20", "31"], ["-1", "x"], Status.FAIL, "value"),
    ("NCCL_IB_TIMEOUT", [], ["0", "32"], Status.WARN, "value"),
    ("NCCL_IB_RETRY_CNT", ["0", "7"], ["8", "-1"], Status.FAIL, "value"),
    ("NCCL_NTHREADS", ["64", "512", "0x100"], ["100", "1024"], Status.FAIL, "value"),
    ("NCCL_CROSS_NIC", ["0", "2"], ["3"], Status.FAIL, "value"),
    ("NCCL_NVLS_ENABLE", ["0", "1"], ["5"], Status.FAIL, "value"),
    ("NCCL_BUFFSIZE", ["4194304", "0x400000", "020"], ["0", "big"], Status.FAIL, "value"),
    ("NCCL_BUFFSIZE", [], ["4MB"], Status.WARN, "value"),
    ("NCCL_P2P_LEVEL", ["NVL", "sys", "2"], ["NVLINK", "-1"], Status.FAIL, "value"),
    ("NCCL_NET_GDR_LEVEL", ["PHB", "0"], ["GPU"], Status.FAIL, "value"),
    ("NCCL_ALGO", ["Ring", "ring,tree", "^NVLS", "allreduce:tree;broadcast:ring"], ["Rings"],
     Status.FAIL, "value"),
    ("NCCL_PROTO", ["LL,LL128,Simple", "^LL128"], ["LL256"], Status.FAIL, "value"),
    ("NCCL_COMM_ID", ["10.0.0.1:29500", "[fe80::1]:1234", "master:29500"],
     ["10.0.0.1", "host:99999"], Status.FAIL, "value"),
    ("NCCL_SOCKET_IFNAME", ["eth0", "eth", "=eth0", "^docker,lo", "ib0:1"], ["ens5", "=eth"],
     Status.FAIL, "value"),
    ("NCCL_SOCKET_IFNAME", [], ["e"], Status.WARN, "value"),
    ("GLOO_SOCKET_IFNAME", ["eth0", "eth0,ib0"], ["eth1", "eth0,eth9"], Status.FAIL, "value"),
    ("NCCL_P2P_DISABLE", ["0"], ["1"], Status.WARN, "costly"),
    ("NCCL_SHM_DISABLE", ["0"], ["1"], Status.WARN, "costly"),
    ("TORCH_NCCL_ASYNC_ERROR_HANDLING", ["0", "3"], ["4", "yes"], Status.FAIL, "value"),
    ("TORCH_NCCL_BLOCKING_WAIT", ["1", "false"], ["maybe"], Status.WARN, "value"),
    ("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", ["600"], ["0"], Status.FAIL, "value"),
    ("TORCH_DISTRIBUTED_DEBUG", ["OFF", "info"], ["VERBOSE"], Status.FAIL, "value"),
    ("TORCH_DISTRIBUTED_DEBUG", [], ["DETAIL"], Status.WARN, "costly"),
    ("NCCL_NET_SHARED_COMMS", ["1"], ["one"], Status.FAIL, "value"),   # generic NCCL_PARAM int
    ("NCCL_DEBUG", [], ["TRACE"], Status.WARN, "costly"),
    ("NCCL_TOPO_FILE", [__file__], ["/nonexistent/topo.xml", "/dev"], Status.WARN, "value"),
    ("NCCL_CONF_FILE", [__file__], ["/nonexistent/nccl.conf"], Status.WARN, "value"),
    ("TORCH_NCCL_DESYNC_DEBUG", ["0", "TRUE"], ["2x"], Status.WARN, "value"),
    ("TORCH_NCCL_ENABLE_TIMING", ["1"], ["on please"], Status.WARN, "value"),
    ("TORCH_NCCL_ENABLE_MONITORING", ["0"], ["enabled"], Status.WARN, "value"),
    ("TORCH_NCCL_DUMP_ON_TIMEOUT", ["true"], ["dump"], Status.WARN, "value"),
    ("TORCH_NCCL_TRACE_BUFFER_SIZE", ["0", "2000"], ["-1", "lots"], Status.FAIL, "value"),
]
# Rules tested in their own functions below.
TESTED_ELSEWHERE = {"NCCL_DEBUG_FILE", "NCCL_VERSION", "NCCL_IB_DISABLE"}


def test_every_rule_has_passing_and_failing_values():
    assert set(settings_module.RULES) <= {r[0] for r in RULES} | TESTED_ELSEWHERE


@pytest.mark.parametrize("name,good,bad,status,rule", RULES,
                         ids=[f"{r[0]}-{r[3].value}" for r in RULES])
def test_rule_passing_and_failing_values(name, good, bad, status, rule):
    for value in good:
        v = verdict(name, value)
        assert v.status == Status.PASS, (name, value, v.summary)
    for value in bad:
        v = verdict(name, value)
        assert v.status == status and v.rule == rule, (name, value, v.summary)
        assert v.fix and name.split(" ")[0] in v.fix + v.summary


def test_settings_judged_by_other_checks_point_there():
    v = verdict("NCCL_NET_PLUGIN", "aws-ofi")
    assert v.status == Status.PASS and "nccl.plugin.net" in v.summary
    assert "nccl.net" in verdict("NCCL_NET", "IB").summary


def test_unknown_name_suggests_the_closest_known_one():
    v = verdict("NCCL_SOCKET_IFNAM", "eth0")
    assert v.status == Status.WARN and v.rule == "unknown_name"
    assert "NCCL_SOCKET_IFNAM -> NCCL_SOCKET_IFNAME?" in v.summary
    assert verdict("TORCH_NCCL_BLOCKING_WAITS", "1").summary.endswith("TORCH_NCCL_BLOCKING_WAIT?")
    far = verdict("NCCL_TOTALLY_MADE_UP", "1")
    assert far.status == Status.WARN and "no effect" in far.summary
    assert verdict("NCCL_SOCKET_IFNAME", "eth0").rule != "unknown_name"


@pytest.mark.parametrize("old,new", [("NCCL_CHECK_POINTERS", "NCCL_CHECK_MODE"),
                                     ("NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK",
                                      "TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK")])
def test_deprecated_names_name_their_replacement(old, new):
    v = verdict(old, "1")
    assert v.status == Status.WARN and v.rule == "deprecated" and new in v.fix
    assert verdict(new, "1").rule != "deprecated"


@pytest.mark.parametrize("old", ["NCCL_ASYNC_ERROR_HANDLING", "NCCL_BLOCKING_WAIT",
                                 "NCCL_DESYNC_DEBUG", "NCCL_IB_GDR_LEVEL", "NCCL_MAX_NCHANNELS"])
def test_renamed_names_are_left_to_the_known_issues_check(old):
    """Whether the new name applies depends on the installed library (an old torch still reads
    NCCL_ASYNC_ERROR_HANDLING): nccl.known_issues reads it (test_nccl_known_issues.py)."""
    v = verdict(old, "1")
    assert v.status == Status.PASS and "nccl.known_issues" in v.summary


def test_removed_names_are_reported_as_ignored():
    v = verdict("NCCL_LL_THRESHOLD", "0")
    assert v.status == Status.WARN and "removed" in v.summary


def test_socket_product_above_64():
    def product(t, n):
        verdicts = lint({"NCCL_SOCKET_NTHREADS": Setting("NCCL_SOCKET_NTHREADS", t, "environment"),
                         "NCCL_NSOCKS_PERTHREAD": Setting("NCCL_NSOCKS_PERTHREAD", n, "environment")},
                        FACTS)
        return next(v for v in verdicts if v.rule == "socket_count")
    assert product("4", "4").status == Status.PASS
    assert product("8", "8").status == Status.PASS
    high = product("16", "8")
    assert high.status == Status.WARN and "128 > 64" in high.summary and "=4" in high.fix


def test_ib_disable_is_costly_only_with_rdma_devices():
    assert verdict("NCCL_IB_DISABLE", "1").status == Status.PASS
    with_ib = LintFacts(interfaces=FACTS.interfaces, ib_devices=["mlx5_0"])
    v = verdict("NCCL_IB_DISABLE", "1", with_ib)
    assert v.status == Status.WARN and v.category.value == "infiniband" and "mlx5_0" in v.summary
    assert verdict("NCCL_IB_DISABLE", "0", with_ib).status == Status.PASS


def test_debug_file(tmp_path):
    assert verdict("NCCL_DEBUG_FILE", str(tmp_path / "nccl.%h.%p.log")).status == Status.PASS
    assert verdict("NCCL_DEBUG_FILE", "/dev/stderr").status == Status.PASS
    missing = verdict("NCCL_DEBUG_FILE", str(tmp_path / "no" / "such" / "dir" / "n.%p.log"))
    assert missing.status == Status.WARN and missing.rule == "debug_file"
    assert "does not exist" in missing.summary
    is_dir = verdict("NCCL_DEBUG_FILE", str(tmp_path))
    assert is_dir.status == Status.WARN and "directory" in is_dir.summary
    shared = verdict("NCCL_DEBUG_FILE", str(tmp_path / "nccl.log"))
    assert shared.status == Status.WARN and "%p" in shared.summary


def test_version_label():
    assert verdict("NCCL_VERSION", "2.21.5-1").status == Status.PASS
    differs = verdict("NCCL_VERSION", "2.11.4-1")
    assert differs.status == Status.WARN and differs.rule == "label"
    assert "2.21.5" in differs.summary and "2.11.4" in differs.summary
    assert "never reads" in differs.fix
    assert verdict("NCCL_VERSION", "latest").status == Status.WARN
    unknown = verdict("NCCL_VERSION", "2.11.4-1", LintFacts())
    assert unknown.status == Status.PASS and "cannot be compared" in unknown.summary
    # A CUDA image labels its system copy (seen on a GPU node: NCCL_VERSION=2.28.3-1 and
    # /lib/x86_64-linux-gnu/libnccl.so.2 2.28.3 beside the wheel's 2.28.9): the label is
    # right about that copy, and nccl.library alone warns that the copies differ.
    system = LintFacts(loaded_version=NcclVersion(2, 21, 5), loaded_path="/opt/nccl/libnccl.so.2",
                       other_copies={"2.11.4": "/usr/lib/x86_64-linux-gnu/libnccl.so.2"})
    image = verdict("NCCL_VERSION", "2.11.4-1", system)
    assert image.status == Status.PASS and "nccl.library" in image.summary
    assert "/usr/lib/x86_64-linux-gnu/libnccl.so.2" in image.summary
    assert verdict("NCCL_VERSION", "2.12.12-1", system).status == Status.WARN


def test_parse_c_int_like_strtoll():
    assert parse_c_int("0x10").value == 16 and parse_c_int("010").value == 8
    assert parse_c_int("-2").value == -2 and parse_c_int(" 7").value == 7
    assert parse_c_int("4abc").trailing == "abc" and parse_c_int("abc").value is None


def test_parse_ifname():
    spec = IfList.parse("^=docker0,lo:1")
    assert spec.exclude and spec.exact and spec.entries == ("docker0", "lo")


def test_secret_looking_values_are_masked():
    v = verdict("NCCL_MY_TOKEN", "hunter2-secret")
    assert "hunter2" not in v.summary and v.shown_value() == "***"


def test_motivating_case_every_variable_judged():
    """NCCL_VERSION=2.11.4-1, NCCL_SOCKET_IFNAME=eth0, NCCL_DEBUG=INFO, NCCL_NSOCKS_PERTHREAD=4,
    NCCL_SOCKET_NTHREADS=4, on a node with eth0 up and the real library loaded."""
    env = {"NCCL_VERSION": "2.11.4-1", "NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "INFO",
           "NCCL_NSOCKS_PERTHREAD": "4", "NCCL_SOCKET_NTHREADS": "4"}
    verdicts = {v.name: v for v in lint({k: Setting(k, v, "environment") for k, v in env.items()},
                                        FACTS)}
    assert set(env) <= set(verdicts)
    assert verdicts["NCCL_VERSION"].status == Status.WARN  # a label, and not the loaded 2.21.5
    assert verdicts["NCCL_SOCKET_IFNAME"].status == Status.PASS
    assert "matches eth0" in verdicts["NCCL_SOCKET_IFNAME"].summary
    assert verdicts["NCCL_DEBUG"].status == Status.PASS and "verbose" in verdicts["NCCL_DEBUG"].summary
    assert verdicts["NCCL_NSOCKS_PERTHREAD"].status == Status.PASS
    assert verdicts["NCCL_SOCKET_NTHREADS"].status == Status.PASS
    product = verdicts["NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD"]
    assert product.status == Status.PASS and "4 x 4 = 16" in product.summary
    no_eth0 = LintFacts(interfaces={"ens5": ["10.1.1.1"]})
    missing = lint_one(Setting("NCCL_SOCKET_IFNAME", "eth0", "environment"), no_eth0)
    assert missing.status == Status.FAIL and "ens5 (10.1.1.1)" in missing.fix


def test_motivating_case_through_the_family():
    env = {"NCCL_VERSION": "2.11.4-1", "NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "INFO",
           "NCCL_NSOCKS_PERTHREAD": "4", "NCCL_SOCKET_NTHREADS": "4", "PATH": "/usr/bin:/bin"}
    results = {r.id: r for r in run_family(family("nccl"), ProbeContext(env=env, timeout=60))}
    for name in ("NCCL_VERSION", "NCCL_SOCKET_IFNAME", "NCCL_DEBUG", "NCCL_NSOCKS_PERTHREAD",
                 "NCCL_SOCKET_NTHREADS"):
        assert f"nccl.setting.{name}" in results, name
    label = results["nccl.setting.NCCL_VERSION"]
    loaded = results["nccl.version"].details["version"]
    assert label.status == Status.WARN and loaded in label.summary and "2.11.4" in label.summary
    assert results["nccl.setting.socket_count"].status == Status.PASS


# -- config files ------------------------------------------------------------------------------
def test_config_files_precedence(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".nccl.conf").write_text("# user\nNCCL_DEBUG=WARN\nNCCL_SOCKET_IFNAME==eth0\n")
    etc = tmp_path / "nccl.conf"
    etc.write_text("NCCL_DEBUG=INFO\nNCCL_IB_DISABLE=1\nNCCL_SOCKET_NTHREAD=4\n")
    env = {"HOME": str(home), "NCCL_IB_DISABLE": "0"}
    files = read_config_files(env, str(etc))
    settings = effective_settings(env, files, is_linted)
    assert settings["NCCL_IB_DISABLE"].source == "environment"
    assert settings["NCCL_DEBUG"].value == "WARN" and settings["NCCL_DEBUG"].source.endswith(".nccl.conf")
    assert settings["NCCL_SOCKET_IFNAME"].value == "=eth0"
    typo = lint_one(settings["NCCL_SOCKET_NTHREAD"], FACTS)
    assert typo.status == Status.WARN and typo.source == str(etc)
    assert check_config_files(files, env).status == Status.PASS


def test_nccl_conf_file_replaces_the_home_file(tmp_path):
    conf = tmp_path / "job.conf"
    conf.write_text("NCCL_DEBUG=TRACE\n")
    env = {"NCCL_CONF_FILE": str(conf), "HOME": str(tmp_path)}
    (tmp_path / ".nccl.conf").write_text("NCCL_DEBUG=WARN\n")
    files = read_config_files(env, str(tmp_path / "absent.conf"))
    assert [f.why for f in files] == ["NCCL_CONF_FILE", "/etc/nccl.conf"]
    assert effective_settings(env, files, is_linted)["NCCL_DEBUG"].value == "TRACE"


@pytest.mark.parametrize("content,word", [(b"\x7fELF\x00\x01binary", "binary"),
                                          (b"\xff\xfe\xfa not utf8", "not UTF-8")])
def test_unreadable_config_file_warns(tmp_path, content, word):
    conf = tmp_path / "nccl.conf"
    conf.write_bytes(content)
    files = read_config_files({}, str(conf))
    result = check_config_files(files, {})
    assert result.status == Status.WARN and word in result.summary


def test_config_file_problems(tmp_path):
    missing = check_config_files(read_config_files({"NCCL_CONF_FILE": str(tmp_path / "x")},
                                                   str(tmp_path / "y")),
                                 {"NCCL_CONF_FILE": str(tmp_path / "x")})
    assert missing.status == Status.WARN and "no such file" in missing.summary
    bad = tmp_path / "nccl.conf"
    bad.write_text("NCCL_DEBUG=INFO\njust words\n")
    result = check_config_files(read_config_files({}, str(bad)), {})
    assert result.status == Status.WARN and "[2]" in result.summary
    assert check_config_files(read_config_files({}, str(tmp_path / "none")), {}).status == Status.PASS


def test_config_file_that_is_a_device_or_fifo_is_not_read(tmp_path):
    """NCCL_CONF_FILE=/dev/zero must not read forever."""
    import os
    fifo = tmp_path / "fifo.conf"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo)):
        files = read_config_files({"NCCL_CONF_FILE": path}, str(tmp_path / "none"))
        assert files[0].error == "not a regular file"
        assert check_config_files(files, {"NCCL_CONF_FILE": path}).status == Status.WARN


def test_setting_checks_say_which_list_of_names_they_used():
    """details.names_from: the loaded library's names or the shipped table, per check."""
    from ncclcheck.ncclib.library_names import SHIPPED, NameSource
    from ncclcheck.probes.nccl.settings import verdict_result
    library = NameSource(frozenset({"NCCL_RUN_DIAGNOSTICS"}), "/opt/nccl/libnccl.so.2", "2.32.3")
    known = verdict_result(verdict("NCCL_RUN_DIAGNOSTICS", "1", LintFacts(names=library)))
    assert known.id == "nccl.setting.NCCL_RUN_DIAGNOSTICS" and known.status == Status.PASS
    assert known.details["names_from"] == "names read from /opt/nccl/libnccl.so.2 (NCCL 2.32.3)"
    unknown = verdict_result(verdict("NCCL_NOT_A_THING", "1", LintFacts(names=SHIPPED)))
    assert unknown.status == Status.WARN and unknown.details["names_from"] == SHIPPED.label
    assert "shipped table" in unknown.details["names_from"]
    judged_by_rule = verdict_result(verdict("NCCL_DEBUG", "WARN"))
    assert "names_from" not in judged_by_rule.details
