"""Shared fixtures. Network-namespace tests skip locally without privileges, but under
CI=true a skip would hide a missing dependency, so there it fails instead."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from netns import Cluster, netns_unavailable_reason  # noqa: E402
from slurm import SlurmCluster, slurm_client_unavailable_reason, slurm_unavailable_reason  # noqa: E402


def require_netns() -> None:
    _skip_or_fail(netns_unavailable_reason())


def require_slurm() -> None:
    _skip_or_fail(slurm_unavailable_reason())


def require_slurm_client() -> None:
    _skip_or_fail(slurm_client_unavailable_reason())


def _skip_or_fail(reason: str | None) -> None:
    """Skip for ``reason`` locally; under CI=true a missing dependency fails instead."""
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session", autouse=True)
def _explain_cache(tmp_path_factory):
    """explain's Hyperscan cache in a folder of the session's, not the user's home (child
    processes inherit it)."""
    if "NCCLCHECK_CACHE_DIR" not in os.environ:
        os.environ["NCCLCHECK_CACHE_DIR"] = str(tmp_path_factory.mktemp("explain-cache"))
    yield


@pytest.fixture
def netns_cluster():
    """A factory: ``netns_cluster(prefix, subnet, nodes=2, ifname="eth0")`` -> Cluster (entered);
    every cluster made is torn down after the test."""
    require_netns()
    made: list[Cluster] = []

    def make(prefix: str, subnet: str, nodes: int = 2, ifname: str = "eth0",
             mtu: int | None = None) -> Cluster:
        cluster = Cluster(prefix, subnet=subnet, nodes=nodes, ifname=ifname, mtu=mtu).__enter__()
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.close()


@pytest.fixture
def clean_env(monkeypatch):
    """An environment with no launcher, NCCL or torch.distributed variables."""
    prefixes = ("RANK", "WORLD_SIZE", "LOCAL_", "NODE_RANK", "GROUP_", "MASTER_", "SLURM", "OMPI_",
                "PMI_", "MPI_LOCAL", "PET_", "JSM_", "LSB_", "TORCHELASTIC", "NCCL_", "TORCH_NCCL",
                "GLOO_", "ROLE_")
    for name in list(os.environ):
        if name.startswith(prefixes):
            monkeypatch.delenv(name, raising=False)
    return monkeypatch


# -- every check id a probe reports in this session must be declared in the registry ----------
PACKAGE = Path(__file__).resolve().parents[1] / "ncclcheck"
# These re-emit ids that came from elsewhere (a rank's report, the rows being summed).
_PASSING_ON = (PACKAGE / "model.py", PACKAGE / "cluster" / "aggregate.py",
               PACKAGE / "cluster" / "fold.py")


def _origin(frame) -> str | None:
    """Where ncclcheck's own code made a CheckResult, or None when a test (or a re-emitter)
    made it: tests build results with made-up ids on purpose."""
    while frame is not None:
        path = Path(frame.f_code.co_filename)
        if frame.f_code.co_name == "from_dict":
            return None
        if path.name.startswith("<") or path == _PASSING_ON[0]:  # dataclass __init__, model.py
            frame = frame.f_back
            continue
        if PACKAGE not in path.parents or path in _PASSING_ON:
            return None
        return f"{path.relative_to(PACKAGE.parent)}:{frame.f_lineno}"
    return None


def pytest_configure(config):
    from ncclcheck.model import CheckResult

    emitted: dict[str, str] = {}
    original = CheckResult.__post_init__

    def recording_post_init(self) -> None:
        original(self)
        where = _origin(sys._getframe(1))
        if where is not None:
            emitted.setdefault(self.id, where)

    CheckResult.__post_init__ = recording_post_init
    config.stash[_EMITTED] = emitted


_EMITTED = pytest.StashKey[dict]()


def pytest_sessionfinish(session, exitstatus):
    emitted = session.config.stash.get(_EMITTED, {})
    if not emitted:
        return
    from ncclcheck.probes.registry import load_registry
    registry = load_registry()
    unknown = {i: where for i, where in emitted.items() if registry.find(i) is None}
    if unknown:
        lines = "\n".join(f"  {i} (made at {where})" for i, where in sorted(unknown.items()))
        session.config.get_terminal_writer().line(
            f"check ids reported during the tests but declared by no check (ncclcheck/probes/<family>/):\n{lines}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """A real single-host Slurm (munged, slurmctld, slurmd) shared by the session; each daemon
    is stopped by its pid at the end, and the teardown fails if any of them is left running."""
    require_slurm()
    cluster = SlurmCluster.start(tmp_path_factory.mktemp("slurm"))
    yield cluster
    cluster.stop()
    left = cluster.running_pids()
    assert not left, f"Slurm processes still running after teardown: {left}"


@pytest.fixture(scope="session")
def cycling_real_dump(tmp_path_factory) -> bytes:
    """300 collectives (all_reduce, every third a broadcast) in a 200-entry buffer, written
    once for the session by torch's own flight recorder over Gloo (one rank, a subprocess):
    the ring wrapped. Read-only bytes, shared by every module that reads a wrapped real dump."""
    from frdumps import CYCLING_COLLECTIVES, torch_dump
    return torch_dump(tmp_path_factory.mktemp("real-cycling"), 200, CYCLING_COLLECTIVES)
