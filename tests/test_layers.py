"""Data flows one way: modules never import a layer above them (checked on the source, no imports run)."""
from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "mrcstats"


def _imports(package: str) -> set[tuple[str, str]]:
    out = set()
    for p in (SRC / package).rglob("*.py"):
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.ImportFrom) and n.module:
                out.add((str(p.relative_to(SRC)), n.module))
            elif isinstance(n, ast.Import):
                out.update((str(p.relative_to(SRC)), a.name) for a in n.names)
    return out


def test_tasks_never_import_query():
    assert not [x for x in _imports("tasks") if x[1].startswith("mrcstats.query")]


def test_lower_layers_never_import_report():
    for pkg in ("io", "features", "models", "stats", "tasks", "query"):
        assert not [x for x in _imports(pkg) if x[1].startswith("mrcstats.report")], pkg
