"""The messages a Python package raises and logs, read from its source with ``ast``: the
message of every ``raise X("...")``, and of every ``logger.warning/error/exception/critical``
and ``warnings.warn`` call, as a template (an f-string's fields and ``%s``/``{}`` arguments left
as placeholders). Sources come from an installed package folder or straight from a wheel.
"""

from __future__ import annotations

import ast
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

LOG_CALLS = frozenset({"warning", "warn", "error", "exception", "critical", "fatal"})
LOGGERS = re.compile(r"^(log|logger|_logger|LOGGER|logging|warnings|_log)$")


@dataclass(frozen=True)
class Message:
    template: str
    kind: str  # the exception raised, or "log" / "warn"


def template(node: ast.AST) -> str | None:
    """The string an expression builds, fields as {} (None when it builds no string)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = template(node.left), template(node.right)
        if left is None and right is None:
            return None
        return (left if left is not None else "{}") + (right if right is not None else "{}")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return template(node.left)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"):
        return template(node.func.value)
    return None


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def messages(source: str) -> Iterator[Message]:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            text = template(node.exc.args[0])
            if text:
                yield Message(text, _name(node.exc))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in LOG_CALLS and node.args
              and LOGGERS.match(_name(node.func.value) or "")):
            text = template(node.args[0])
            if text:
                yield Message(text, "warn" if _name(node.func.value) == "warnings" else "log")


def package_sources(where: Path, packages: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """(path inside the package, text) of every .py file of ``packages``, from a wheel file
    or from the folder that holds the installed packages."""
    if where.suffix == ".whl":
        with zipfile.ZipFile(where) as wheel:
            for name in sorted(wheel.namelist()):
                if name.endswith(".py") and name.split("/")[0] in packages:
                    yield name, wheel.read(name).decode("utf-8", "replace")
        return
    for package in packages:
        for path in sorted((where / package).rglob("*.py")):
            yield str(path.relative_to(where)), path.read_text("utf-8", "replace")


def first_line(text: str) -> str:
    return next((line for line in text.splitlines() if line.strip()), "").strip()
