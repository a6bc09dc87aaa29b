"""The models package imports in one direction: no module imports one that (directly or not) imports it.

Every import counts, at module level or inside a function (a function-level import that dodges a
circle is still a circle); only ``if TYPE_CHECKING:`` blocks (annotations, never run) are left out.
Checked on the source with ``ast``; nothing is imported.
"""
from __future__ import annotations

import ast
from pathlib import Path

MODELS = Path(__file__).resolve().parents[2] / "src" / "mrcstats" / "models"


def _targets(node: ast.AST, names: set[str]) -> set[str]:
    out = set()
    if isinstance(node, ast.ImportFrom) and node.module:
        if node.module == "mrcstats.models":
            out.update(a.name for a in node.names if a.name in names)
        elif node.module.startswith("mrcstats.models."):
            out.add(node.module.split(".")[2])
    elif isinstance(node, ast.Import):
        out.update(a.name.split(".")[2] for a in node.names if a.name.startswith("mrcstats.models."))
    return out


def _type_checking(node: ast.AST) -> bool:
    t = node.test if isinstance(node, ast.If) else None
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def import_graph() -> dict[str, set[str]]:
    names = {p.stem for p in MODELS.glob("*.py")} - {"__init__"}
    graph = {}
    for name in names:
        deps: set[str] = set()
        stack = [ast.parse((MODELS / f"{name}.py").read_text())]
        while stack:
            node = stack.pop()
            if _type_checking(node):
                stack.extend(node.orelse)
                continue
            deps |= _targets(node, names)
            stack.extend(ast.iter_child_nodes(node))
        graph[name] = deps - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(u: str) -> list[str] | None:
        state[u] = 1
        path.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                return path[path.index(v):] + [v]
            if v not in state and (c := visit(v)):
                return c
        state[u] = 2
        path.pop()
        return None

    for u in sorted(graph):
        if u not in state and (c := visit(u)):
            return c
    return None


def test_models_package_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle in mrcstats.models: " + " -> ".join(cycle)


def test_cycle_finder_sees_function_level_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_layers_inside_models():
    """Kernels never import the fit or the results; confint/predict take a result, never import the fit;
    r_engine does not import the fit."""
    g = import_graph()
    for low in ("formula", "family", "design", "deviance", "optimize"):
        assert not g[low] & {"fit", "native", "results", "confint", "predict", "outofcore", "r_engine"}, low
    for mod in ("confint", "predict", "emmeans", "r_engine", "grid", "outofcore"):
        assert "fit" not in g[mod], mod
