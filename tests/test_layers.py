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


def test_dataset_writing_reading_and_opening_have_no_circle():
    """ingest (writing datasets) -> reader (read_log, open_log) -> dataset (opening/scanning): one way only."""
    io = _imports("io")
    order = ["mrcstats.io.ingest", "mrcstats.io.reader", "mrcstats.io.dataset"]
    for i, mod in enumerate(order):
        path = mod.removeprefix("mrcstats.").replace(".", "/") + ".py"
        above = order[:i]
        assert not [m for f, m in io if f == path and m in above], (mod, above)
    # and nothing below ingest imports it (the CLI and tasks may)
    assert not [x for x in io if x[1] == "mrcstats.io.ingest" and x[0] != "io/__init__.py"]
