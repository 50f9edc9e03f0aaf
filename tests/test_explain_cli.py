"""`ncclcheck explain` end to end: formats, exit codes, bad input, and no torch import."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from ncclcheck.cli import cli

LOGS = Path(__file__).resolve().parent / "data" / "logs"
MOTIVATING = LOGS / "written" / "lightning-motivating-case-6of4.log"
CLEAN = LOGS / "clean" / "nccl-info-multinode-ok.log"


def run_cli(*args: str, stdin: bytes | None = None, timeout: float = 60):
    env = {k: v for k, v in os.environ.items() if k != "NCCLCHECK_DEBUG"}
    return subprocess.run([sys.executable, "-m", "ncclcheck", "explain", *args], input=stdin,
                          capture_output=True, timeout=timeout, env=env)


def assert_no_traceback(done) -> None:
    assert b"Traceback" not in done.stdout + done.stderr


def test_json_follows_the_contract():
    result = CliRunner().invoke(cli, ["explain", "--format", "json", str(MOTIVATING)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    root = data["findings"][0]
    for key in ("id", "category", "title", "root_cause", "file", "line", "text", "rank", "host",
                "explanation", "fix", "facts", "count"):
        assert key in root
    assert root["id"] == "nccl.invalid_rank" and root["root_cause"] is True
    assert root["facts"] == {"rank": 6, "nranks": 4} and root["rank"] == 6
    assert root["host"] == "node2" and "nodes x GPUs" in root["fix"]
    assert [f["root_cause"] for f in data["findings"]].count(True) == 1
    assert data["nccl"]["version"] == "2.18.5" and data["nccl"]["interfaces"] == ["eth0"]


def test_table_and_markdown_show_root_cause_and_nccl_summary():
    table = CliRunner().invoke(cli, ["explain", str(MOTIVATING)])
    assert table.exit_code == 0
    assert "ROOT CAUSE" in table.output and "nccl.invalid_rank" in table.output
    assert "What NCCL said:" in table.output and "NCCL 2.18.5 (CUDA driver 12.2)" in table.output
    markdown = CliRunner().invoke(cli, ["explain", "--format", "markdown", str(MOTIVATING)])
    assert "## Root cause:" in markdown.output and "## What NCCL said" in markdown.output


def test_exit_code_flag():
    runner = CliRunner()
    assert runner.invoke(cli, ["explain", str(MOTIVATING)]).exit_code == 0
    assert runner.invoke(cli, ["explain", "--exit-code", str(MOTIVATING)]).exit_code == 1
    assert runner.invoke(cli, ["explain", "--exit-code", str(CLEAN)]).exit_code == 0
    warning_only = LOGS / "written" / "nccl-nsocks-product-warning.log"
    assert runner.invoke(cli, ["explain", "--exit-code", str(warning_only)]).exit_code == 0


def test_list_prints_the_catalogue():
    result = CliRunner().invoke(cli, ["explain", "--list"])
    assert result.exit_code == 0
    assert "nccl.invalid_rank" in result.output and "torch.store_port_in_use" in result.output
    assert len([l for l in result.output.splitlines() if "." in l.split(" ")[0]]) >= 60


def test_stdin_and_dash():
    data = MOTIVATING.read_bytes()
    done = run_cli("--format", "json", stdin=data)
    assert done.returncode == 0 and json.loads(done.stdout)["findings"][0]["file"] == "-"
    done = run_cli("-", "--exit-code", stdin=data)
    assert done.returncode == 1 and b"ROOT CAUSE" in done.stdout


def test_missing_path_is_one_line_and_exit_2(tmp_path):
    done = run_cli(str(tmp_path / "nope.log"))
    assert done.returncode == 2
    assert done.stderr.decode().count("\n") == 1 and b"nope.log" in done.stderr
    assert_no_traceback(done)


def test_bad_inputs_never_traceback(tmp_path):
    many = tmp_path / "many"
    many.mkdir()
    for i in range(1000):
        (many / f"rank{i}.log").write_text(f"step {i} ok\n")
    (many / "rank517.log").write_text("RuntimeError: CUDA error: an illegal memory access was "
                                      "encountered\n")
    (tmp_path / "empty.log").write_bytes(b"")
    with open(tmp_path / "one-line.log", "wb") as out:  # one 50 MB line
        for _ in range(50):
            out.write(b"z" * (1 << 20))
    (tmp_path / "random.bin").write_bytes(os.urandom(4 << 20))
    (tmp_path / "latin1.log").write_bytes("Erreur: échec réseau\n".encode("latin-1") * 100)

    done = run_cli("--format", "json", str(many), timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert len(data["files"]) == 1000
    assert data["findings"][0]["id"] == "cuda.illegal_memory_access"
    assert data["findings"][0]["rank"] == 517
    for name in ("empty.log", "one-line.log", "latin1.log"):
        done = run_cli("--exit-code", str(tmp_path / name), timeout=120)
        assert done.returncode == 0, (name, done.stderr)
        assert b"No known failure found." in done.stdout
        assert_no_traceback(done)
    # Binary input alone is unusable input: one line on stderr, exit 2, nothing on stdout.
    done = run_cli("--exit-code", str(tmp_path / "random.bin"), timeout=120)
    assert done.returncode == 2 and done.stdout == b"", done.stderr
    assert done.stderr.count(b"\n") == 1 and b"binary, not a log" in done.stderr
    assert_no_traceback(done)


def test_explain_never_imports_torch():
    code = ("import sys\n"
            "from ncclcheck.cli import main\n"
            "try:\n"
            f"    main(['explain', '--format', 'json', {str(MOTIVATING)!r}])\n"
            "except SystemExit:\n"
            "    pass\n"
            "print('TORCH', 'torch' in sys.modules, file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True,
                          timeout=60)
    assert b"TORCH False" in done.stderr
    imported = [l for l in done.stderr.decode().splitlines() if l.startswith("import time:")]
    assert imported and not [l for l in imported if l.rstrip().endswith(("| torch", "torch._C"))]


def test_truncated_gzip_is_one_line_and_exit_2(tmp_path):
    import gzip
    whole = gzip.compress(MOTIVATING.read_bytes() * 50)
    (tmp_path / "cut.log.gz").write_bytes(whole[: len(whole) // 2])
    done = run_cli(str(tmp_path / "cut.log.gz"))
    assert done.returncode == 2 and done.stderr.decode().count("\n") == 1, done.stderr
    assert b"cut.log.gz" in done.stderr
    assert_no_traceback(done)


def test_the_command_line_s_own_run_leaves_its_tables_to_the_exit_not_to_the_collector():
    """The process's own `ncclcheck explain` freezes what it loaded once it has printed, so
    the collector's last passes at exit skip it; a caller's in-process run leaves the
    collector alone, as its process goes on."""
    code = ("import gc, sys\n"
            "from ncclcheck.cli import main\n"
            f"sys.argv = ['ncclcheck', 'explain', {str(MOTIVATING)!r}]\n"
            "try:\n"
            "    main()\n"
            "except SystemExit:\n"
            "    print('FROZEN', gc.get_freeze_count(), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    frozen = int(done.stderr.decode().split("FROZEN")[1].split()[0])
    assert frozen > 10000 and b"ROOT CAUSE" in done.stdout, done.stderr
    before = gc.get_freeze_count()
    assert CliRunner().invoke(cli, ["explain", str(MOTIVATING)]).exit_code == 0
    assert gc.get_freeze_count() == before
