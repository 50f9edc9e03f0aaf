#!/usr/bin/env python3
"""Regenerate the example outputs in README.md and docs/*.md by running their commands.

An example is written between two marker comments; everything between them is generated:

    <!-- example: [@rows] [@file:NAME=REPO_PATH ...] [VAR=VALUE ...] ncclcheck ARGS... -->
    ```console
    $ VAR=VALUE ncclcheck ARGS...
    <what the command printed>
    ```
    <!-- /example -->

The command runs in a scratch folder (``@file:`` copies a file of the repository into it under
NAME) with the launcher / NCCL variables of this shell removed and VAR=VALUE set. stdout is
shown, or stderr when the command exits 2 (a usage error). Paths of this machine's virtual
environments read ``<venv>``.

``--check`` regenerates in memory and exits 1 when a committed example is stale. Outputs vary
between machines and runs (host name, timings, bandwidth, versions), so the comparison is made
on a normalised form: the host name is a placeholder, every number is 0 and whitespace runs are
one space; a check id, a status, a summary's wording or the layout still count. ``@rows``
examples depend on this host's hardware (interfaces, libraries, the benchmark): for them only
the (status, check id) rows and the result line's shape are compared.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/*.md")
BLOCK = re.compile(r"(?P<open><!-- example: (?P<spec>.*?) -->\n)(?P<body>.*?)(?P<close><!-- /example -->)",
                   re.S)
CLEAN_PREFIXES = ("RANK", "WORLD_SIZE", "LOCAL_", "NODE_RANK", "GROUP_", "MASTER_", "SLURM",
                  "OMPI_", "PMI_", "MPI_LOCAL", "PET_", "JSM_", "LSB_", "TORCHELASTIC", "ROLE_",
                  "NCCL_", "GLOO_", "CUDA_VISIBLE", "TORCH_DISTRIBUTED", "COLUMNS")
SITE = re.compile(r"(?<![\w<>/])/[^\s:]*?(/lib/python\d\.\d+/site-packages)")
ROW = re.compile(r"^(PASS|WARN|FAIL|skip|error)\s+(\S+)", re.M)
WIDTH = 88  # the displayed command wraps before ncclcheck past this


@dataclass
class Example:
    """One marker: what to run and how to compare it."""

    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    rows_only: bool = False

    @classmethod
    def parse(cls, spec: str) -> "Example":
        example = cls([])
        words = shlex.split(spec)
        while words and words[0] != "ncclcheck":
            word = words.pop(0)
            if word == "@rows":
                example.rows_only = True
            elif word.startswith("@file:"):
                name, _, source = word[len("@file:"):].partition("=")
                example.files[name] = source
            else:
                name, _, value = word.partition("=")
                example.env[name] = value
        if not words:
            raise ValueError(f"example without an ncclcheck command: {spec!r}")
        example.args = words[1:]
        return example

    def shown_command(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        command = " ".join(["ncclcheck", *map(shlex.quote, self.args)])
        line = f"$ {env} {command}" if env else f"$ {command}"
        return line if len(line) <= WIDTH else f"$ {env} \\\n    {command}"


def run(example: Example) -> str:
    """The command's output as the page shows it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEAN_PREFIXES)}
    env.update(example.env)
    with tempfile.TemporaryDirectory(prefix="ncclcheck-example-") as scratch:
        for name, source in example.files.items():
            shutil.copy(ROOT / source, Path(scratch) / name)
        done = subprocess.run([sys.executable, "-m", "ncclcheck", *example.args], cwd=scratch,
                              env=env, capture_output=True, text=True, timeout=600)
    text = done.stderr if done.returncode == 2 else done.stdout
    return SITE.sub(r"<venv>\1", text).rstrip()


def render(example: Example) -> str:
    return f"```console\n{example.shown_command()}\n{run(example)}\n```\n"


def normalise(body: str, rows_only: bool) -> str:
    """What must not change between machines and runs (see the module docstring)."""
    host = re.search(r"— host (\S+) ·", body)
    if host:
        body = re.sub(rf"\b{re.escape(host.group(1))}\b", "<host>", body)
    body = re.sub(r"\d+(\.\d+)*(\+[A-Za-z][\w.]*)?", "0", body)  # numbers, versions (+cpu)
    if rows_only:
        rows = [f"{status} {check}" for status, check in ROW.findall(body)]
        result = re.findall(r"^Result: \w+ \(.*\)$", body, re.M)
        return "\n".join(rows + result)
    return re.sub(r"-{2,}", "-", re.sub(r"\s+", " ", body)).strip()


def pages() -> list[Path]:
    return sorted({p for pattern in PAGES for p in ROOT.glob(pattern)})


def regenerate(text: str) -> tuple[str, list[str]]:
    """The page with every example rerun, and the examples whose normalised output changed."""
    stale: list[str] = []

    def one(match: re.Match) -> str:
        example = Example.parse(match.group("spec"))
        fresh = render(example)
        if normalise(fresh, example.rows_only) != normalise(match.group("body"),
                                                           example.rows_only):
            stale.append(match.group("spec"))
        return match.group("open") + fresh + match.group("close")

    return BLOCK.sub(one, text), stale


def main(argv: list[str]) -> int:
    check = "--check" in argv
    failed = False
    for page in pages():
        text = page.read_text(encoding="utf-8")
        if "<!-- example: " not in text:
            continue
        fresh, stale = regenerate(text)
        for spec in stale:
            failed = True
            print(f"{page.relative_to(ROOT)}: stale example `{spec}`"
                  + ("" if check else " (rewritten)"), file=sys.stderr)
        if not check and fresh != text:
            page.write_text(fresh, encoding="utf-8")
    if check and failed:
        print("run: python scripts/readme_examples.py", file=sys.stderr)
    return 1 if check and failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
