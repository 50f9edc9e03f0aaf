"""What every knowledge generator shares: the shape of a table, its deterministic text, and
the taxonomy each entry's category is checked against.

A table is one JSON object: a header that says what was read (``origin``), which release(s)
(``version``), by which command (``generated_by``) and by which rule its categories were
assigned (``rule``), then ``entries``, one JSON object per line so that a regenerated table
shows as a readable diff. The text is a pure function of the entries: running a generator
twice on the same sources gives the same bytes, which the tests rely on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from ncclcheck.model import CATEGORIES

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "ncclcheck" / "catalogue" / "knowledge"
SCRIPT = "scripts/knowledge/make_knowledge.py"
HEADER_KEYS = ("table", "component", "origin", "version", "generated_by", "rule")


def table(name: str, component: str, origin: str, version: str, rule: str,
          entries: Iterable[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """One table, its entries checked: each has a category of the taxonomy."""
    rows = list(entries)
    at = extra["columns"].index("category") if "columns" in extra else "category"
    for row in rows:
        if row[at] not in CATEGORIES:
            raise ValueError(f"{name}: entry {row} has no category of the taxonomy")
    return {"table": name, "component": component, "origin": origin, "version": version,
            "generated_by": f"{SCRIPT} {name}", "rule": rule, **extra, "entries": rows}


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def render(data: dict[str, Any]) -> str:
    """The table's committed text: the header on one line, then one entry a line."""
    head = {k: v for k, v in data.items() if k != "entries"}
    lines = ",\n".join(_dump(row) for row in data["entries"])
    return _dump(head)[:-1] + ',"entries":[\n' + lines + "\n]}\n"


def path_of(name: str) -> Path:
    return OUT / f"{name}.json"


def write(data: dict[str, Any]) -> Path:
    path = path_of(data["table"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(data), "utf-8")
    return path


def categorise(name: str, rules: Iterable[tuple[Iterable[str], str]], default: str = "other") -> str:
    """The category of the first rule whose names hold ``name``; ``default`` otherwise."""
    for names, category in rules:
        if name in names:
            return category
    return default
