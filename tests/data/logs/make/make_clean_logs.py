"""Re-create the corpus's noisy clean logs: healthy runs of real torchrun, Gloo, Lightning and
libnccl on this machine that print what healthy runs print.

    python tests/data/logs/make/make_clean_logs.py [--out DIR] [NAME ...]

A diagnosis that reads a failed run's log must find nothing in a run that succeeded, and
real successful runs are rarely quiet: torchrun restarts a group and the second attempt
finishes, a training loop logs a traceback it handled, a store wait is retried, libraries warn,
metrics are named error_rate or timeout_count, NCCL_DEBUG=INFO prints pages of INFO. Each
scenario runs the real software (noisy_worker.py, noisy_lightning.py, the libnccl wheel) and
stores stdout and stderr together, as ``2>&1 | tee`` would, paths made neutral as
make_real_logs.py does. By default the logs go to clean/; tests/test_explain_clean.py makes
some of them again in a temporary folder so that this script cannot rot.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_real_logs import HERE, PY, REPO, TORCHRUN, base_env, free_port, neutral  # noqa: E402

WORKER = str(HERE / "noisy_worker.py")
LIGHTNING = str(HERE / "noisy_lightning.py")
CLEAN = HERE.parent / "clean"


def run(argv: list[str], env: dict[str, str], timeout: float) -> str:
    """What ``argv`` printed, stdout and stderr in one stream. The launcher and every process
    it starts share a process group of their own, killed whole when the run passes
    ``timeout`` seconds or ends, so no worker outlives its scenario."""
    proc = subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        out, _ = proc.communicate(timeout=30)
        out += b"\n[make_clean_logs: timed out]\n"
    _kill_group(proc.pid)
    return out.decode("utf-8", "replace")


def _kill_group(group: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


def torchrun(scenario: str, *options: str, timeout: float = 150, **env: str) -> str:
    """torchrun, 2 processes on loopback with a c10d rendezvous (the form multi-node jobs
    use), running one noisy_worker scenario."""
    with tempfile.TemporaryDirectory() as tmp:
        argv = TORCHRUN + ["--nnodes=1", "--nproc-per-node=2", "--rdzv-backend=c10d",
                           f"--rdzv-endpoint=127.0.0.1:{free_port()}", *options,
                           WORKER, scenario]
        return run(argv, base_env(SCENARIO_DIR=tmp, **env), timeout=timeout)


# With the agent's TCPStore shared with the workers (the default), a restarted group can read
# the previous attempt's Gloo addresses from it and fail to connect, now and then; a store of
# their own per attempt, torch's documented opt-out, makes the restart recover every time.
FRESH_STORE = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


def restart_raise() -> str:
    return torchrun("restart_raise", "--max-restarts=1", **FRESH_STORE)


def restart_exit() -> str:
    """The exit-status variant, with the elastic agent's INFO lines (LOGLEVEL=INFO)."""
    return torchrun("restart_exit", "--max-restarts=1", LOGLEVEL="INFO", **FRESH_STORE)


def handled_exception() -> str:
    return torchrun("handled")


def store_retry() -> str:
    return torchrun("store_retry")


def torch_warnings() -> str:
    return torchrun("warnings")


def debug_detail() -> str:
    """TORCH_DISTRIBUTED_DEBUG=DETAIL and TORCH_CPP_LOG_LEVEL=INFO: c10d's own INFO lines."""
    return torchrun("plain", TORCH_DISTRIBUTED_DEBUG="DETAIL", TORCH_CPP_LOG_LEVEL="INFO")


def error_metrics() -> str:
    return torchrun("metrics")


def nccl_info() -> str:
    return torchrun("nccl_info", NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="ALL")


@contextlib.contextmanager
def resetting_server() -> Iterator[str]:
    """An HTTP server on loopback whose first connection is reset (SO_LINGER 0, so the
    kernel sends RST), every later one answered: a flaky data server."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(1.0)
    stop = threading.Event()

    def serve() -> None:
        served = 0
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                with contextlib.suppress(OSError):
                    conn.recv(65536)
                if served == 0:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                else:
                    body = b"\0" * 4096
                    with contextlib.suppress(OSError):
                        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s"
                                     % (len(body), body))
                served += 1

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/shards/train-00000.tar"
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()


def connection_reset_retried() -> str:
    with resetting_server() as url:
        return torchrun("fetch_retry", SCENARIO_URL=url)


def lightning_ddp() -> str:
    """Lightning's own DDP launcher, 2 CPU processes, progress bar, CSV logger, validation."""
    with tempfile.TemporaryDirectory() as tmp:
        env = base_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), SCENARIO_DIR=tmp)
        return run([PY, LIGHTNING], env, timeout=240)


# name -> how it is made, and what ran (the index's origin line)
SCENARIOS: dict[str, tuple[Callable[[], str], str]] = {
    "noise-torchrun-restart-raise-ok.log": (
        restart_raise,
        ("real: torchrun 2 ranks Gloo --max-restarts 1, c10d rendezvous, "
         "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1; attempt 0 rank 1 "
         "raises RuntimeError (torch.load of a half-written checkpoint), torchrun restarts the "
         "group, attempt 1 trains and finishes")),
    "noise-torchrun-restart-exit-ok.log": (
        restart_exit,
        ("real: torchrun 2 ranks Gloo --max-restarts 1, LOGLEVEL=INFO, "
         "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1; attempt 0 rank 1 exits "
         "with status 1, torchrun restarts the group, attempt 1 trains and finishes")),
    "noise-handled-exception-ok.log": (
        handled_exception,
        ("real: torchrun 2 ranks Gloo; rank 1's torch.stack raises on one batch, the loop logs "
         "it with logging.exception (full traceback), skips the batch and finishes")),
    "noise-store-wait-retried-ok.log": (
        store_retry,
        ("real: torchrun 2 ranks Gloo; rank 1's TCPStore wait times out once "
         "(DistStoreError logged as a warning), the retry succeeds and training finishes")),
    "noise-torch-warnings-ok.log": (
        torch_warnings,
        ("real: torchrun 2 ranks Gloo; torch's own UserWarning/FutureWarning lines "
         "(TypedStorage, torch.cuda.amp.GradScaler on CPU, implicit softmax dim, resized out=)")),
    "noise-torch-debug-detail-ok.log": (
        debug_detail,
        ("real: torchrun 2 ranks Gloo with TORCH_DISTRIBUTED_DEBUG=DETAIL, "
         "TORCH_CPP_LOG_LEVEL=INFO")),
    "noise-error-named-metrics-ok.log": (
        error_metrics,
        ("real: torchrun 2 ranks Gloo; rank 0 prints metrics named error_rate, val/error, "
         "timeout_count, failed_samples, loss_oom_skipped, '0 errors', 'no NaN' each step")),
    "noise-nccl-info-in-gloo-run-ok.log": (
        nccl_info,
        ("real: torchrun 2 ranks Gloo, rank 0 calls libnccl's ncclGetUniqueId in-process with "
         "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ALL, then trains")),
    "noise-connection-reset-retried-ok.log": (
        connection_reset_retried,
        ("real: torchrun 2 ranks Gloo; rank 0's urllib fetch of a shard is reset by the server "
         "(ConnectionResetError 104 logged as a warning), the retry succeeds")),
    "noise-lightning-ddp-progress-ok.log": (
        lightning_ddp,
        ("real: Lightning DDP on CPU (its own launcher, 2 processes, Gloo), 2 epochs with "
         "validation, progress bar (carriage returns kept), CSV logger, checkpointing")),
}


# Each scenario's ranks say they finished; a run that did not is no clean log.
FINISHED = re.compile(r"rank (\d+): (?:training finished after \d+ steps|fit done)")


def make(name: str, folder: Path) -> Path:
    """Run one scenario and store its neutralised output under ``folder``, as printed
    (carriage returns kept); refuse a run in which a rank did not finish."""
    text = neutral(SCENARIOS[name][0]())
    finished = {int(rank) for rank in FINISHED.findall(text)}
    if finished != {0, 1}:
        raise SystemExit(f"{name}: ranks {sorted(finished)} finished, not 0 and 1:\n"
                         f"{text[-3000:]}")
    target = folder / name
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
    return target


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=CLEAN, help="where the logs go")
    parser.add_argument("names", nargs="*", metavar="NAME", help=", ".join(SCENARIOS))
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(SCENARIOS))
    if unknown:
        parser.error(f"no such scenario: {', '.join(unknown)}")
    for name in args.names or SCENARIOS:
        target = make(name, args.out)
        lines = len(target.read_bytes().splitlines())
        print(f"{target.parent.name}/{name}: {lines} lines", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
