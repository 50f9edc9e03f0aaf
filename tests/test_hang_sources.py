"""Where a snapshot's facts come from, each read from the real thing: faulthandler's text of a
live process, the armed hook in a real process and the signal that asks it, NCCL RAS's
documented output (and a client on the PATH that prints it), the snapshot files, the job's
processes found in /proc."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ncclcheck.hang import ras, trigger
from ncclcheck.hang.discover import is_launcher, named
from ncclcheck.hang.faulttext import parse
from ncclcheck.hang.files import documents, join, load, sniff_snapshot, write
from ncclcheck.hang.frames import deciding_thread, is_idle_loop, where
from ncclcheck.hang.model import NodeSnapshot, ProcessSnapshot, Sample, ThreadStack
from ncclcheck.hang.procstate import caught_signals

DATA = Path(__file__).parent / "data" / "hang"
ROOT = Path(__file__).resolve().parents[1]
PYTHON_ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

STUCK_SCRIPT = textwrap.dedent("""
    import sys, threading, time
    def background():
        time.sleep(600)
    def stuck_here():
        {arm}
        print("ready", flush=True)
        time.sleep(600)
    threading.Thread(target=background, name="background", daemon=True).start()
    stuck_here()
""")


def start(code: str, env: dict | None = None) -> subprocess.Popen:
    """A Python process in a session of its own (stop() ends it and whatever it started)."""
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             env={**PYTHON_ENV, **(env or {})}, start_new_session=True)
    assert child.stdout.readline().strip() == "ready"
    return child


def stop(child: subprocess.Popen) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.wait(timeout=10)


def test_faulthandler_text_of_a_live_process_names_the_main_thread():
    code = textwrap.dedent("""
        import faulthandler, sys, threading, time
        def background():
            time.sleep(600)
        def here():
            faulthandler.dump_traceback(sys.stdout, all_threads=True)
        threading.Thread(target=background, daemon=True).start()
        time.sleep(0.2)
        here()
    """)
    text = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=30).stdout
    threads = parse(text)
    main = [t for t in threads if t.main]
    assert len(threads) == 2 and len(main) == 1
    assert [f.function for f in main[0].frames] == ["here", "<module>"]
    assert main[0].name == "MainThread"
    assert deciding_thread(threads) is main[0]


def test_an_armed_process_writes_its_stacks_on_the_signal_and_lives_on(tmp_path):
    arm = f"from ncclcheck.hang import arm; arm(folder={str(tmp_path)!r})"
    child = start(STUCK_SCRIPT.format(arm=arm))
    try:
        marker = trigger.find_marker(child.pid, str(tmp_path))
        assert marker is not None and marker.signal == signal.SIGUSR2
        assert marker.env == {}  # no launcher variable in this process
        answer = trigger.ask(marker, 10.0)
        assert answer.problem is None, answer.problem
        chosen = deciding_thread(answer.threads)
        assert where(chosen).user.function == "stuck_here" and chosen.name == "MainThread"
        names = {t.name for t in answer.threads}
        assert {"background", "ncclcheck-armed"} <= names
        watcher = next(t for t in answer.threads if t.name == "ncclcheck-armed")
        assert is_idle_loop(watcher)
        again = trigger.ask(marker, 10.0)  # a second signal reads the second dump only
        assert len(again.threads) == len(answer.threads)
        assert child.poll() is None  # the signal did not end it
    finally:
        stop(child)


def test_no_signal_goes_to_a_process_that_does_not_catch_it(tmp_path):
    child = start(STUCK_SCRIPT.format(arm="pass"))
    try:
        assert not caught_signals(child.pid) & (1 << (signal.SIGUSR2 - 1))
        fake = trigger.Marker(child.pid, None, int(signal.SIGUSR2), str(tmp_path / "s"),
                              str(tmp_path / "d"), str(tmp_path / "f"), None)
        answer = trigger.ask(fake, 2.0)
        assert answer.threads == [] and "does not catch" in answer.problem.what
        reused = trigger.Marker(child.pid, 1, int(signal.SIGUSR2), "", "", "", None)
        assert "not the process that armed" in trigger.ask(reused, 2.0).problem.what
        time.sleep(0.2)
        assert child.poll() is None
    finally:
        stop(child)


def test_ras_text_reports_as_documented():
    report = ras.parse_text((DATA / "ncclras_incomplete.txt").read_text())
    assert report.communicators[0]["size"] == 32 and report.communicators[0]["errors"] == \
        "INCOMPLETE"
    assert report.missing_ranks(32) == [21]
    assert [(m.pid, m.host, m.gpu, m.why) for m in report.missing if m.rank is None] == [
        (3487984, "172.16.64.213", 5, "unresponsive")]
    assert report.warnings == ["TIMEOUT"]
    dead = ras.parse_text((DATA / "ncclras_dead.txt").read_text())
    assert [(d.pid, d.why) for d in dead.dead] == [(3487984, "dead")]
    assert dead.missing_ranks() == [21]
    mismatch = ras.parse_text((DATA / "ncclras_mismatch.txt").read_text())
    assert [o.rank for o in mismatch.outliers] == [0, 2, 3, 4, 5, 7]
    assert mismatch.outliers[0].why == "6 ranks have launched up to operation 6649"
    assert mismatch.missing == []


def test_ras_json_report_as_documented():
    report = ras.parse_json((DATA / "ncclras.json").read_text())
    assert report.missing_ranks(2) == [1] and report.missing_ranks(8) == []
    assert report.missing[0].why == "unresponsive" and report.missing[0].pid == 1524345


def test_a_ras_client_on_the_path_is_asked_json_first_then_text(tmp_path, monkeypatch):
    client = tmp_path / "ncclras"
    client.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        case "$*" in *"-f json"*) echo "unknown option -f" >&2; exit 1;; esac
        echo "$*" > {tmp_path}/args
        cat {DATA / 'ncclras_incomplete.txt'}
    """))
    client.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    report, why = ras.query(3.0, "localhost:28029")
    assert why is None and report.form == "text" and report.missing_ranks(32) == [21]
    assert (tmp_path / "args").read_text().split() == ["-h", "localhost", "-p", "28029", "-t",
                                                       "3", "-v"]
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    assert ras.query(3.0) == (None, None)


def _snapshot() -> NodeSnapshot:
    record = ProcessSnapshot(4121, "node3", 2, 2, 4, 4, "torchrun",
                             "python train.py --hf-token hf_abcdefghijklmnopqrstuvwxyz0123456789",
                             {"RANK": "2", "HF_TOKEN": "secret-value-1234", "WORLD_SIZE": "4"})
    record.samples = [Sample(0.0, None, [ThreadStack(1, 4121, "MainThread", [], False, True)])]
    return NodeSnapshot("node3", "2026-12-07T04:00:00+00:00", 3, 1.0, 2.1, [record])


def test_snapshot_files_round_trip_recognised_by_content_and_masked(tmp_path):
    node = _snapshot()
    paths = write(node, str(tmp_path))
    assert [Path(p).name for p in paths] == ["hang-node3-4121.json"]
    raw = Path(paths[0]).read_bytes()
    assert sniff_snapshot(raw[:8192])
    assert b"secret-value-1234" not in raw and b"hf_abcdefghijklmnop" not in raw
    with open(paths[0], "rb") as handle:
        loaded = load(handle, paths[0])
    assert loaded.process.rank == 2 and loaded.process.env["HF_TOKEN"] == "***"
    assert loaded.node.taken_at == node.taken_at
    empty = NodeSnapshot("node4", node.taken_at, 3, 1.0, 1.0)
    assert [name for name, _ in documents(empty)] == ["hang-node4-none.json"]
    processes, nodes = join([loaded])
    assert [p.pid for p in processes] == [4121] and [n.host for n in nodes] == ["node3"]
    assert not sniff_snapshot(b'{"entries": [], "version": "2.10"}')


FIND = ("import json; from ncclcheck.hang.discover import find_job; "
        "print(json.dumps([[f.pid, f.ppid, f.python, f.env.get('SLURM_PROCID') if f.env else None]"
        " for f in find_job()]))")


def test_the_job_is_found_in_proc_without_its_children_or_wrappers(tmp_path):
    """find_job in a process of its own: what ncclcheck starts is never part of the job, and
    this test's children are the test's."""
    sleeper = "import os, sys, time; print('ready', flush=True); time.sleep(600)"
    rank = start(sleeper, {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8"})
    wrapper = subprocess.Popen(["sh", "-c", f"{sys.executable} -c \"{sleeper}\"; true"],
                               stdout=subprocess.PIPE, text=True, start_new_session=True,
                               env={**PYTHON_ENV, "SLURM_PROCID": "6"})
    assert wrapper.stdout.readline().strip() == "ready"
    child_code = ("import subprocess, sys; c = subprocess.Popen([sys.executable, '-c', "
                  f"{sleeper!r}]); print('ready', flush=True); c.wait()")
    parent = start(child_code, {"RANK": "7"})
    try:
        done = subprocess.run([sys.executable, "-c", FIND], capture_output=True, text=True,
                              env=PYTHON_ENV, timeout=60)
        found = {pid: (ppid, python, procid) for pid, ppid, python, procid in
                 json.loads(done.stdout)}
        assert rank.pid in found and found[rank.pid][1]
        assert wrapper.pid not in found  # the shell around the rank
        wrapped = [pid for pid, (ppid, _, _) in found.items() if ppid == wrapper.pid]
        assert len(wrapped) == 1 and found[wrapped[0]][2] == "6"
        assert parent.pid in found  # the rank, not the child it started
        assert not [pid for pid, (ppid, _, _) in found.items() if ppid == parent.pid]
        assert os.getpid() not in found
        got, missing = named([rank.pid, 999999999])
        assert [f.pid for f in got] == [rank.pid] and missing == [999999999]
    finally:
        for child in (rank, wrapper, parent):
            stop(child)


def test_lightning_s_launching_process_is_its_rank_0():
    """Lightning starts local ranks 1.. from the script's process, with LOCAL_RANK in their
    environment only: the unmarked parent is local rank 0."""
    sleeper = "import time; time.sleep(600)"
    code = ("import os, subprocess, sys; env = dict(os.environ, LOCAL_RANK='1', NODE_RANK='0', "
            f"WORLD_SIZE='2'); c = subprocess.Popen([sys.executable, '-c', {sleeper!r}], env=env);"
            " print('ready', flush=True); c.wait()")
    parent = start(code)
    try:
        done = subprocess.run([sys.executable, "-c", FIND], capture_output=True, text=True,
                              env=PYTHON_ENV, timeout=60)
        found = {pid: ppid for pid, ppid, _, _ in json.loads(done.stdout)}
        assert parent.pid in found
        assert [pid for pid, ppid in found.items() if ppid == parent.pid]
    finally:
        stop(parent)


@pytest.mark.parametrize("argv, launcher", [
    (["/usr/bin/python3", "/venv/bin/torchrun", "--nproc-per-node", "8", "train.py"], True),
    (["python", "-m", "torch.distributed.run", "train.py"], True),
    (["srun", "python", "train.py"], True),
    (["python", "train.py", "--config", "torchrun.yaml"], False),
    (["python", "-u", "train.py"], False),
])
def test_launchers_are_told_from_ranks(argv, launcher):
    assert is_launcher(argv, "python3") is launcher


def test_a_file_that_is_no_snapshot_is_refused(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"ncclcheck_hang_snapshot": 99}))
    with open(path, "rb") as handle, pytest.raises(Exception, match="format 1"):
        load(handle, str(path))


def test_a_job_armed_by_its_command_line_runs_its_script_as_main(tmp_path):
    """`python -m ncclcheck.hang.armed train.py ARGS`: armed, the script runs as __main__ with
    its own argv and folder on sys.path, and discovery takes it for a rank."""
    script = tmp_path / "train.py"
    (tmp_path / "helper.py").write_text("VALUE = 7\n")
    script.write_text("import sys, time\nimport helper\n"
                      "print('ready', __name__, sys.argv[1:], helper.VALUE, flush=True)\n"
                      "time.sleep(600)\n")
    child = subprocess.Popen([sys.executable, "-m", "ncclcheck.hang.armed", str(script), "--lr",
                              "3"], stdout=subprocess.PIPE, text=True, start_new_session=True,
                             env={**PYTHON_ENV, "NCCLCHECK_HANG_DIR": str(tmp_path / "armed"),
                                  "RANK": "0", "WORLD_SIZE": "1"})
    try:
        assert child.stdout.readline().split() == ["ready", "__main__", "['--lr',", "'3']", "7"]
        marker = trigger.find_marker(child.pid, str(tmp_path / "armed"))
        assert marker is not None and marker.env["RANK"] == "0"
        answer = trigger.ask(marker, 10.0)
        assert where(deciding_thread(answer.threads)).user.file == str(script)
        done = subprocess.run([sys.executable, "-c", FIND], capture_output=True, text=True,
                              env=PYTHON_ENV, timeout=60)
        assert child.pid in {pid for pid, _, _, _ in json.loads(done.stdout)}
    finally:
        stop(child)
