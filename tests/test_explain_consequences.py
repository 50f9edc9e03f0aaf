"""The first failure, never what follows it: a launcher's report of a death, other ranks'
lines printed in between, a consequence beside the warning that explains it.

Every log here is made of lines real software printed (the corpus's logs, the launcher tails of
tests/data/logs/tails/, which real torchrun, srun and mpirun printed); what is put together is
the shape a combined log of several ranks has.
"""

from __future__ import annotations

from pathlib import Path

from ncclcheck.explain.engine import explain

LOGS = Path(__file__).resolve().parent / "data" / "logs"
TAILS = LOGS / "tails"
WORLD = LOGS / "world"

# A hang with no error line of its own (NCCL INFO only), then the launcher's report.
QUIET = ("node1:2031:2031 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
         "node1:2031:2031 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n")


def _explain(tmp_path: Path, text: str, name: str = "job.log"):
    path = tmp_path / name
    path.write_text(text, "utf-8")
    return explain([str(path)]).to_dict()


def test_a_launchers_report_alone_is_no_root_cause_but_leads_the_hypotheses(tmp_path):
    """torchrun's "exitcode: 1" says how a worker ended, not why (contract: never the root
    cause); explain says so, names the process to read, and keeps rank_crashed as the
    likeliest reading."""
    for tail in ("torchrun-exit1", "torchrun-abort", "srun-exit1", "mpirun-exit1"):
        found = _explain(tmp_path, QUIET + (TAILS / f"{tail}.txt").read_text("utf-8"))
        assert not any(f["root_cause"] for f in found["findings"]), tail
        assert "verdict" not in found, tail
        assert found["hypotheses"][0]["category"] == "rank_crashed", tail
        assert found["hypotheses"][0]["source"] == "signature"
        notes = [n["id"] for n in found["notes"]]
        assert "explain.ended_without_reason" in notes, (tail, notes)


def test_a_crash_the_launcher_reports_is_still_a_cause(tmp_path):
    """SIGSEGV is a failure of its own, not a report of one."""
    tail = (TAILS / "torchrun-abort.txt").read_text("utf-8")
    crashed = tail.replace("-6 (pid: 2032)  (SIGABRT)", "-11 (pid: 2032)  (SIGSEGV)").replace(
        "Signal 6 (SIGABRT)", "Signal 11 (SIGSEGV)").replace("exitcode: -6", "exitcode: -11")
    found = _explain(tmp_path, QUIET + crashed)
    root = found["findings"][0]
    assert root["root_cause"] and root["category"] == "rank_crashed"


def test_appending_a_launchers_tail_keeps_the_root_cause(tmp_path):
    """A watchdog log of one rank ending in torchrun's exitcode -6: the timeout, not "a worker
    was killed by a signal"."""
    log = (WORLD / "dev" / "c2-020-accelerate-long-file-scan-watchdog-timeout.log").read_text(
        "utf-8")
    for tail in ("torchrun-abort", "srun-l-abort", "mpirun-abort"):
        found = _explain(tmp_path, log + (TAILS / f"{tail}.txt").read_text("utf-8"))
        assert found["findings"][0]["id"] == "torch.watchdog_timeout", tail


def test_another_ranks_line_does_not_cut_a_message_from_its_rest(tmp_path):
    """An exception's message goes on below its header; in a log several ranks print into,
    another rank's line can come in between (real: the header and the rest are one print of
    rank 0, the Gloo line one of rank 1)."""
    gloo = ("[rank1]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
            "pair.cc:553] Connection closed by peer [127.0.0.1]:35734. This is typically caused "
            "by a remote worker crashing.")
    header = ("lightning.fabric.utilities.exceptions.MisconfigurationException: You requested "
              "gpu: [0, 1]")
    rest = " But your machine only has: [0]"
    for between in ([], [gloo], [gloo, gloo.replace("rank1", "rank2")]):
        found = _explain(tmp_path, "\n".join([header, *between, rest]) + "\n")
        root = found["findings"][0]
        assert root["id"] == "lightning.requested_gpus_unavailable", between
        assert root["line"] == 2 + len(between)


def test_the_rest_is_looked_for_only_a_few_lines_down(tmp_path):
    """Past REST_WITHIN lines of others the header stands alone (a message goes on directly)."""
    from ncclcheck.explain.scan import REST_WITHIN
    header = ("lightning.fabric.utilities.exceptions.MisconfigurationException: You requested "
              "gpu: [0, 1]")
    others = [f"[rank{r}]: RuntimeError: Connection closed by peer" for r in
              range(1, REST_WITHIN + 3)]
    found = _explain(tmp_path, "\n".join([header, *others, " But your machine only has: [0]"]))
    assert all(f["id"] != "lightning.requested_gpus_unavailable" for f in found["findings"])


def test_a_warning_that_names_a_cause_explains_a_consequence(tmp_path):
    """The net plugin that did not load (NCCL carried on over sockets), then peers lost their
    connections: the plugin, not "a peer crashed"."""
    log = (WORLD / "dev" / "c3-011-conda-aws-ofi-nccl-190-libfabric-symbol-version.log").read_text(
        "utf-8")
    alone = _explain(tmp_path, log)["findings"][0]
    assert alone["id"] == "nccl.net_plugin_broken"
    closed = ("worker-4:3063025:3066048 [0] misc/socket.cc:49 NCCL WARN socketProgress: "
              "Connection closed by remote peer worker-3<51159>\n")
    found = _explain(tmp_path, log + closed)
    assert found["findings"][0]["id"] == "nccl.net_plugin_broken"
    assert found["findings"][0]["root_cause"]


def test_a_consequence_printed_before_the_warning_is_not_explained_by_it(tmp_path):
    """What came later cannot have caused it: a warning after the consequence stays a warning."""
    closed = ("worker-4:3063025:3066048 [0] misc/socket.cc:49 NCCL WARN socketProgress: "
              "Connection closed by remote peer worker-3<51159>\n")
    log = (WORLD / "dev" / "c3-011-conda-aws-ofi-nccl-190-libfabric-symbol-version.log").read_text(
        "utf-8")
    found = _explain(tmp_path, closed + log)
    assert found["findings"][0]["id"] == "nccl.connection_closed"


def test_a_generic_consequence_of_the_guessed_category_leaves_the_guess_in(tmp_path):
    """NCCL's "remote process exited or there was a network error" is a connection category
    result that says nothing of why: the guess read from the log's own words (the model's
    reading or the keyword cues) still stands (interleaving it must not turn a connection
    reading into "a peer crashed")."""
    log = (WORLD / "test" / "c8-033-volcano-horovodrun-task-connected-from-different-address-nat"
           ".log").read_text("utf-8")
    remote = ("[rank5]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/"
              "distributed/c10d/NCCLUtils.hpp:268, remote process exited or there was a network "
              "error, NCCL version 2.21.5\n")
    alone = _explain(tmp_path, log)["findings"][0]
    assert alone["category"] == "connection" and alone["id"].startswith(("model.", "fallback."))
    assert _explain(tmp_path, remote + log)["findings"][0]["id"] == alone["id"]


def test_a_sigkill_read_with_memory_names_the_line_that_spoke_of_it(tmp_path):
    found = _explain(tmp_path, (WORLD / "dev" / "c2-009-deepspeed-gptj-zero2-host-oom-sigkill.log")
                     .read_text("utf-8"))
    root = found["findings"][0]
    assert root["id"] == "host.killed_by_sigkill"
    line = root["facts"]["context_line"]
    text = (tmp_path / "job.log").read_text("utf-8").splitlines()[line - 1]
    assert any(word in text.lower() for word in ("memory", "oom", "rss", "swap", "ram", "gb",
                                                 "mem")), text


def test_a_log_cut_inside_a_traceback_still_shows_a_failure(tmp_path):
    """Pasted with its middle cut ("..."), the traceback's header gone: its frames still say an
    exception was on its way up, so the model's reading stands (dev: a DeepSpeed launcher's
    traceback)."""
    log = (WORLD / "dev" / "c7-021-deepspeed-cuda-visible-devices-1-no-slot-1.log").read_text(
        "utf-8").splitlines()
    whole = _explain(tmp_path, "\n".join(log) + "\n")
    assert whole["findings"][0]["id"] == "model.configuration"
    cut = log[:4] + ["..."] + log[8:]
    assert not any("Traceback" in line for line in cut)
    found = _explain(tmp_path, "\n".join(cut) + "\n")
    assert found["hypotheses"], "no hypothesis: the frames were not read as a failure"
    assert found["hypotheses"][0]["category"] == "configuration"


def test_a_faulthandler_dump_is_no_failure_by_itself(tmp_path):
    """faulthandler's dump of a live process (its frames say "line N in", no comma) is what
    a healthy run prints when asked where it is."""
    dump = ('Thread 0x00007f3a2b7fe700 (most recent call first):\n'
            '  File "/usr/lib/python3.11/threading.py", line 324 in wait\n'
            '  File "/opt/train.py", line 88 in train_step\n'
            'Epoch 3: 100%|##########| 50/50 [00:10<00:00, 4.87it/s, loss=0.211]\n')
    found = _explain(tmp_path, dump)
    assert not found["hypotheses"]
    assert not [f for f in found["findings"] if f["category"]]


def test_hypotheses_show_no_line_without_words():
    """Python 3.11's ^^^^ marker under a traceback's code line says nothing to a reader: never
    evidence (real torchrun log, Gloo, a rank raising ValueError)."""
    import re
    found = explain([str(LOGS / "real" / "torchrun-rank-valueerror.log")]).to_dict()
    evidence = [e["text"] for h in found["hypotheses"] for e in h["evidence"]]
    assert evidence
    bare = [t for t in evidence if not re.search(r"[A-Za-z0-9]", t.split("]:")[-1])]
    assert not bare, bare


def test_a_traceback_header_cut_by_a_launchers_report_is_the_jobs():
    """A log that ends on the job's "Traceback (most recent call last):" (the paste stopped
    there, dev c35-018), then a launcher's report of the death: the header is the job's, read
    as a failure; only a frame of torchrun's own traceback makes it the launcher's."""
    from ncclcheck.explain.readers.text_model import _leaves_header_the_jobs
    from ncclcheck.explain.printers import launcher_frame
    srun = "srun: error: node1: task 1: Exited with exit code 1"
    frame = '  File "/usr/local/bin/torchrun", line 8, in <module>'
    assert _leaves_header_the_jobs(srun, srun)
    assert not _leaves_header_the_jobs(frame, frame.strip())
    assert launcher_frame(frame) and not launcher_frame(srun)


def test_a_launchers_tail_keeps_a_log_ending_on_a_traceback_header(tmp_path):
    """What the text model reads of the log is the same with each real launcher's tail."""
    from logtails import append_tail, load
    log = (WORLD / "dev" / "c35-018-vllm-07-kuberay-pynccl-sanity-fail.log").read_text("utf-8")
    assert log.rstrip().endswith("Traceback (most recent call last):")
    alone = [x[2] for x in explain([str(_write(tmp_path / "a.log", log))]).text.lines]
    assert "[rank0]: Traceback (most recent call last):" in alone
    tails = load()
    assert len(tails) == 8
    for name, tail in tails.items():
        tailed = explain([str(_write(tmp_path / "b.log", append_tail(log, tail)))])
        assert [x[2] for x in tailed.text.lines][:len(alone)] == alone, name


def _write(path: Path, text: str) -> Path:
    path.write_text(text, "utf-8")
    return path
