"""Reading a log as a person does: wrapped lines re-joined, exceptions read as one unit."""

from __future__ import annotations

import io
from pathlib import Path

from ncclcheck.explain.engine import explain
from ncclcheck.explain.reflow import unwrap, wrap_width

FAILURE = ("[2026-06-11 11:44:19] node2:2251:2251 [2] init.cc:1872 NCCL WARN Invalid rank "
           "requested : 6/4 (the world size reached NCCL as the per-node GPU count)")


def _wrap(text: str, width: int = 80) -> str:
    return "\n".join(text[i:i + width] for i in range(0, len(text), width))


def _findings(tmp_path: Path, text: str) -> list[dict]:
    path = tmp_path / "job.log"
    path.write_text(text, "utf-8")
    return explain([str(path)]).to_dict()["findings"]


def test_terminal_wrapped_line_is_rejoined_and_keeps_the_file_line_number(tmp_path):
    text = "start\n" + _wrap("x" * 30 + " launch " + "y" * 100) + "\n" + _wrap(FAILURE) + "\n"
    assert "Invalid rank requested" not in text  # the wrap cut the literal
    root = _findings(tmp_path, text)[0]
    assert root["id"] == "nccl.invalid_rank" and root["facts"] == {"rank": 6, "nranks": 4}
    assert root["line"] == 4  # line 1 "start", lines 2-3 the launch line, line 4 the failure
    assert root["host"] == "node2"


def test_full_width_lines_that_start_new_records_are_not_joined():
    lines = [f"[rank{r}]:[E906 12:16:32.6 ProcessGroupNCCL.cpp:607] [Rank {r}] " + "z" * 60
             for r in range(4)]
    assert wrap_width(("\n".join(lines) + "\n").encode(), complete=True) is None
    stream, physical = unwrap(io.BytesIO(("\n".join(lines) + "\n").encode()))
    assert stream.read().decode().splitlines() == lines and physical(3) == 3


def test_separator_lines_do_not_make_a_file_wrapped():
    banner = "*" * 90
    text = f"{banner}\nSetting OMP_NUM_THREADS to 1\n{banner}\nok\n".encode()
    assert wrap_width(text, complete=True) is None


def test_line_numbers_map_back_through_many_joins():
    long = "".join(chr(97 + i % 26) for i in range(200))
    text = ("\n".join([_wrap(long, 64), "short", _wrap(long, 64), "last"]) + "\n").encode()
    stream, physical = unwrap(io.BytesIO(text))
    logical = stream.read().decode().splitlines()
    assert logical == [long, "short", long, "last"]
    assert [physical(n) for n in (1, 2, 3, 4)] == [1, 5, 6, 10]


# Hand-written edge cases (not captured from a real run): the shapes are those Lightning and
# Python print; what they test is how an exception's lines are read together.

def test_the_reason_on_the_line_below_an_exception_header_wins_over_the_catch_all(tmp_path):
    text = ("Traceback (most recent call last):\n"
            '  File "train.py", line 9, in <module>\n'
            "lightning.fabric.utilities.exceptions.MisconfigurationException: You set "
            "`devices=2` in Lightning, but the number of tasks per node configured in SLURM\n"
            "`--ntasks-per-node=4` does not match. HINT: Set `devices=4`.\n")
    findings = _findings(tmp_path, text)
    root = findings[0]
    assert root["id"] == "lightning.slurm_ntasks_per_node", [f["id"] for f in findings]
    assert root["facts"] == {"devices": 2, "ntasks_per_node": 4}


def test_the_line_below_a_header_is_read_even_without_a_literal_of_its_own(tmp_path):
    text = ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
            "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3\n"
            "ncclSystemError: System call (e.g. socket, malloc) or external library call failed "
            "or device error.\nLast error:\n"
            "Error while creating shared memory segment /dev/shm/nccl-x (size 9637888)\n")
    assert _findings(tmp_path, text)[0]["id"] == "nccl.shm_failed"


CLEAN_LINES = [
    "Epoch 3: 100%|##########| 50/50 [00:09<00:00, val_error=0.121, error_rate=0.02]",
    "[rank0]:[W1202 12:59:21.14 ProcessGroupNCCL.cpp:1042] Warning: "
    "TORCH_NCCL_ASYNC_ERROR_HANDLING is deprecated, use TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py:557: UserWarning: This "
    "DataLoader will create 16 worker processes in total.",
    "2026-12-02 12:59:53,123 - WARNING - skipped a shard after ValueError: empty file, "
    "continuing",
    "WARNING:root:a sample raised KeyError: 'label' and was dropped",
    "INFO: mean_abs_error 0.31, Error bars: +-0.02",
    "Note: an earlier step logged RuntimeError: none (all checks passed)",
]


def test_harmless_error_words_in_a_healthy_run_stay_clean(tmp_path):
    assert _findings(tmp_path, "\n".join(CLEAN_LINES * 3) + "\n") == []


def test_full_width_lines_of_one_repeated_format_are_not_a_wrap():
    lines = []
    for i in range(40):
        lines.append(f"node{i % 4}:{1000 + i}:{2000 + i} [{i % 8}] NCCL INFO comm 0x55d5c8a0 rank "
                     f"{i % 8} nranks 8 cudaDev {i % 8} busId 1b000 commId 0x9b2d - Init COMPLETE")
        lines.append(f"Epoch {i % 4}:  45%|####5     | 450/1000 [01:23<01:40, loss=0.231]")
    assert wrap_width(("\n".join(lines) + "\n").encode(), complete=True) is None


def test_one_line_cut_at_80_columns_is_rejoined(tmp_path):
    """A short paste whose one long line a terminal cut at 80 columns: NCCL's own message."""
    message = ("node1:2811:2811 [0] include/socket.h:344 NCCL WARN Socket creation failed : "
               "Address family not supported by protocol")
    log = tmp_path / "pasted.log"
    log.write_text(message[:80] + "\n" + message[80:] + "\n", "utf-8")
    assert wrap_width(log.read_bytes(), complete=True) == 80
    root = explain([str(log)]).root
    assert root is not None and root.signature.category.value == "interface"
    assert root.first.line == 1


def test_columns_not_bytes_decide_the_width(tmp_path):
    """A tab takes a terminal to the next multiple of 8 and a UTF-8 character one column: a
    capture cut at 80 columns has pieces of 80 columns, whatever their bytes."""
    from ncclcheck.explain.reflow import columns
    head = "2023-04-07 13:08:55\tWARNING the grad norm ‖g of step {} is "
    lines = []
    for step in (1, 2):
        first = head.format(step)
        first += "x" * (80 - columns(first.encode()))
        lines += [first, f"and more of step {step} without an indent"]
    assert [len(line.encode()) for line in lines[::2]] != [80, 80]
    assert [columns(line.encode()) for line in lines[::2]] == [80, 80]
    assert wrap_width(("\n".join(lines) + "\n").encode(), complete=True) == 80


def test_80_wide_rows_of_one_table_are_not_joined():
    """nccl-tests' rank table: rows that happen to be 80 wide, each followed by another row."""
    rows = ["#   Rank  0 Pid   1320 on ip-172-31-20-228 device  0 [0x00] Tesla V100-SXM2-16GB",
            "#   Rank  1 Pid   2066 on ip-172-31-22-230 device  0 [0x00] Tesla V100-SXM2-16GB"]
    assert all(len(row) == 80 for row in rows)
    assert wrap_width(("\n".join(rows) + "\n").encode(), complete=True) is None


def test_in_a_wrapped_file_80_wide_rows_of_one_format_stay_apart():
    """A capture wrapped at 80 columns that also holds nccl-tests' rank rows, 80 wide by
    themselves: each row stays a line (two processes that both say "Rank 0" are two lines)."""
    command = ("ih@ip-172-31-22-230:~/nccl-tests/src$ mpirun -host localhost,172.31.20.228 -np 2"
               " -verbose /home/ih/nccl-tests/build/all_reduce_perf -b 1250M -e 1250M -g 1")
    header = ("# nThread 1 nGpus 1 minBytes 1310720000 maxBytes 1310720000 step: 1048576(bytes)"
              " warmup iters: 5 iters: 20 validation: 1")
    rows = ["#   Rank  0 Pid   1320 on ip-172-31-20-228 device  0 [0x00] Tesla V100-SXM2-16GB",
            "#   Rank  0 Pid   2066 on ip-172-31-22-230 device  0 [0x00] Tesla V100-SXM2-16GB"]
    lines = [command[:80], command[80:], header[:80], header[80:], *rows, "#"]
    stream, physical = unwrap(io.BytesIO(("\n".join(lines) + "\n").encode()))
    assert stream.read().decode().splitlines() == [command, header, *rows, "#"]
    assert [physical(n) for n in (1, 2, 3, 4)] == [1, 3, 5, 6]


def test_a_cut_that_fell_on_a_space_is_rejoined(tmp_path):
    """The terminal cut at a space: the rest starts with that one space (an indent of more is
    a traceback's code line, never joined)."""
    message = ("[0] misc/socket.cc:71 NCCL WARN socketProgress: Connection closed by remote peer"
               " 10.10.1.3<36138>")
    assert len(message[:80]) == 80 and message[80] == " "
    assert wrap_width((message[:80] + "\n" + message[80:] + "\n").encode(), complete=True) == 80
    indented = message[:80] + "\n    10.10.1.3<36138>\n"
    assert wrap_width(indented.encode(), complete=True) is None


def test_a_journald_source_has_a_pid_and_a_message_its_own_words(tmp_path):
    """journald's short format names "host program[pid]:" (the kernel has no pid); after a
    timestamping tee's clock, "initializing ddp: GLOBAL_RANK: ..." is Lightning's message."""
    from ncclcheck.explain.lines import parse_line
    assert parse_line("Dec 07 02:55:21 initializing ddp: GLOBAL_RANK: 1, MEMBER: 2/8").message \
        == "initializing ddp: GLOBAL_RANK: 1, MEMBER: 2/8"
    journald = parse_line("Dec 07 02:55:21 node3 python[4242]: NCCL WARN Cuda failure 'out of "
                          "memory'")
    assert journald.message.startswith("NCCL WARN")
    assert parse_line("Dec 07 02:55:21 node3 kernel: Out of memory: Killed process 4242").message \
        .startswith("Out of memory")
    log = tmp_path / "tee.log"
    log.write_text("".join(f"Dec 07 02:55:2{n} initializing ddp: GLOBAL_RANK: {r}, MEMBER: "
                           f"{r + 1}/8\n" for n, r in enumerate((1, 1, 2, 2, 3, 3, 0, 0))))
    assert explain([str(log)]).root.signature.id == "lightning.duplicate_global_rank"


def test_a_collectors_prefixed_table_is_not_a_wrap():
    """Rows of one table under a timestamping tee's clock or kubectl's prefix: every row has
    the collector's prefix and begins with the table's mark; none is the rest of another."""
    rows = ["| Trial name               |   # failures | error file" + " " * 90 + "|",
            "|--------------------------+--------------+" + "-" * 98 + "|",
            "| TorchTrainer_96bfe_00000 |            1 | /home/ray/ray_results/error.txt" + " " * 67
            + "|",
            "+--------------------------+--------------+" + "-" * 98 + "+"]
    for prefix in ("Dec 07 02:55:21 ", "[pod/train-0/main] ", "train-1  | "):
        text = "".join(prefix + row + "\n" for row in rows) + prefix.rstrip() + "\n"
        assert wrap_width(text.encode(), complete=True) is None, prefix


def test_a_message_the_program_broke_is_rejoined_under_a_collectors_prefix():
    """A line of exactly the width, its rest on the next line: rejoined with or without the
    prefix docker compose puts on both."""
    messages = ["[E socket.cpp:922] [c10d] The client socket has timed out after 1800s while "
                "trying to connect to (172.17.0.2, 44737).",
                "(RayWorkerVllm pid=207931, ip=10.0.1.75) RuntimeError: The client socket has "
                "timed out while trying to connect"]
    cut = 90
    for prefix in ("", "train-4  | "):
        lines = [prefix + piece for m in messages for piece in (m[:cut], m[cut:])]
        assert wrap_width(("\n".join(lines) + "\n").encode(), complete=True) == len(lines[0])
