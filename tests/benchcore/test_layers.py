"""The house's shape, checked: no import circle anywhere in the packages, and benchcore's layers
import only downwards (docs/ARCHITECTURE.md).

Every import counts, also those inside functions: a lazy import still ties two rooms together,
and a circle closed by one is a circle. The graph is read from the source with ast, so nothing
is imported and a broken module cannot hide an edge.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("benchcore", "frameworks", "opbench", "rnnbench")

#: benchcore's layers, bottom first; a module may import its own layer and those below it
LAYERS = (
    ("benchcore", "benchcore.errors"),
    ("benchcore.measure",),
    ("benchcore.report",),
    ("benchcore.suite",),
    ("benchcore.execute",),
    ("benchcore.compare",),
    ("benchcore.views",),
    ("benchcore.history",),
    ("benchcore.cli",),
)

Edge = Tuple[str, str, str]  # importer, imported, "path:line"


def modules() -> Dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _target(name: str, known: Dict[str, Path]) -> Optional[str]:
    """The known module an import of `name` loads: itself, or the nearest package above it."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str, path: Path, known: Dict[str, Path]) -> List[Edge]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    edges = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: List[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
        for name in names:
            target = _target(name, known)
            if target and target != module:
                edges.append((module, target, where))
    return edges


def graph() -> List[Edge]:
    known = modules()
    return [edge for module, path in known.items() for edge in imports(module, path, known)]


def layer(module: str) -> Optional[int]:
    """The rank of a benchcore module (None outside benchcore); the longest prefix decides."""
    best: Tuple[int, int] = (-1, -1)
    for rank, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best[1]:
                best = (rank, len(prefix))
    return best[0] if best[0] >= 0 else None


def cycles(edges: List[Edge]) -> List[List[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    successors: Dict[str, Set[str]] = {}
    for a, b, _ in edges:
        successors.setdefault(a, set()).add(b)
        successors.setdefault(b, set())
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(successors[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(successors):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_function_level_and_relative_imports():
    edges = {(a, b) for a, b, _ in graph()}
    assert ("benchcore.cli.commands", "benchcore.compare.verdicts") in edges  # inside judge()
    assert ("opbench.backends.mxnet.executor", "opbench.backends.mxnet.profiler") in edges
    assert ("benchcore.measure.case", "benchcore.measure.runner") not in edges


def test_no_import_circle():
    edges = graph()
    messages = []
    for component in cycles(edges):
        inside = [f"{a} -> {b} ({where})" for a, b, where in edges if a in component and b in component]
        messages.append("circle among " + ", ".join(component) + ":\n  " + "\n  ".join(inside))
    assert not messages, "\n".join(messages)


def test_cycle_finder_names_a_circle():
    assert cycles([("a", "b", "x"), ("b", "c", "y"), ("c", "a", "z"), ("c", "d", "w")]) == [["a", "b", "c"]]


def test_benchcore_imports_only_its_own_layer_and_those_below():
    upward = []
    for a, b, where in graph():
        if not a.startswith("benchcore"):
            continue
        if not b.startswith("benchcore"):
            upward.append(f"{a} -> {b} ({where}): benchcore imports no suite")
        elif layer(b) > layer(a):
            upward.append(f"{a} -> {b} ({where}): layer {LAYERS[layer(a)][0]} imports {LAYERS[layer(b)][0]}")
    assert not upward, "imports up a layer:\n" + "\n".join(upward)


def test_every_benchcore_module_has_a_layer():
    assert [m for m in modules() if m.startswith("benchcore") and layer(m) is None] == []
    assert layer("benchcore.execute.cluster.driver") > layer("benchcore.report.model") > layer("benchcore.measure.case")
