"""The shape of the package: no import circle, imports at the top, small modules, and the
probes free of Lightning until it is asked for.

The import graph is read from the source with ``ast``: every import statement anywhere in a
module (at the top, inside a function, under ``if TYPE_CHECKING:``), relative imports resolved,
``from x import y`` taken as module ``x.y`` when that is a module, the package ``__init__`` an
import from outside a package runs first, and the ``"module:function"`` strings the probe
registry imports by name, so that no circle hides behind a deferred import or a string.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

from ncclcheck.lightning.launch_styles import LIGHTNING, SLURM, TORCHRUN
from ncclcheck.probes.ranks.lightning import GRID_LAUNCHERS
from ncclcheck.probes.registry import load_registry

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ncclcheck"
MAX_LINES = 400

# Third-party packages a function may import, because importing them is slow or they are
# optional extras; each such import line (or the line above it) says why in a ``# deferred:``
# comment.
DEFERRED_PACKAGES = frozenset({
    "torch",  # seconds to import; only the families that talk to GPUs or build process groups
    "lightning", "pytorch_lightning",  # optional extra, seconds to import
    "hyperscan", "ahocorasick",  # optional accelerators of `explain`
    "matplotlib",  # optional extra, only --plot
    "prometheus_client",  # tens of milliseconds, only --prom-file
})

# Modules of this package a function may import: a package's public names loaded on first
# use, and the command line loading a command's machinery only when that command runs, so that
# `--help` and `ncclcheck explain` stay quick. Each line says why in a ``# deferred:`` comment.
DEFERRED_MODULES: dict[str, frozenset[str]] = {
    "ncclcheck": frozenset({"ncclcheck.model", "ncclcheck.context", "ncclcheck.runner"}),
    "ncclcheck.cli": frozenset({"ncclcheck.runner", "ncclcheck.lightning.probe",
                                "ncclcheck.explain.cli", "ncclcheck.hang.cli"}),
    # the TOML parser: a start reads the catalogue's compiled file (catalogue/compiled.py)
    "ncclcheck.catalogue": frozenset({"ncclcheck.catalogue.sources"}),
    "ncclcheck.catalogue.known_issues": frozenset({"ncclcheck.catalogue.sources"}),
    # explain loads the readers of dumps, snapshots and named releases only for a run that has
    # them, so that a plain log starts quickly
    "ncclcheck.explain.reader": frozenset({"ncclcheck.flightrec.load", "ncclcheck.hang.files"}),
    "ncclcheck.explain.readers.dumps": frozenset({"ncclcheck.explain.hangs"}),
    "ncclcheck.explain.readers.hang_snapshots": frozenset({
        "ncclcheck.hang.facts", "ncclcheck.hang.files", "ncclcheck.hang.verdict"}),
    "ncclcheck.explain.readers.known_versions": frozenset({"ncclcheck.catalogue.known_issues"}),
}
REASON = "# deferred:"


@dataclass(frozen=True)
class Import:
    """One import of a module found in the source."""

    source: str  # the importing module
    target: str  # the module imported (for a package's submodule, the submodule)
    line: int
    deferred: bool  # inside a function
    how: str  # "import", or "string" for a "module:function" target


def module_names() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    names = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _base(source: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = source.split(".") if path.name == "__init__.py" else source.split(".")[:-1]
    package = package[:len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def _in_function(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return True
    return False


def imports_of(source: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """Every import in one module: statements, and "ncclcheck.x:function" / "ncclcheck.x"
    strings that name a module of the package."""
    tree = ast.parse(path.read_text("utf-8"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        deferred = _in_function(node, parents)
        if isinstance(node, ast.Import):
            found += [Import(source, a.name, node.lineno, deferred, "import") for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _base(source, path, node)
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.append(Import(source, target if target in modules else base, node.lineno,
                                    deferred, "import"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            target = node.value.partition(":")[0]
            if target in modules and target.startswith("ncclcheck.") and " " not in node.value:
                found.append(Import(source, target, node.lineno, deferred, "string"))
    return found


def _own(target: str) -> bool:
    return target == "ncclcheck" or target.startswith("ncclcheck.")


def import_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], Import]]:
    """Module -> the package's modules importing it runs, and one import behind each edge.

    Importing ``a.b.c`` from outside ``a.b`` runs ``a.b/__init__.py`` first, so it is an edge
    to ``a.b`` as well."""
    modules = module_names()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    why: dict[tuple[str, str], Import] = {}
    for source, path in modules.items():
        for found in imports_of(source, path, modules):
            if not _own(found.target):
                continue
            parts = found.target.split(".")
            targets = [".".join(parts[:n]) for n in range(2, len(parts) + 1)]
            for target in targets:
                inside = source == target or source.startswith(target + ".")
                if target in modules and not inside:
                    graph[source].add(target)
                    why.setdefault((source, target), found)
    return graph, why


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The sets of modules that all reach each other (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for node in sorted(graph):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return components


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest circle through each strongly connected set of modules."""
    return [_shortest_circle(graph, set(c), c[0]) for c in strongly_connected(graph)]


def _shortest_circle(graph: dict[str, set[str]], members: set[str], start: str) -> list[str]:
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph[node] & members):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [start] + path[::-1][1:] + [start] if len(path) > 1 else [start, node, start]
            if nxt not in came_from:
                came_from[nxt] = node
                queue.append(nxt)
    raise AssertionError(f"{start} is in a strongly connected set but on no circle")


# -- the repository: benchmarks, scripts and tests import each other by file name -------------
OUTSIDE = ("benchmarks", "scripts", "tests")


def outside_files() -> dict[str, Path]:
    """The Python files outside the package, by the bare name they are imported as (their
    folder is put on sys.path by whoever imports them)."""
    files: dict[str, Path] = {}
    for folder in OUTSIDE:
        for path in sorted((ROOT / folder).rglob("*.py")):
            assert path.stem not in files, f"{path} and {files[path.stem]} share an import name"
            files[path.stem] = path
    return files


def repository_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], Import]]:
    """The package's import graph plus every file of benchmarks/, scripts/ and tests/: an
    import of another such file by its bare name, or of the package's modules."""
    graph, why = import_graph()
    modules = module_names()
    outside = outside_files()
    for name, path in outside.items():
        graph.setdefault(name, set())
        for found in imports_of(name, path, modules):
            first = found.target.split(".")[0]
            if first in outside and first != name:
                targets = [first]
            elif _own(found.target):
                parts = found.target.split(".")
                targets = [".".join(parts[:n]) for n in range(1, len(parts) + 1)
                           if ".".join(parts[:n]) in modules]
            else:
                continue
            for target in targets:
                graph[name].add(target)
                why.setdefault((name, target), found)
    return graph, why


def _path_of(module: str) -> Path:
    return module_names().get(module) or outside_files()[module]


def describe(circle: list[str], why: dict[tuple[str, str], Import]) -> str:
    steps = []
    for source, target in zip(circle, circle[1:]):
        found = why[(source, target)]
        place = f"{_path_of(source).relative_to(ROOT)}:{found.line}"
        kind = {"string": " (by name)"}.get(found.how, " (in a function)" if found.deferred else "")
        steps.append(f"  {source} -> {target}{kind}  [{place}]")
    return "\n".join(steps)


# -- the graph reader reads what it claims --------------------------------------------------
def test_the_graph_holds_known_edges_of_every_kind():
    graph, why = import_graph()
    assert "ncclcheck.probes" in graph["ncclcheck.runner"]  # a plain top-level import
    assert why[("ncclcheck.probes", "ncclcheck.probes.ranks")].how == "string"  # FAMILIES
    assert "ncclcheck.cluster.session" in graph["ncclcheck.cluster.job"]  # a relative import
    # importing a submodule from outside its package runs the package's __init__ first
    assert "ncclcheck.launchers" in graph["ncclcheck.probes.ranks.facts"]
    assert "ncclcheck.catalogue" in graph["ncclcheck.probes.ranks.facts"]


def test_the_cycle_finder_finds_a_circle_and_names_its_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e2"}, "e2": {"e"}}
    assert sorted(map(tuple, cycles(graph))) == [("a", "b", "c", "a"), ("e", "e2", "e")]
    assert cycles({"a": {"b"}, "b": set()}) == []


# -- the rules -------------------------------------------------------------------------------
def test_no_import_cycle():
    graph, why = import_graph()
    found = [(_shortest_circle(graph, set(c), c[0]), c) for c in strongly_connected(graph)]
    assert not found, "import circles (break one by returning data to the caller):\n" + \
        "\n\n".join(f"{len(members)} modules reach each other: {', '.join(members)}; one "
                      f"circle:\n{describe(circle, why)}" for circle, members in found)


def test_no_import_cycle_in_the_repository():
    """benchmarks/, scripts/ and tests/ included: shared code goes into a module both import."""
    graph, why = repository_graph()
    assert ("explain_crossval", "explain_accuracy") in why  # the reader sees bare-name imports
    assert "ncclcheck.probes.registry" in graph["test_registry"]
    found = [(_shortest_circle(graph, set(c), c[0]), c) for c in strongly_connected(graph)]
    assert not found, "import circles:\n" + "\n\n".join(
        f"{', '.join(members)}; one circle:\n{describe(circle, why)}" for circle, members in found)


def _deferral_problems() -> list[str]:
    modules = module_names()
    problems = []
    for source, path in modules.items():
        lines = path.read_text("utf-8").splitlines()
        for found in imports_of(source, path, modules):
            if not found.deferred or found.how != "import":
                continue
            where = f"{path.relative_to(ROOT)}:{found.line}: import of {found.target}"
            if _own(found.target):
                allowed = found.target in DEFERRED_MODULES.get(source, ())
            else:
                allowed = found.target.split(".")[0] in DEFERRED_PACKAGES
            if not allowed:
                problems.append(f"{where} inside a function: move it to the top of the module")
            elif not any(REASON in lines[n - 1] for n in (found.line, found.line - 1) if n > 0):
                problems.append(f"{where} is deferred without a '{REASON} <why>' comment")
    return list(dict.fromkeys(problems))


def test_imports_sit_at_the_top_unless_deferred_with_a_reason():
    problems = _deferral_problems()
    assert not problems, "\n".join(problems)


def test_no_module_is_longer_than_the_limit():
    long = {str(p.relative_to(ROOT)): n for p in module_names().values()
            if (n := len(p.read_text("utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them): {long}"


def _reached(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


# What the failure catalogue may import of the package: the taxonomy and NCCL's version codes.
CATALOGUE_NEEDS = frozenset({"ncclcheck.model", "ncclcheck.ncclib", "ncclcheck.ncclib.version"})


def test_the_catalogue_is_a_leaf_that_never_reaches_explain():
    """Probes read fix texts from the catalogue; explain's machinery (literal derivation,
    indexes, the cache folder) must never come with it."""
    graph, why = import_graph()
    package = [m for m in graph
               if m == "ncclcheck.catalogue" or m.startswith("ncclcheck.catalogue.")]
    outside = {(m, t) for m in package for t in graph[m] if t not in package}
    assert {t for _, t in outside} <= CATALOGUE_NEEDS, sorted(outside)
    reached = set().union(*(_reached(graph, m) for m in package))
    assert not [m for m in reached if m.startswith("ncclcheck.explain")]


def test_only_the_explain_command_imports_explain_from_outside_it():
    """And the hang command's body, which explains its snapshots with explain's engine; the
    command line loads either only when that command runs."""
    graph, why = import_graph()
    importers = {source for source, targets in graph.items()
                 if not source.startswith("ncclcheck.explain")
                 and any(t == "ncclcheck.explain" or t.startswith("ncclcheck.explain.")
                         for t in targets)}
    assert importers == {"ncclcheck.cli", "ncclcheck.hang.cli"}
    assert why[("ncclcheck.cli", "ncclcheck.explain.cli")].deferred  # only when it runs
    assert why[("ncclcheck.cli", "ncclcheck.hang.cli")].deferred
    assert not [t for t in graph if t.startswith("ncclcheck.hang") and t != "ncclcheck.hang.cli"
                and "ncclcheck.hang.cli" in graph[t]]


@pytest.mark.parametrize("code", [
    "import ncclcheck.probes",
    "import ncclcheck.probes.ranks",
    "from ncclcheck.probes.registry import load_registry; load_registry()",
])
def test_the_probes_and_the_registry_load_neither_lightning_nor_torch(code):
    assert _loaded_after(code, ("torch", "lightning", "pytorch_lightning",
                                "ncclcheck.lightning")) == []


def test_the_command_line_loads_a_command_s_machinery_only_when_it_runs():
    """What cli.py defers, so that --help and `ncclcheck explain` stay quick."""
    assert _loaded_after("import ncclcheck.cli", ("torch", "ncclcheck.runner",
                                                  "ncclcheck.lightning", "ncclcheck.explain",
                                                  "ncclcheck.hang")) == []


@pytest.mark.parametrize("argv", [["hang", "--help"], ["explain", "--help"], ["--help"]])
def test_help_imports_no_torch(argv):
    code = ("import sys; from ncclcheck.cli import cli; out, sys.stdout = sys.stdout, sys.stderr; "
            f"cli.main({argv!r}, standalone_mode=False); sys.stdout = out")
    assert _loaded_after(code, ("torch", "ncclcheck.runner")) == []


def _loaded_after(code: str, names: tuple[str, ...]) -> list[str]:
    """The modules among ``names`` (and their submodules) a fresh interpreter holds after
    running ``code``."""
    check = textwrap.dedent(f"""
        import json, sys
        {code}
        names = {names!r}
        print(json.dumps(sorted(m for m in sys.modules
                                if any(m == n or m.startswith(n + ".") for n in names))))
    """)
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                          timeout=120, check=True)
    return json.loads(done.stdout)


def test_the_registry_still_declares_the_lightning_checks():
    """The Lightning rows stay listed although building the registry imports no Lightning."""
    ids = {s.id for s in load_registry().family("ranks")}
    assert {"ranks.lightning.environment", "ranks.lightning.live",
            "ranks.cluster_env.interface", "ranks.cluster_env.torchrun"} <= ids


def test_the_declared_grid_launchers_are_the_ones_the_grid_runs():
    """The declarations name the launchers without importing ncclcheck.lightning."""
    assert GRID_LAUNCHERS == tuple((s.name, s.title) for s in (TORCHRUN, LIGHTNING, SLURM))


# -- the recipe of docs/architecture.md: a check is one new file --------------------------------
RECIPE_CHECK = '''"""A check added by the recipe: a host whose only interface is loopback cannot join a job."""

from __future__ import annotations

from ncclcheck.model import Category, CheckResult, passed, warned
from ncclcheck.probes.net.facts import Facts
from ncclcheck.probes.spec import CheckSpec, judge

NOT_ONLY_LOOPBACK = CheckSpec(
    "net.recipe_not_only_loopback", "the host has an interface besides loopback",
    (Category.INTERFACE,), warns_when="every interface with an address is loopback",
    order=45)


@judge(NOT_ONLY_LOOPBACK)
def check_not_only_loopback(facts: Facts) -> CheckResult:
    others = [i.name for i in facts.interfaces if i.addresses and not i.loopback]
    if others:
        return passed(NOT_ONLY_LOOPBACK, f"{len(others)} non-loopback interface(s)")
    return warned(NOT_ONLY_LOOPBACK, "only loopback has an address", "Connect the host.",
                  Category.INTERFACE)
'''


def test_adding_a_check_is_one_new_file(tmp_path):
    """docs/architecture.md's first recipe, walked: a copy of the package, one new module in
    the family's home, nothing else changed; the check is listed and reported in its place."""
    import filecmp
    import os
    import shutil
    copy = tmp_path / "ncclcheck"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "probes" / "net" / "recipe_example.py").write_text(RECIPE_CHECK, "utf-8")

    def changed(cmp: filecmp.dircmp) -> list[str]:
        found = cmp.left_only + cmp.diff_files + [f"{cmp.right}/{n}" for n in cmp.right_only]
        return found + [f for sub in cmp.subdirs.values() for f in changed(sub)]

    cmp = filecmp.dircmp(PACKAGE, copy, ignore=["__pycache__"])
    assert changed(cmp) == [str(copy / "probes" / "net") + "/recipe_example.py"]
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    listed = subprocess.run([sys.executable, "-m", "ncclcheck", "checks",
                             "net.recipe_not_only_loopback"], capture_output=True, text=True,
                            env=env, timeout=60, cwd=tmp_path)
    assert listed.returncode == 0 and "besides loopback" in listed.stdout, listed.stderr
    ran = subprocess.run([sys.executable, "-m", "ncclcheck", "net", "--local", "--format", "json",
                          "--timeout", "30"], capture_output=True, text=True, env=env, timeout=90,
                         cwd=tmp_path)
    ids = [c["id"] for c in json.loads(ran.stdout)["checks"]]
    assert ids.index("net.gloo_interface") + 1 == ids.index("net.recipe_not_only_loopback")


# -- explain's start on a small log: only what the log needs ------------------------------------
SMALL_LOGS = {  # a 1 KB real log a signature decides, and one the text model reads
    "signature": ROOT / "tests/data/logs/world/dev/"
                        "c4-006-colbert-kmeans-rank0-allreduce-watchdog-timeout.log",
    "model": ROOT / "tests/data/logs/world/dev/c32-003-torchelastic-etcdstore-needs-newer-torch.log",
}
# What explain leaves unloaded on such a log: the TOML parser (the catalogue is read from its
# compiled file), the machinery of flight-recorder dumps, hang snapshots and the known-issues
# table (none given, no release named), scikit-learn and torch.
NOT_FOR_A_SMALL_LOG = ("tomllib", "tomli", "ncclcheck.catalogue.sources", "ncclcheck.flightrec",
                       "ncclcheck.hang", "ncclcheck.explain.hangs", "pickle",
                       "ncclcheck.catalogue.known_issues", "sklearn", "torch")


@pytest.mark.parametrize("decided_by", sorted(SMALL_LOGS))
def test_explain_on_a_small_log_loads_only_what_it_needs(decided_by):
    run = f"try: main(['explain', {str(SMALL_LOGS[decided_by])!r}])\nexcept SystemExit: pass"
    code = ("import sys; from ncclcheck.cli import main; out, sys.stdout = sys.stdout, sys.stderr; "
            f"exec({run!r}); sys.stdout = out")
    assert _loaded_after(code, NOT_FOR_A_SMALL_LOG) == []


def test_a_log_naming_a_release_loads_the_known_issues_but_no_toml_parser(tmp_path):
    log = tmp_path / "nccl.log"
    log.write_text("node1:1:1 [0] NCCL INFO NCCL version 2.26.2+cuda12.2\n"
                   "RuntimeError: NCCL error: unhandled system error\n", "utf-8")
    code = ("import sys; from ncclcheck.explain.engine import explain; "
            f"r = explain([{str(log)!r}]); "
            "assert any(n.id.startswith('known_issue.') for n in r.notes), r.notes")
    assert _loaded_after(code, ("tomllib", "tomli", "ncclcheck.catalogue.sources")) == []
