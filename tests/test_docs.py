"""The docs are checked against the code: every command has a page naming every option."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from ncclcheck.cli import cli

ROOT = Path(__file__).parents[1]
DOCS = ROOT / "docs"
COMMANDS = sorted(cli.commands)


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_a_page_listing_its_options(name):
    page = DOCS / f"{name}.md"
    assert page.exists(), f"docs/{name}.md is missing"
    text = page.read_text()
    command = cli.commands[name]
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            longest = max(param.opts, key=len)
            if longest in ("--help",):
                continue
            assert longest in text, f"docs/{name}.md does not mention {longest}"


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_is_in_the_cli_index_and_readme(name):
    assert f"`ncclcheck {name}" in (DOCS / "cli.md").read_text()
    assert f"ncclcheck {name}" in (ROOT / "README.md").read_text()


def test_readme_setup_commands_are_the_ci_commands():
    readme = (ROOT / "README.md").read_text()
    assert "bash scripts/test.sh" in readme
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
    assert re.search(r"pip install[^\n]*torch==2\.13\.0", readme)


def test_docs_speak_of_no_machine_paths():
    checkout = str(ROOT.resolve())
    for path in [ROOT / "README.md", *DOCS.glob("*.md")]:
        assert checkout not in path.read_text(), path
