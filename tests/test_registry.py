"""The check registry: every id a probe can report is declared once, every declaration is
reported by some code, and what is generated from it (the CLI, docs/) follows it."""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from ncclcheck.cli import cli
from ncclcheck.model import Category
from ncclcheck.probes import FAMILY_NAMES
from ncclcheck.registry import CheckSpec, Registry, UnknownCheck
from ncclcheck.registry_load import load_registry

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ncclcheck"
EMITTERS = {"passed", "failed", "warned", "skipped", "errored", "CheckResult", "verdict"}


# -- what the code can emit, read from the source ---------------------------------------------
def _as_pattern(node: ast.AST) -> tuple[str, str] | None:
    """(regex, constant prefix) of an id literal; a placeholder stands for any id segment."""
    if isinstance(node, ast.Constant):
        return (re.escape(node.value), node.value) if isinstance(node.value, str) else None
    regex, prefix, fixed = "", "", True
    for part in node.values:
        if isinstance(part, ast.Constant):
            regex += re.escape(part.value)
            prefix += part.value if fixed else ""
        else:
            regex += r"[A-Za-z0-9_.]+"
            fixed = False
    return regex, prefix


@dataclass(frozen=True)
class Member:
    """``SPEC.member(name)``: some id of a ``.*`` family."""

    spec: CheckSpec


def _bound_in(scope: ast.AST, name: str) -> list[ast.AST]:
    """What a local name is bound to in a function: assignments, and comprehension targets
    (whose values are the items of what they iterate)."""
    found: list[ast.AST] = []
    for sub in ast.walk(scope):
        if isinstance(sub, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                               for t in sub.targets):
            found.append(sub.value)
        elif isinstance(sub, ast.comprehension) and getattr(sub.target, "id", None) == name:
            found.append(ast.Starred(sub.iter))
    return found


def _items(value: object) -> list[object]:
    """A collection's items (a tuple literal's are already spread out by ``_values``)."""
    if isinstance(value, dict):
        return list(value.values())
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _values(node: ast.AST, scope: ast.AST, module: str) -> list[object]:
    """The objects an id argument can evaluate to: strings or f-string nodes as written,
    ``CheckSpec`` objects, or ``Member`` for an id built from a ``.*`` declaration."""
    if isinstance(node, (ast.Constant, ast.JoinedStr)):
        return [node]
    if isinstance(node, (ast.Starred, ast.Subscript)):  # (some of) the items of a collection
        return [item for value in _values(node.value, scope, module) for item in _items(value)]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [v for elt in node.elts for v in _values(elt, scope, module)]
    if isinstance(node, ast.Name):
        local = _bound_in(scope, node.id) if isinstance(scope, ast.FunctionDef) else []
        if local:
            return [v for bound in local for v in _values(bound, scope, module)]
        found = getattr(importlib.import_module(module), node.id, None)
        return [found] if found is not None else []
    if isinstance(node, ast.Attribute):
        return [getattr(v, node.attr) for v in _values(node.value, scope, module)
                if hasattr(v, node.attr)]
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "member"):
        return [Member(v) for v in _values(node.func.value, scope, module)
                if isinstance(v, CheckSpec)]
    return []


def _pattern(value: object) -> tuple[str, str] | None:
    if isinstance(value, (ast.Constant, ast.JoinedStr)):
        return _as_pattern(value)
    if isinstance(value, str):
        return re.escape(value), value
    if isinstance(value, CheckSpec):
        return re.escape(value.id), value.id
    if isinstance(value, Member):
        stem = value.spec.id[:-1]
        return re.escape(stem) + r"[A-Za-z0-9_.]+", stem
    return None


def emitted_ids() -> dict[tuple[str, str], str]:
    """Every id passed to a result constructor in ncclcheck/ (a literal, a declared spec, an id
    built from one): (regex, prefix) -> where."""
    found: dict[tuple[str, str], str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Module))]
        for scope in scopes:
            for call in ast.walk(scope):
                if not (isinstance(call, ast.Call) and call.args
                        and getattr(call.func, "id", getattr(call.func, "attr", None)) in EMITTERS):
                    continue
                for value in _values(call.args[0], scope, module):
                    pattern = _pattern(value)
                    if pattern is not None:
                        found.setdefault(pattern, f"{path.relative_to(ROOT)}:{call.lineno}")
    return found


def covers(spec: CheckSpec, regex: str, prefix: str) -> bool:
    if spec.id.endswith(".*"):
        stem = spec.id[:-1]
        return prefix.startswith(stem) and (len(prefix) > len(stem) or regex != re.escape(prefix))
    return re.fullmatch(regex, spec.id) is not None


REGISTRY = load_registry()
EMITTED = emitted_ids()


def test_the_scan_sees_literals_fstrings_specs_and_members():
    patterns = {prefix for _, prefix in EMITTED}
    assert {"ranks.world_size", "cluster.store", "net.master_port", "nccl.bootstrap_interface",
            "nccl.setting.", "ranks.cluster_env.torchrun", "nccl.plugin."} <= patterns
    assert any(re.fullmatch(regex, "bench.probe") for regex, _ in EMITTED)


@pytest.mark.parametrize("pattern", sorted(EMITTED), ids=lambda p: p[1] or p[0])
def test_every_emitted_id_is_declared(pattern):
    regex, prefix = pattern
    assert any(covers(s, regex, prefix) for s in REGISTRY.specs), (
        f"{EMITTED[pattern]} reports {prefix or regex!r}, which no CHECKS declares")


@pytest.mark.parametrize("spec", REGISTRY.specs, ids=lambda s: s.id)
def test_every_declaration_is_reported_by_some_code(spec):
    assert any(covers(spec, regex, prefix) for regex, prefix in EMITTED), (
        f"{spec.id} is declared but nothing in ncclcheck/ reports it")


def test_ids_are_unique_and_well_formed():
    assert REGISTRY.duplicates() == []
    families = set(FAMILY_NAMES) | {"cluster"}
    for spec in REGISTRY.specs:
        assert re.fullmatch(r"[a-z]+(\.[A-Za-z0-9_]+)+(\.\*)?", spec.id), spec.id
        assert spec.family in families, spec.id
        assert spec.title and not spec.title.endswith(".")


def test_duplicates_are_found():
    one = CheckSpec("net.mesh", "a")
    assert Registry((one, CheckSpec("net.x", "b"), one)).duplicates() == ["net.mesh"]


def test_categories_are_categories_and_verdicts_name_them():
    for spec in REGISTRY.specs:
        assert all(isinstance(c, Category) for c in spec.categories), spec.id
        if spec.fails_when or spec.warns_when:
            assert spec.categories, f"{spec.id} can fail or warn but declares no category"


def test_every_family_declares_its_checks():
    for family in (*FAMILY_NAMES, "cluster"):
        assert [s for s in REGISTRY.family(family) if not s.id.endswith(".probe")], family


def test_every_module_with_checks_is_reached_by_the_registry():
    """A module that defines CHECKS its family does not re-export would be silently unused."""
    declared = set(REGISTRY.specs)
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        if not any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "CHECKS"
                                                        for t in n.targets) for n in tree.body):
            continue
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        missing = [s.id for s in importlib.import_module(module).CHECKS if s not in declared]
        assert not missing, f"{module}.CHECKS is not in the registry: {missing}"


def test_loading_the_registry_imports_neither_torch_nor_lightning():
    code = ("import sys; from ncclcheck.registry_load import load_registry; load_registry(); "
            "print(sorted(m for m in ('torch', 'lightning', 'pytorch_lightning') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# -- lookup ----------------------------------------------------------------------------------
def test_lookup_by_id_by_covered_id_and_by_pattern():
    assert REGISTRY.lookup("net.nccl_interface").id == "net.nccl_interface"
    assert REGISTRY.lookup("nccl.setting.NCCL_SOCKET_IFNAME").id == "nccl.setting.*"
    assert REGISTRY.lookup("nccl.setting.*").id == "nccl.setting.*"
    assert REGISTRY.lookup("ranks.probe").id == "ranks.probe"


def test_an_exact_id_wins_over_a_pattern():
    registry = Registry((CheckSpec("nccl.plugin.*", "any"), CheckSpec("nccl.plugin.net", "net")))
    assert registry.lookup("nccl.plugin.net").title == "net"
    assert registry.lookup("nccl.plugin.tuner").title == "any"


def test_unknown_id_names_close_ones():
    with pytest.raises(UnknownCheck, match="net.nccl_interface"):
        REGISTRY.lookup("net.nccl_iface")
    with pytest.raises(UnknownCheck, match="close: none"):
        REGISTRY.lookup("zzz")


# -- the command -----------------------------------------------------------------------------
def test_checks_lists_every_check():
    out = CliRunner().invoke(cli, ["checks"])
    assert out.exit_code == 0
    for spec in REGISTRY.specs:
        assert re.search(rf"^{re.escape(spec.id)}\s", out.output, re.M), spec.id
    assert "RANK >= WORLD_SIZE" in out.output


def test_checks_json_is_one_document_with_every_field():
    out = CliRunner().invoke(cli, ["checks", "--format", "json"])
    data = json.loads(out.output)
    assert [c["id"] for c in data["checks"]] == [s.id for s in REGISTRY.specs]
    first = data["checks"][0]
    assert set(first) == {"id", "family", "title", "categories", "fails_when", "warns_when",
                          "doc", "docs"}


def test_checks_markdown_is_the_docs_table():
    out = CliRunner().invoke(cli, ["checks", "--format", "markdown"])
    assert out.output.startswith("| id | checks | fails / warns when | category |")
    assert "| `bench.busbw` |" in out.output


def test_checks_id_prints_one_in_full():
    out = CliRunner().invoke(cli, ["checks", "net.nccl_interface"])
    assert out.exit_code == 0
    assert out.output.startswith("net.nccl_interface\n")
    for label in ("family", "title", "categories", "fails when", "warns when", "docs"):
        assert re.search(rf"^  {label}\s", out.output, re.M), label
    assert "docs/net.md" in out.output
    one = json.loads(CliRunner().invoke(cli, ["checks", "nccl.setting.NCCL_DEBUG",
                                              "--format", "json"]).output)
    assert one["id"] == "nccl.setting.*" and "configuration" in one["categories"]


def test_unknown_id_is_exit_2_with_one_line():
    done = subprocess.run([sys.executable, "-m", "ncclcheck", "checks", "net.nccl_iface"],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "net.nccl_interface" in done.stderr


# -- generated docs --------------------------------------------------------------------------
def test_generated_docs_are_fresh():
    """docs/ tables and the schema enum must be regenerated (python -m ncclcheck.gendocs)."""
    done = subprocess.run([sys.executable, "-m", "ncclcheck.gendocs", "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr


def test_stale_docs_are_detected(monkeypatch):
    from ncclcheck import gendocs
    current = gendocs.generated()
    page = gendocs.DOCS / "net.md"
    real_read = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: (
        real_read(self, *a, **k).replace("`net.mesh`", "`net.old_mesh`") if self == page
        else real_read(self, *a, **k)))
    assert page in gendocs.stale()
    assert gendocs.generated()[page] == current[page]


def test_schema_category_enum_is_the_model_s():
    schema = json.loads((ROOT / "docs" / "report.schema.json").read_text())
    assert schema["$defs"]["category"]["enum"] == [c.value for c in Category]


def test_launcher_table_rows_come_from_the_classes():
    from ncclcheck.gendocs import launcher_table
    from ncclcheck.launchers import DETECTION_ORDER
    table = launcher_table()
    for cls in DETECTION_ORDER:
        assert f"| `{cls.name}` | {cls.title} |" in table
        # the variables a launcher lists are enough for it to recognise its own environment
        assert cls.detect({name: "0" for name in cls.variables}), cls.name
