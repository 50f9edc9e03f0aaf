"""`ncclcheck checks` output and the docs' check tables, both read from the registry.

One spec renders the same way everywhere: the CLI's table, JSON and markdown, the full page of
``ncclcheck checks ID`` and the per-family tables in docs/ (see ``ncclcheck.gendocs``). Which
function draws which format is the format table's (``formats.py``).
"""

from __future__ import annotations

import json
import textwrap
from typing import Any, Iterable

from ncclcheck.probes.spec import CheckSpec

from .width import output_width, wrap

FIXED_WIDTH = 100  # not on a terminal (width.output_width is None)

# The page that documents each family's checks (generated tables live there).
DOC_PAGES = {"ranks": "docs/ranks.md", "net": "docs/net.md", "nccl": "docs/nccl.md",
             "bench": "docs/bench.md", "cluster": "docs/cluster.md"}


def docs_page(spec: CheckSpec) -> str:
    return DOC_PAGES.get(spec.family, "docs/cli.md") + "#checks"


def categories_text(spec: CheckSpec, empty: str = "—") -> str:
    return ", ".join(c.value for c in spec.categories) or empty


def verdicts_text(spec: CheckSpec) -> str:
    """What makes the check fail and warn, in one sentence each; "never" for inventories."""
    parts = []
    if spec.fails_when:
        parts.append(f"fails when {spec.fails_when}")
    if spec.warns_when:
        parts.append(f"warns when {spec.warns_when}")
    return "; ".join(parts) or "never fails: it reports what it found"


def spec_dict(spec: CheckSpec) -> dict[str, Any]:
    return {"id": spec.id, "family": spec.family, "title": spec.title,
            "categories": [c.value for c in spec.categories], "fails_when": spec.fails_when,
            "warns_when": spec.warns_when, "doc": spec.doc, "docs": docs_page(spec)}


def list_table(specs: Iterable[CheckSpec], width: int | None = None) -> str:
    """Plain text: id and title on one line; categories and what fails or warns it beneath.
    ``width``: the terminal's by default (there a title wraps too), else 100."""
    specs = list(specs)
    fitted = width if width is not None else output_width()
    width = fitted or FIXED_WIDTH
    id_w = max(len(s.id) for s in specs)
    lines = [f"{'id':<{id_w}}  title", f"{'-' * id_w}  -----"]
    for spec in specs:
        head = f"{spec.id:<{id_w}}  {spec.title}"
        lines += wrap(head, width, subsequent=" " * (id_w + 2)) if fitted else [head]
        text = f"[{categories_text(spec)}] {verdicts_text(spec)}"
        lines += textwrap.wrap(text, width, initial_indent="    ", subsequent_indent="    ")
    lines.append(f"\n{len(specs)} checks; one in full: ncclcheck checks ID")
    return "\n".join(lines)


def markdown_table(specs: Iterable[CheckSpec]) -> str:
    """The table docs/ and `--format markdown` show: id, title, verdicts, categories."""
    rows = ["| id | checks | fails / warns when | category |", "|---|---|---|---|"]
    rows += [f"| `{s.id}` | {_cell(s.title)} | {_cell(verdicts_text(s))} | "
             f"{categories_text(s)} |" for s in specs]
    return "\n".join(rows)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def full_text(spec: CheckSpec, width: int | None = None) -> str:
    """One check in full, as `ruff rule CODE` prints a rule (to the terminal's width, else 100)."""
    width = width if width is not None else output_width() or FIXED_WIDTH
    fields = [("family", spec.family), ("title", spec.title),
              ("categories", categories_text(spec, "none (it never warns or fails)")),
              ("fails when", spec.fails_when or "never"), ("warns when", spec.warns_when or "never"),
              ("docs", docs_page(spec))]
    lines = [spec.id, ""]
    for label, value in fields:
        wrapped = textwrap.wrap(value, width - 14) or [""]
        lines.append(f"  {label:<11} {wrapped[0]}")
        lines += [f"  {'':<11} {more}" for more in wrapped[1:]]
    if spec.doc:
        lines += ["", *textwrap.wrap(spec.doc, width)]
    return "\n".join(lines)


def full_markdown(spec: CheckSpec) -> str:
    out = [f"## {spec.id}", "", f"**{spec.title}** — family `{spec.family}`, categories "
           f"{categories_text(spec, 'none')}.", "",
           f"Fails when: {spec.fails_when or 'never'}.", "",
           f"Warns when: {spec.warns_when or 'never'}.", ""]
    if spec.doc:
        out += [spec.doc, ""]
    out.append(f"Docs: [{docs_page(spec)}]({docs_page(spec).replace('docs/', '')})")
    return "\n".join(out)


def list_json(specs: Iterable[CheckSpec]) -> str:
    return json.dumps({"checks": [spec_dict(s) for s in specs]}, indent=2)


def one_json(spec: CheckSpec) -> str:
    return json.dumps(spec_dict(spec), indent=2)
