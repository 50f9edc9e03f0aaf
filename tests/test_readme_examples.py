"""The outputs shown in README.md and docs/ are what the commands print (cog-style): every
example block is rerun by scripts/readme_examples.py and compared in a normalised form."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("readme_examples",
                                               ROOT / "scripts" / "readme_examples.py")
examples = importlib.util.module_from_spec(_spec)
sys.modules["readme_examples"] = examples
_spec.loader.exec_module(examples)

TABLE = """ncclcheck 0.1.0 — host vm · launcher standalone · python 3.11.7 · torch 2.13.0+cpu

status    check               summary
--------  ------------------  ---------------------------------------------
PASS      ranks.rank          rank 0 is within 0..0
skip      net.master_port     MASTER_PORT is not set
PASS      nccl.load           libnccl loaded and answered in a child process in 0.10 s

Result: PASS (2 pass, 1 skip)"""


def _blocks() -> list[tuple[str, str, str]]:
    found = []
    for page in examples.pages():
        for match in examples.BLOCK.finditer(page.read_text(encoding="utf-8")):
            found.append((str(page.relative_to(ROOT)), match.group("spec"), match.group("body")))
    return found


def test_the_pages_hold_examples_of_every_kind():
    specs = [spec for _, spec, _ in _blocks()]
    pages = {page for page, _, _ in _blocks()}
    assert {"README.md", "docs/ranks.md", "docs/explain.md", "docs/checks.md"} <= pages
    assert any(s.startswith("@rows") for s in specs) and any("ncclcheck run" in s for s in specs)


@pytest.mark.parametrize("page, spec, body", _blocks(), ids=lambda v: v if len(v) < 60 else None)
def test_example_is_what_the_command_prints(page, spec, body):
    from ncclcheck.gpus import nvidia_driver_loaded
    if nvidia_driver_loaded():
        pytest.skip("the examples show a CPU-only machine; this one has an NVIDIA driver")
    example = examples.Example.parse(spec)
    fresh = examples.render(example)
    assert examples.normalise(fresh, example.rows_only) == \
        examples.normalise(body, example.rows_only), (
            f"{page}: stale example `{spec}`: run python scripts/readme_examples.py\n{fresh}")


@pytest.mark.parametrize("rows_only", [False, True])
def test_normalising_forgives_machines_and_runs(rows_only):
    other = (TABLE.replace("host vm", "host gpu-17").replace("0.10 s", "12.5 s")
             .replace("torch 2.13.0+cpu", "torch 2.14.1+cu128"))
    assert examples.normalise(other, rows_only) == examples.normalise(TABLE, rows_only)


@pytest.mark.parametrize("change", [
    ("PASS      ranks.rank", "FAIL      ranks.rank"),                # a status
    ("ranks.rank    ", "ranks.rank_id "),                            # a check id
    ("Result: PASS", "Result: WARN"),                                # the result
])
def test_a_status_id_or_result_change_is_stale_in_every_mode(change):
    changed = TABLE.replace(*change)
    assert changed != TABLE
    for rows_only in (False, True):
        assert examples.normalise(changed, rows_only) != examples.normalise(TABLE, rows_only)


@pytest.mark.parametrize("change", [
    ("is within", "lies within"),                                    # summary wording
    ("status    check", "check    status"),                          # layout
    ("\nResult:", "\nHow to fix: nothing\n\nResult:"),               # a new section
])
def test_a_wording_or_layout_change_is_stale_in_full_examples(change):
    changed = TABLE.replace(*change)
    assert changed != TABLE
    assert examples.normalise(changed, False) != examples.normalise(TABLE, False)


def test_the_shown_command_and_paths_read_like_the_docs():
    example = examples.Example.parse("@file:a.log=README.md RANK=6 MASTER_ADDR=node0 "
                                     "ncclcheck ranks --nodes 2")
    assert example.files == {"a.log": "README.md"} and example.env["RANK"] == "6"
    assert example.shown_command() == "$ RANK=6 MASTER_ADDR=node0 ncclcheck ranks --nodes 2"
    assert examples.SITE.sub(r"<venv>\1", "load /opt/x/.venv/lib/python3.11/site-packages/nccl") \
        == "load <venv>/lib/python3.11/site-packages/nccl"
