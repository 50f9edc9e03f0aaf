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
from ncclcheck.probes.registry import Registry, UnknownCheck
from ncclcheck.probes.spec import CheckSpec
from ncclcheck.probes.registry import load_registry

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


# -- one home per check ----------------------------------------------------------------------
def spec_declarations() -> list[tuple[str, str | None, int]]:
    """Every ``CheckSpec(...)`` call in ncclcheck/: (module, the family its id names or None
    when the id is built at run time, line)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "CheckSpec"
                    and node.args):
                continue
            _, prefix = _as_pattern(node.args[0]) or ("", "")
            family = prefix.split(".", 1)[0] if "." in prefix else None
            found.append((module, family, node.lineno))
    return found


def test_the_scan_of_declarations_sees_plain_and_built_ids():
    found = {(m, f) for m, f, _ in spec_declarations()}
    assert ("ncclcheck.probes.ranks.world", "ranks") in found
    assert ("ncclcheck.probes.ranks.lightning", "ranks") in found  # an f-string per launch style
    assert ("ncclcheck.probes.registry", None) in found  # the generic <family>.probe row


def test_every_check_is_declared_in_its_family_s_home():
    """A check's spec sits in ncclcheck/probes/<family>/ beside its judge, never in support
    code (ncclib/, network/, bench/, cluster/, launchers/) or in another family's home."""
    misplaced = [f"{module}:{line} declares a {family}.* check"
                 for module, family, line in spec_declarations()
                 if module != "ncclcheck.probes.registry"
                 and not (family and module.startswith(f"ncclcheck.probes.{family}."))]
    assert not misplaced, "\n".join(misplaced)


def test_every_module_of_a_home_is_read_by_the_registry():
    """Each spec object defined in a home's modules is in the registry, found without a list."""
    from ncclcheck.probes import CHECK_FAMILIES
    from ncclcheck.probes.registry import family_modules
    registered = {id(s) for s in REGISTRY.specs}
    for family in CHECK_FAMILIES:
        home = PACKAGE / "probes" / family
        files = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                 for p in home.rglob("*.py")}
        assert files == {m.__name__ for m in family_modules(family)}, family
        for module in family_modules(family):
            for name, value in vars(module).items():
                if isinstance(value, CheckSpec) and value.family == family:
                    assert id(value) in registered, f"{module.__name__}.{name} is not registered"


def test_every_probe_family_has_a_home_and_no_home_is_a_stranger():
    from ncclcheck.probes import CHECK_FAMILIES
    homes = {p.name for p in (PACKAGE / "probes").iterdir() if (p / "__init__.py").exists()}
    assert homes == set(CHECK_FAMILIES)


def test_orders_are_unique_within_a_family():
    for family in {s.family for s in REGISTRY.specs}:
        orders = [s.order for s in REGISTRY.family(family) if not s.id.endswith(".probe")]
        assert all(o > 0 for o in orders) and len(set(orders)) == len(orders), family


def test_judges_run_in_declared_order_and_report_only_their_checks():
    from ncclcheck.model import passed
    from ncclcheck.probes.registry import judges
    from ncclcheck.probes.spec import Judge, judge
    for family in ("ranks", "net", "nccl", "bench", "cluster"):
        found = judges(family)
        assert found and [j.order for j in found] == sorted(j.order for j in found), family
        for j in found:
            assert all(s.family == family for s in j.specs), j.name
    mine, other = CheckSpec("net.mine", "mine", order=1), CheckSpec("net.other", "other", order=2)

    @judge(mine)
    def reports_another(facts):
        return [passed(mine, "ok"), passed(other, "not mine")]

    with pytest.raises(ValueError, match="net.other, which it does not judge"):
        Judge(reports_another, (mine,))(None)
    with pytest.raises(TypeError):
        judge()


def test_every_declared_check_is_judged_or_reported_by_named_code():
    """A spec with no judge is reported by code elsewhere: the Lightning part, the gather's
    store row, the generic probe rows. Anything else would be a check nobody runs."""
    from ncclcheck.probes.registry import judges
    judged = {s.id for family in ("ranks", "net", "nccl", "bench", "cluster")
              for j in judges(family) for s in j.specs}
    unjudged = {s.id for s in REGISTRY.specs if s.id not in judged}
    reported_elsewhere = {s.id for s in REGISTRY.specs
                          if s.id.startswith(("ranks.lightning.", "ranks.cluster_env."))
                          or s.id in ("cluster.store",) or s.id.endswith(".probe")}
    assert unjudged == reported_elsewhere


def test_loading_the_registry_imports_neither_torch_nor_lightning():
    code = ("import sys; from ncclcheck.probes.registry import load_registry; load_registry(); "
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
