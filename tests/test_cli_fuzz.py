"""A fuzz test of the whole command line (issue 15): every command, with generated option values
(numbers at the edges, nan/inf, unicode, paths that do not exist or cannot be written) and
generated launcher / NCCL environment values (random strings, huge and negative integers, empty,
whitespace). Whatever comes in:

* the exit code is 0, 1 or 2;
* stderr holds no Python traceback and no C++ stack;
* with --format json and exit code 0 or 1, stdout is exactly one JSON document;
* the command finishes within its --timeout + 5 s;
* no process it started is left behind.

Derandomized and bounded, so it is a regression test, not a lottery. ``--lightning`` and
``--cluster-env`` are left out: they import Lightning (and torch) while parsing, a fixed cost of
several seconds on a small machine that no --timeout covers (tests/test_lightning_*.py cover them).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_cli import LAUNCHER_PREFIXES

SLACK_S = 5.0          # the contract: nothing outlives --timeout by more than a few seconds
DEFAULT_TIMEOUT = "2"  # given before the generated options, so a generated one overrides it
C_STACK_MARKS = ("Traceback (most recent call last)", "terminate called", "Exception raised from",
                 "frame #0", "Segmentation fault", "core dumped", "Fatal Python error")
SETTINGS = settings(derandomize=True, deadline=None, database=None, max_examples=10,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])

EDGE_NUMBERS = ["0", "-0", "-1", "1", "0.1", "0.05", "1e308", "-1e308", "1e-320", "nan", "-nan",
                "inf", "-inf", "65535", "65536", str(2 ** 63), str(-2 ** 63), "1" * 40, "0x10",
                "1_000", " 7 ", "\u0661\u0662", ""]
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
               max_size=24)
NUMBER = st.one_of(st.sampled_from(EDGE_NUMBERS), st.integers(-2 ** 70, 2 ** 70).map(str),
                   st.floats(allow_nan=True, allow_infinity=True).map(repr), TEXT)
# A --timeout that either is refused or is short, so every example stays quick.
TIMEOUT = st.one_of(st.sampled_from(["nan", "inf", "-1", "0", "1e308", "0.05", "abc", "",
                                     "604801"]),
                    st.floats(0.1, 3.0).map(lambda s: f"{s:.2f}"))
FORMAT = st.sampled_from(["table", "json", "markdown", "yaml", "JSON", ""])
ENV_VALUE = st.one_of(st.sampled_from(["", " ", "\t", "\n", "-1", "0", "1", "2", "99999",
                                       str(2 ** 64), str(-2 ** 63), "1e3", "nan", "eth0",
                                       "^lo", "=", "^", ",", "localhost", "127.0.0.1", "::1",
                                       "node[1-4]", "node[0-99999999]"]),
                      st.integers(-2 ** 70, 2 ** 70).map(str), TEXT)
ENV_NAMES = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK",
             "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "SLURM_PROCID",
             "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_JOB_NODELIST",
             "SLURM_NTASKS_PER_NODE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
             "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY", "NCCL_DEBUG",
             "NCCL_IB_HCA", "NCCL_COMM_ID", "NCCL_NET", "NCCL_P2P_LEVEL", "NCCL_NSOCKS_PERTHREAD",
             "NCCL_SOCKET_NTHREADS", "NCCL_IB_GID_INDEX", "CUDA_VISIBLE_DEVICES", "NCCL_CONF_FILE"]
ENV = st.dictionaries(st.sampled_from(ENV_NAMES), ENV_VALUE, max_size=6)


def path_values(tmp: Path) -> st.SearchStrategy[str]:
    return st.sampled_from(["/no/such/dir/out.xml", "/proc/version", "/", "", "-",
                            str(tmp / "ok.xml"), str(tmp / "ünï cødé.png"), str(tmp / "x.png"),
                            str(tmp / "missing" / "x.xml"), "/proc/self/nope/x.xml"])


def common_options(tmp: Path) -> dict[str, st.SearchStrategy[str] | None]:
    """Every probe command's options; None marks a flag."""
    return {"--format": FORMAT, "--junit": path_values(tmp), "--timeout": TIMEOUT,
            "--strict": None, "--nodes": NUMBER, "--num-nodes": NUMBER,
            "--gpus-per-node": NUMBER, "--devices": NUMBER, "--store-port": NUMBER}


def command_options(command: str, tmp: Path) -> dict[str, st.SearchStrategy[str] | None]:
    families = st.one_of(st.sampled_from(["ranks", "net,nccl", ",,", "", "ranks,telepathy",
                                          "RANKS", " ranks , net ", "bench"]), TEXT)
    extra: dict[str, dict[str, st.SearchStrategy[str] | None]] = {
        "run": {"--checks": families, "--skip": families},
        "ranks": {},
        "net": {"--mesh-full-max": NUMBER, "--mesh-connect-timeout": NUMBER},
        "nccl": {"--nccl-lib": st.one_of(path_values(tmp), st.just("/bin/ls"))},
        "bench": {"--backend": st.sampled_from(["auto", "gloo", "nccl", "mpi", ""]),
                  "--nproc": st.sampled_from(["1", "2", "3", "0", "-1", "1025", "nan", "x"]),
                  "--min-bytes": st.sampled_from(["1", "1K", "0", "-1", "1Q", "nan", "64K"]),
                  "--factor": NUMBER, "--iters": NUMBER, "--warmup": NUMBER,
                  "--dtype": st.sampled_from(["float32", "float16", "int8", "complex", ""]),
                  "--min-busbw": NUMBER, "--plot": path_values(tmp)},
    }
    return {**common_options(tmp), **extra[command]}


@st.composite
def invocation(draw, command: str, tmp: Path) -> list[str]:
    options = command_options(command, tmp)
    chosen = draw(st.lists(st.sampled_from(sorted(options)), max_size=4, unique=True))
    args = [command, "--timeout", DEFAULT_TIMEOUT]
    if command == "run":
        args.append("--no-bench")  # the sweep is the bench command's business here
    if command == "bench":
        args += ["--max-bytes", "64K", "--iters", "2", "--warmup", "0"]
    for name in chosen:
        value = options[name]
        args += [name] if value is None else [f"{name}={draw(value)}"]
    return args


def effective_timeout(args: list[str]) -> float:
    """The --timeout the command runs under: the last one given, when click accepts it."""
    given_last = [a.split("=", 1)[1] for a in args if a.startswith("--timeout=")]
    try:
        value = float(given_last[-1]) if given_last else float(DEFAULT_TIMEOUT)
    except ValueError:
        return float(DEFAULT_TIMEOUT)
    return value if 0.1 <= value <= 3.0 else float(DEFAULT_TIMEOUT)


def _session_members(sid: int) -> list[str]:
    """Processes still alive in the session the command was started in (its leftovers)."""
    left = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[3]) == sid:  # state, ..., session id
            left.append(f"{entry.name}: {stat[:80]}")
    return left


def judge(args: list[str], env_extra: dict[str, str], cwd: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_PREFIXES)
           and not k.startswith(("NCCL_", "GLOO_", "CUDA_VISIBLE"))}
    env.update(env_extra)
    limit = effective_timeout(args) + SLACK_S
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "ncclcheck", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"ran past --timeout + {SLACK_S:g} s ({limit:g} s): {args} {env_extra}")
    took = time.monotonic() - started
    stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
    where = f"{args} env={env_extra} rc={proc.returncode} took={took:.1f}s\n{stderr[-1500:]}"
    assert proc.returncode in (0, 1, 2), where
    assert not [m for m in C_STACK_MARKS if m in stderr], where
    if _last_format(args) == "json":
        if proc.returncode in (0, 1):
            json.loads(stdout)  # exactly one document: extra data raises
    time.sleep(0.2)  # a child killed at exit needs a moment to be reaped by init
    leftovers = _session_members(proc.pid)
    if leftovers:
        os.killpg(proc.pid, signal.SIGKILL)
    assert not leftovers, f"{where}\nleft behind: {leftovers}"


def _last_format(args: list[str]) -> str:
    formats = [a.split("=", 1)[1] for a in args if a.startswith("--format=")]
    return formats[-1] if formats else "table"


@pytest.mark.slow  # four commands' real probes under generated input (17 s): the full suite's
@pytest.mark.parametrize("command", ["run", "ranks", "net", "nccl"])
def test_probe_commands_survive_any_input(command, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"fuzz-{command}")

    @SETTINGS
    @given(args=invocation(command, tmp), env=ENV, as_json=st.booleans())
    def check(args, env, as_json):
        judge(args + (["--format=json"] if as_json else []), env, tmp)

    check()


@pytest.mark.slow  # seconds: the full suite runs it, the quick loop leaves it out
def test_bench_survives_any_input(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz-bench")

    @settings(SETTINGS, max_examples=6)
    @given(args=invocation("bench", tmp), env=ENV, as_json=st.booleans())
    def check(args, env, as_json):
        judge(args + (["--format=json"] if as_json else []), env, tmp)

    check()


@pytest.mark.slow  # seconds: the full suite runs it, the quick loop leaves it out
def test_explain_and_checks_survive_any_input(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz-explain")
    (tmp / "empty.log").write_bytes(b"")
    (tmp / "folder").mkdir()
    (tmp / "binary.bin").write_bytes(bytes(range(256)) * 8)
    paths = st.sampled_from([str(tmp / "empty.log"), str(tmp / "folder"), str(tmp / "binary.bin"),
                             "/no/such/log", "/bin/ls", "/proc/version", str(tmp)])
    flags = st.lists(st.sampled_from(["--exit-code", "--list", "--format=json",
                                      "--format=markdown", "--format=yaml"]), max_size=2)
    explain = st.tuples(st.just(["explain"]), flags, st.lists(st.one_of(paths, TEXT), max_size=2))
    checks = st.tuples(st.just(["checks"]), st.lists(st.sampled_from(
        ["--format=json", "--format=table", "--format=nope"]), max_size=1),
        st.lists(st.one_of(TEXT, st.sampled_from(["net.*", "nccl.setting.NCCL_DEBUG", "."])),
                 max_size=1))

    @settings(SETTINGS, max_examples=12)
    @given(parts=st.one_of(explain, checks), env=ENV)
    def check(parts, env):
        judge([*parts[0], *parts[1], "--", *parts[2]] if parts[2] else [*parts[0], *parts[1]],
              env, tmp)

    check()
