"""Slurm hostlist expansion: the parser, checked against Slurm's own ``scontrol show hostnames``."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import require_slurm_client
from ncclcheck.launchers.hostlist import expand, expand_hostlist, first_host
from slurm import minimal_conf


@pytest.mark.parametrize("hostlist, hosts", [
    ("gpu[01-04,07],login1", ["gpu01", "gpu02", "gpu03", "gpu04", "gpu07", "login1"]),
    ("rack[1-2]-gpu[01-02]", ["rack1-gpu01", "rack1-gpu02", "rack2-gpu01", "rack2-gpu02"]),
    ("node[08-11]", ["node08", "node09", "node10", "node11"]),
    ("node[9-11]", ["node9", "node10", "node11"]),
    ("a[1-010]", [f"a{i}" for i in range(1, 11)]),
    ("a[001-3],b", ["a001", "a002", "a003", "b"]),
    ("host5", ["host5"]),
    ("a b,c", ["a", "b", "c"]),
    ("n[0-1],n[0-1]", ["n0", "n1", "n0", "n1"]),
    ("a[1-2][3-4]", ["a13", "a14", "a23", "a24"]),
    ("", []),
])
def test_expand(hostlist, hosts):
    assert expand(hostlist) == hosts


@pytest.mark.parametrize("bad", ["a[5-3]", "a[]", "a[1-2", "a]", "a[x]", "a[1-2]]"])
def test_malformed_hostlists_raise(bad):
    with pytest.raises(ValueError):
        expand(bad)


def test_first_host_is_the_first_expanded_name():
    assert first_host("gpu[07-09],login1") == "gpu07"
    assert first_host("") is None


def test_parser_is_used_and_says_why_when_scontrol_is_missing(tmp_path):
    result = expand_hostlist("gpu[1-2]", env={"PATH": str(tmp_path)})
    assert (result.hosts, result.source, result.first) == (("gpu1", "gpu2"), "parser", "gpu1")
    assert result.note == "scontrol is not installed"


def test_scontrol_is_preferred_when_it_answers(tmp_path):
    require_slurm_client()
    env = {"PATH": "/usr/bin:/bin", "SLURM_CONF": str(minimal_conf(tmp_path))}
    result = expand_hostlist("gpu[01-02],x", env=env)
    assert (result.hosts, result.source, result.note) == (("gpu01", "gpu02", "x"), "scontrol", None)


def test_scontrol_rejecting_a_hostlist_falls_back_and_keeps_its_message(tmp_path):
    require_slurm_client()
    env = {"PATH": "/usr/bin:/bin", "SLURM_CONF": str(minimal_conf(tmp_path))}
    # Slurm 22.05 rejects text after the last bracket; the parser expands it.
    result = expand_hostlist("a[1-2]b", env=env)
    assert result.source == "parser" and result.hosts == ("a1b", "a2b")
    assert "Invalid hostlist" in result.note


# -- the parser against Slurm's own expansion ------------------------------------------------
_NAME = st.from_regex(r"[a-z][a-z0-9_-]{0,4}", fullmatch=True).filter(
    lambda s: not s[-1].isdigit())
_INNER = st.from_regex(r"[a-z_-]{1,3}", fullmatch=True)


@st.composite
def _range(draw) -> str:
    width = draw(st.integers(1, 3))
    low = draw(st.integers(0, 10 ** width - 1))
    high = draw(st.integers(low, low + 12))
    padded = str(low).zfill(width)
    return padded if draw(st.booleans()) else f"{padded}-{high}"


@st.composite
def _item(draw) -> str:
    """One host expression as Slurm writes them: prefix text and bracket groups, ending with a
    group (Slurm 22.05 rejects text after the last group) or with no group at all."""
    groups = draw(st.integers(0, 2))
    text = draw(_NAME)
    for index in range(groups):
        if index:
            text += draw(_INNER)
        text += "[" + ",".join(draw(st.lists(_range(), min_size=1, max_size=3))) + "]"
    return text


_HOSTLIST = st.lists(_item(), min_size=1, max_size=4).map(",".join)


@pytest.fixture(scope="module")
def scontrol_env(tmp_path_factory):
    require_slurm_client()
    return {"PATH": "/usr/bin:/bin",
            "SLURM_CONF": str(minimal_conf(tmp_path_factory.mktemp("scontrol")))}


@settings(max_examples=100, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hostlist=_HOSTLIST)
def test_parser_matches_scontrol_show_hostnames(scontrol_env, hostlist):
    done = subprocess.run(["scontrol", "show", "hostnames", hostlist], capture_output=True,
                          text=True, timeout=10, env=scontrol_env)
    assert done.returncode == 0 and done.stdout.split(), done.stderr
    assert expand(hostlist) == done.stdout.split()
