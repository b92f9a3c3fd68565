"""How the modules depend on one another: no import cycle, and no test leans on benchmarks.

A cycle hides behind an import deferred into a function body until someone moves it; so
imports are read from the source (every `import` statement, wherever it sits), not from
what a running interpreter happens to have loaded.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("collectors", "store", "derive", "queries", "alerts", "dashboard", "dupescope",
            "sample_data")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST, modules: set[str] = frozenset()) -> set[str]:
    """Dotted names a module imports. `from a import b` names `a.b` where that is one of
    `modules`, and `a` where `b` is anything else."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                names.add(sub if sub in modules else node.module)
    return names


def import_graph(packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the project modules it imports. An edge to a module's own enclosing
    package is left out: Python runs a package's `__init__` before any of its modules."""
    sources = {module_name(p): p for package in packages for p in (ROOT / package).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in sources.items():
        graph[name] = {
            target
            for target in imported(ast.parse(path.read_text(), str(path)), set(sources))
            if target in sources and target != name and not name.startswith(target + ".")
        }
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Groups of modules that import one another, directly or through others (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_sees_a_cycle_through_a_third_module():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_of_the_project_imports_itself_back():
    assert cycles(import_graph()) == []


def test_the_graph_sees_imports_deferred_into_functions():
    graph = import_graph()
    assert "dupescope.cli_dashboard" in graph["dashboard.screenshots"]


def test_no_test_imports_benchmarks():
    offenders = sorted(
        path.name
        for path in (ROOT / "tests").rglob("*.py")
        if any(name == "benchmarks" or name.startswith("benchmarks.")
               for name in imported(ast.parse(path.read_text())))
    )
    assert offenders == []


#: The stages below the readers, and the other stages each may import: the flow runs
#: sources -> collectors -> store -> derive -> queries -> dashboard, CLI and alerts.
BELOW: dict[str, set[str]] = {
    "sample_data": set(),
    "store": set(),
    "collectors": {"store"},
    "derive": {"store"},
    "queries": {"store", "derive"},
}

#: Imports against the flow, each with why. The collect server reports how far the
#: derive stage lags the events it wrote (its `/metrics`), which only a deriver knows.
ACROSS: dict[tuple[str, str], str] = {
    ("collectors.service.metrics", "derive.open"): "the derivation lag on /metrics",
}


def test_the_lower_stages_import_nothing_above_them():
    upward = sorted(
        (module, target)
        for module, targets in import_graph().items()
        for target in targets
        if (stage := module.split(".")[0]) in BELOW
        and target.split(".")[0] not in BELOW[stage] | {stage}
        and (module, target) not in ACROSS
    )
    assert upward == []


def test_derive_sits_between_store_and_queries():
    graph = import_graph()
    derive_imports = {t.split(".")[0] for m, ts in graph.items() if m.startswith("derive")
                      for t in ts}
    assert "queries" not in derive_imports and "store" in derive_imports
    assert any(t.startswith("derive") for m, ts in graph.items() if m.startswith("queries")
               for t in ts)


def imports_of_test_modules(tree: ast.AST, test_modules: set[str]) -> set[str]:
    """The test modules (`tests/test_*.py`, by stem) a module imports, however spelt:
    `test_x`, `tests.test_x`, `from tests import test_x`, or relatively."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            dotted = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            dotted = [module] + [f"{module}.{alias.name}".lstrip(".") for alias in node.names]
        else:
            continue
        for name in dotted:
            parts = name.split(".")
            if parts[0] == "tests":
                parts = parts[1:]
            if parts and parts[0] in test_modules:
                found.add(parts[0])
    return found


def test_no_module_imports_a_test_module():
    # A test module is a specification, not a library: what several share sits in
    # tests/support/ or conftest.py, so that reading one test module is enough, and a
    # renamed test helper cannot break the fuzz seeds or a benchmark.
    test_modules = {path.stem for path in (ROOT / "tests").glob("test_*.py")}
    offenders = sorted(
        (str(path.relative_to(ROOT)), name)
        for folder in ("tests", "fuzz", "benchmarks")
        for path in (ROOT / folder).rglob("*.py")
        for name in imports_of_test_modules(ast.parse(path.read_text()), test_modules)
    )
    assert offenders == []
