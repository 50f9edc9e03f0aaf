"""One owner per fact, read from the source: /sys is read by ncclcheck.network and
ncclcheck.ncclib only, a check id is typed once (in its declaration), and every failure
signature the probes name is one the catalogue has (its text is never copied).

Each scan is checked against a source that breaks the rule, so a scan that stopped seeing
anything would fail instead of passing quietly.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from ncclcheck.catalogue import UnknownSignature, catalogue_fix, load
from ncclcheck.probes.registry import load_registry

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ncclcheck"
SYS_OWNERS = ("ncclcheck/network/", "ncclcheck/ncclib/")


def sources() -> list[tuple[str, ast.Module]]:
    return [(str(path.relative_to(ROOT)), ast.parse(path.read_text("utf-8")))
            for path in sorted(PACKAGE.rglob("*.py"))]


SOURCES = sources()


def _fstring_parts(tree: ast.AST) -> set[int]:
    """The constant pieces of f-strings, which are judged with the f-string they belong to."""
    return {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
            for part in node.values}


def _in_order(nodes: list[tuple[ast.AST, str]], where: str) -> list[str]:
    return [f"{where}:{node.lineno}: {text}"
            for node, text in sorted(nodes, key=lambda n: (n[0].lineno, n[0].col_offset))]


def _docstrings(tree: ast.AST) -> set[int]:
    """The docstring nodes of a module and of its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


# -- /sys -------------------------------------------------------------------------------------
def sys_paths(where: str, tree: ast.AST) -> list[str]:
    """String constants that are /sys paths. A path is a literal that starts with /sys: only
    such a literal can be opened. Text that names /sys inside a sentence (a docstring, a
    summary that says where a fact comes from) reads nothing, and comments are not in the
    syntax tree at all."""
    skip = _docstrings(tree) | _fstring_parts(tree)
    found = []
    for node in ast.walk(tree):
        text = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            text = node.value
        elif isinstance(node, ast.JoinedStr) and node.values \
                and isinstance(node.values[0], ast.Constant):
            text = node.values[0].value
        if text is not None and (text == "/sys" or text.startswith("/sys/")):
            found.append((node, repr(text)))
    return _in_order(found, where)


def test_sys_is_read_only_by_network_and_ncclib():
    readers = [hit for where, tree in SOURCES if not where.startswith(SYS_OWNERS)
               for hit in sys_paths(where, tree)]
    assert not readers, ("read /sys through ncclcheck.network (interfaces, link speeds, RDMA "
                         "ports) or ncclcheck.ncclib instead:\n" + "\n".join(readers))


def test_the_sys_scan_sees_paths_and_not_prose():
    owners = [hit for where, tree in SOURCES if where.startswith(SYS_OWNERS)
              for hit in sys_paths(where, tree)]
    assert any("/sys/class/infiniband" in hit for hit in owners)
    tree = ast.parse('"""Reads /sys/class/net."""\n'
                     'SPEED = "/sys/class/net/eth0/speed"\n'
                     'ROOT = f"/sys/class/{kind}"\n'
                     'NOTE = "no device (/sys/class/infiniband)"\n'
                     'open(os.path.join("/sys", "class"))\n')
    assert [hit.split(": ", 1)[0] for hit in sys_paths("x.py", tree)] == ["x.py:2", "x.py:3",
                                                                        "x.py:5"]


# -- where torch is installed -----------------------------------------------------------------
TORCH_OWNER = "ncclcheck/needs.py"  # torch_package(): whether and where torch is installed


def torch_lookups(where: str, tree: ast.AST) -> list[str]:
    """Calls that look torch up without importing it: find_spec("torch"), whatever the
    import of find_spec looks like."""
    found = [(node, "find_spec('torch')") for node in ast.walk(tree)
             if isinstance(node, ast.Call) and node.args
             and isinstance(node.args[0], ast.Constant) and node.args[0].value == "torch"
             and (getattr(node.func, "attr", None) or getattr(node.func, "id", None))
             == "find_spec"]
    return _in_order(found, where)


def test_whether_torch_is_installed_is_asked_in_one_place():
    askers = [hit for where, tree in SOURCES for hit in torch_lookups(where, tree)]
    assert askers and all(hit.startswith(TORCH_OWNER + ":") for hit in askers), (
        "ask ncclcheck.needs.torch_package() instead:\n" + "\n".join(askers))


def test_the_torch_scan_sees_calls_and_not_prose():
    tree = ast.parse('"""find_spec("torch") in a docstring."""\n'
                     'import importlib.util\n'
                     'from importlib.util import find_spec\n'
                     'a = importlib.util.find_spec("torch")\n'
                     'b = find_spec("torch")\n'
                     'c = find_spec("hyperscan")\n')
    assert [hit.split(": ", 1)[0] for hit in torch_lookups("x.py", tree)] == ["x.py:4", "x.py:5"]


# -- check ids --------------------------------------------------------------------------------
REGISTRY = load_registry()


def retyped_ids(where: str, tree: ast.AST, ids: set[str], stems: set[str]) -> list[str]:
    """Literals equal to a declared check id, or f-strings that start with a family's stem
    (``f"nccl.setting.{name}"``), anywhere but as the first argument of ``CheckSpec(...)``."""
    declared = {id(node.args[0]) for node in ast.walk(tree)
                if isinstance(node, ast.Call) and node.args
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == "CheckSpec"}
    parts = _fstring_parts(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in declared:
            continue
        if isinstance(node, ast.Constant) and node.value in ids and id(node) not in parts:
            found.append((node, repr(node.value)))
        elif (isinstance(node, ast.JoinedStr) and node.values
              and isinstance(node.values[0], ast.Constant) and node.values[0].value in stems):
            found.append((node, f"f{node.values[0].value!r}..."))
    return _in_order(found, where)


def _stems(ids: set[str]) -> set[str]:
    """``nccl.setting.`` for ``nccl.setting.*``, ``ranks.cluster_env.`` for its members: the
    prefixes an id built at run time would start with."""
    stems = set()
    for check_id in ids:
        parts = check_id.removesuffix(".*").split(".")
        stems.update(".".join(parts[:n]) + "." for n in range(2, len(parts) + 1))
    return stems - {i + "." for i in ids if not i.endswith(".*")} | {
        i[:-1] for i in ids if i.endswith(".*")}


IDS = {spec.id for spec in REGISTRY.specs}
STEMS = _stems(IDS)


def test_check_ids_are_typed_only_in_their_declaration():
    retyped = [hit for where, tree in SOURCES for hit in retyped_ids(where, tree, IDS, STEMS)]
    assert not retyped, ("name the check by its CheckSpec (or SPEC.member(name) for a .* "
                         "family) instead of re-typing its id:\n" + "\n".join(retyped))


def test_the_id_scan_sees_literals_and_built_ids():
    assert {"nccl.setting.", "ranks.cluster_env.", "ranks.lightning."} <= STEMS
    tree = ast.parse('SPEC = CheckSpec("net.mesh", "title")\n'
                     'passed("net.mesh", "summary")\n'
                     'cid = f"nccl.setting.{name}"\n'
                     'if result.id == "ranks.launcher": pass\n'
                     'failed(SPEC, "net.mesh is fine")\n')
    assert [hit.split(": ", 1)[0] for hit in retyped_ids("x.py", tree, IDS, STEMS)] == [
        "x.py:2", "x.py:3", "x.py:4"]


# -- catalogue signatures named by the probes ------------------------------------------------
SIGNATURE_CALLS = {"catalogue_fix", "signature"}


def _module(where: str) -> str:
    return where.removesuffix(".py").replace("/", ".").removesuffix(".__init__")


def named_signatures(where: str, tree: ast.AST) -> list[tuple[str, str]]:
    """(where, id) for every signature id the code names: the first argument of
    ``catalogue_fix(...)`` and ``signature(...)`` (whose ``.render`` gives the text), and the
    ``signature=`` a result carries in its details; a literal, or a module-level constant."""
    named = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = getattr(node.func, "id", getattr(node.func, "attr", None))
        args = [node.args[0]] if func in SIGNATURE_CALLS and node.args else []
        args += [k.value for k in node.keywords if k.arg == "signature"]
        for arg in args:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                named.append((f"{where}:{node.lineno}", arg.value))
            elif isinstance(arg, ast.Name):
                value = getattr(importlib.import_module(_module(where)), arg.id, None)
                if isinstance(value, str):  # a module constant; a function's argument is not
                    named.append((f"{where}:{node.lineno}", value))
    return named


NAMED = [n for where, tree in SOURCES if not where.startswith("ncclcheck/explain/")
         for n in named_signatures(where, tree)]


def test_the_probes_name_signatures_through_the_scan():
    """Enough is seen for the next test to mean something: literals and constants both."""
    ids = {sig_id for _, sig_id in NAMED}
    assert {"nccl.no_socket_interface", "gloo.unknown_interface", "nccl.invalid_rank",
            "torch.store_port_in_use", "nccl.net_not_found", "nccl.too_many_sockets"} <= ids
    assert len(NAMED) >= 15


@pytest.mark.parametrize("where, sig_id", NAMED, ids=[f"{w}:{s}" for w, s in NAMED])
def test_every_named_signature_is_in_the_catalogue_with_a_fix(where, sig_id):
    known = load().by_id
    assert sig_id in known, f"{where} names {sig_id!r}, which the catalogue does not have"
    assert load().signature(sig_id).fix.strip(), f"{where}: {sig_id} has no fix text to show"


def test_explain_names_only_catalogue_signatures_too():
    known = load().by_id
    unknown = [(where, sig_id) for where, tree in SOURCES if where.startswith("ncclcheck/explain/")
               for where, sig_id in named_signatures(where, tree) if sig_id not in known]
    assert not unknown


def test_catalogue_fix_has_one_text_and_refuses_an_unknown_signature():
    plain = catalogue_fix("nccl.no_socket_interface")
    assert plain == load().signature("nccl.no_socket_interface").render({})[1].strip()
    assert plain == load().fix("nccl.no_socket_interface")
    assert catalogue_fix("nccl.no_socket_interface", "Here: eth9 is down.") == \
        f"{plain} Here: eth9 is down."
    assert "(now eth9)" in catalogue_fix("nccl.no_socket_interface", facts={"ifname": "eth9"})
    with pytest.raises(UnknownSignature):
        catalogue_fix("nccl.no_such_signature", "Here: anything.")


# -- size -------------------------------------------------------------------------------------
MAX_LINES = 400


def test_no_module_is_over_400_lines():
    """A module a newcomer can read in one sitting; a longer one is split along its seams
    (probes/ranks: the expected layout, the checks, the family)."""
    long = [f"{path.relative_to(ROOT)}: {n} lines" for path in sorted(PACKAGE.rglob("*.py"))
            if (n := len(path.read_text("utf-8").splitlines())) > MAX_LINES]
    assert not long, "\n".join(long)
