"""The verdict beside a root cause (who fixes it, whether a requeue can succeed, the hosts to
drain): one table over every category, in every format, and `explain --on-fail drain` through a
real Slurm."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from ncclcheck.catalogue import load
from ncclcheck.cli import cli
from ncclcheck.model import Category
from ncclcheck.verdicts import RULES, Owner, named_hosts, rule_for, verdict_line, verdict_of

LOGS = Path(__file__).resolve().parent / "data" / "logs"
MOTIVATING = LOGS / "written" / "lightning-motivating-case-6of4.log"
CLEAN = LOGS / "clean" / "nccl-info-multinode-ok.log"
NCCLCHECK = [sys.executable, "-m", "ncclcheck"]


def ib_error(host: str) -> str:
    """NCCL's RDMA completion error (retry exceeded) as ``host`` prints it."""
    return (f"{host}:3301:3371 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion "
            "from peer 10.0.0.2<53487> with error 12, opcode 0, len 0, vendor err 129 (Send) "
            "localGid ::ffff:10.0.0.1 remoteGid ::ffff:10.0.0.2\n")


def root(finding_id: str, category: str, host: str | None = None,
         hosts: list[str] | None = None, **facts) -> dict:
    return {"id": finding_id, "category": category, "host": host,
            "hosts": hosts if hosts is not None else ([host] if host else []), "facts": facts}


# -- the table -------------------------------------------------------------------------------
def test_every_category_has_a_verdict():
    """A category added to the taxonomy without a row fails here."""
    missing = [c.value for c in Category if c.value not in RULES]
    assert not missing, f"categories without a verdict in ncclcheck/verdicts.py: {missing}"


def test_every_signature_row_names_a_signature_and_changes_its_category_s_verdict():
    catalogue = {s.id: s for s in load().signatures}
    categories = {c.value for c in Category}
    for key, rule in RULES.items():
        if key in categories:
            continue
        assert key in catalogue, f"{key}: no such signature"
        assert rule != RULES[catalogue[key].category.value], f"{key}: same as its category"


def test_every_signature_of_the_catalogue_gets_a_verdict():
    for sig in load().signatures:
        assert isinstance(rule_for(sig.id, sig.category.value).owner, Owner)


@pytest.mark.parametrize("finding, owner, retry, drain", [
    (root("nccl.ib_completion_error", "infiniband", "node3"), "infrastructure", True, ["node3"]),
    # printed on two hosts: which one is at fault is not said, and a requeue may land there
    (root("nccl.ib_completion_error", "infiniband", "node3", ["node3", "node4"]),
     "infrastructure", False, []),
    (root("nccl.shm_failed", "shared_memory"), "infrastructure", False, []),
    (root("cuda.xid", "cuda", "gpu07"), "infrastructure", True, ["gpu07"]),
    (root("cuda.illegal_memory_access", "cuda", "gpu07"), "code", False, []),
    (root("slurm.node_failure", "rank_crashed", None, [], node="node7"), "infrastructure", True,
     ["node7"]),
    (root("slurm.node_failure", "rank_crashed", None, [], node="node[1-3]"), "infrastructure",
     True, []),
    (root("torch.watchdog_timeout", "timeout", "node1"), "infrastructure", True, []),
    (root("torch.store_port_in_use", "port_in_use", "node1"), "launch", True, []),
    (root("nccl.invalid_rank", "rank_mismatch", "node2"), "launch", False, []),
    (root("nccl.ifname_set", "interface"), "launch", False, []),
    (root("torch.hostname_unresolved", "name_resolution", None, [], hostname="node9"), "launch",
     False, []),
    (root("cuda.out_of_memory", "out_of_memory", "node1"), "code", False, []),
    (root("hang.outside_collective", "desync", "node1"), "code", False, []),
])
def test_verdict_of_a_root_cause(finding, owner, retry, drain):
    verdict = verdict_of(finding).to_dict()
    assert verdict == {"owner": owner, "retry_helps": retry, "drain": drain}


def test_facts_that_name_hosts_win_over_the_host_that_printed():
    assert named_hosts(root("x", "degraded", "node1", hosts=["node1"],
                            slow_hosts=["node5", "node5", "node6"])) == ["node5", "node6"]


def test_the_line_says_owner_retry_and_hosts():
    assert verdict_line({"owner": "infrastructure", "retry_helps": True, "drain": ["node3"]}) \
        == "infrastructure · retry helps · drain node3"
    assert verdict_line({"owner": "launch", "retry_helps": False, "drain": []}) \
        == "launch · retry does not help"


# -- in the document and the formats ---------------------------------------------------------
def test_json_table_and_markdown_show_the_verdict(tmp_path):
    log = tmp_path / "slurm-77.out"
    log.write_text(ib_error("node3"))
    data = json.loads(CliRunner().invoke(cli, ["explain", "--format", "json", str(log)]).stdout)
    assert data["findings"][0]["id"] == "nccl.ib_completion_error"
    assert data["verdict"] == {"owner": "infrastructure", "retry_helps": True,
                               "drain": ["node3"]}
    table = CliRunner().invoke(cli, ["explain", str(log)]).stdout
    assert "  verdict: infrastructure · retry helps · drain node3\n" in table
    markdown = CliRunner().invoke(cli, ["explain", "--format", "markdown", str(log)]).stdout
    assert "- **verdict**: infrastructure · retry helps · drain node3\n" in markdown
    launch = json.loads(CliRunner().invoke(cli, ["explain", "--format", "json",
                                                 str(MOTIVATING)]).stdout)
    assert launch["verdict"] == {"owner": "launch", "retry_helps": False, "drain": []}


def test_no_root_cause_no_verdict():
    data = json.loads(CliRunner().invoke(cli, ["explain", "--format", "json", str(CLEAN)]).stdout)
    assert not [f for f in data["findings"] if f["root_cause"]]
    assert "verdict" not in data
    assert "verdict:" not in CliRunner().invoke(cli, ["explain", str(CLEAN)]).stdout


# -- --on-fail drain -------------------------------------------------------------------------
def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    return {**env, **extra}


def test_on_fail_drain_outside_slurm_is_refused_before_reading(tmp_path):
    started = time.monotonic()
    done = subprocess.run([*NCCLCHECK, "explain", "--on-fail", "drain", "/dev/zero"],
                          capture_output=True, text=True, timeout=60, env=_env())
    assert time.monotonic() - started < 60
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("ncclcheck explain: error: ") and "Slurm" in line, line


def test_on_fail_drain_without_scontrol_says_so(tmp_path):
    log = tmp_path / "ib.log"
    log.write_text(ib_error("node3"))
    done = subprocess.run([sys.executable, "-m", "ncclcheck", "explain", "--on-fail", "drain",
                           "--format", "json", str(log)], capture_output=True, text=True,
                          timeout=120, env=_env(SLURM_JOB_ID="77", PATH=str(tmp_path)))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["verdict"]["drain"] == ["node3"]
    assert done.stderr.splitlines() == [
        "ncclcheck explain: --on-fail drain: could not drain node3: scontrol is not installed: "
        "no node drained"]


def test_on_fail_drain_with_nothing_named_drains_nothing(tmp_path):
    done = subprocess.run([*NCCLCHECK, "explain", "--on-fail", "drain", str(MOTIVATING)],
                          capture_output=True, text=True, timeout=120,
                          env=_env(SLURM_JOB_ID="77", PATH=str(tmp_path)))
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["ncclcheck explain: --on-fail drain: no host named at "
                                        "fault by a root cause: nothing drained"]


@pytest.mark.slurm
def test_on_fail_drain_drains_the_host_the_verdict_names(slurm_cluster, tmp_path):
    host = slurm_cluster.hostname
    log = tmp_path / f"slurm-{host}.out"
    log.write_text(ib_error(host))
    try:
        done = slurm_cluster.run(["srun", "-N1", "-n1", *NCCLCHECK, "explain", "--on-fail",
                                  "drain", "--format", "json", str(log)], timeout=120,
                                 cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["verdict"]["drain"] == [host]
        reason = "ncclcheck: nccl.ib_completion_error: An RDMA work completion failed"
        assert f"ncclcheck explain: --on-fail drain: drained {host} ({reason})" in done.stderr
        listed = slurm_cluster.run(["sinfo", "-R", "-h", "-o", "%n|%E"], timeout=10).stdout
        assert f"{host}|{reason}" in listed.splitlines(), listed
        assert slurm_cluster.node_state() in ("drained", "draining")
    finally:
        slurm_cluster.resume(host)
    assert slurm_cluster.node_state() == "idle"
