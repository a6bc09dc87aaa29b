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


# io -> backends -> models / stats -> report: the package layers, bottom first (issue 26)


def test_backends_sit_between_io_and_models_stats():
    """io never imports backends, models or stats; backends never import models, stats or anything above;
    no import (module level or inside a function) runs upward."""
    above_io = ("mrcstats.backends", "mrcstats.models", "mrcstats.stats", "mrcstats.report", "mrcstats.cli")
    assert not [x for x in _imports("io") if x[1].startswith(above_io)]
    above_backends = ("mrcstats.models", "mrcstats.stats", "mrcstats.report", "mrcstats.cli", "mrcstats.features",
                      "mrcstats.query", "mrcstats.tasks")
    assert not [x for x in _imports("backends") if x[1].startswith(above_backends)]


def test_stats_reach_datasets_through_backends_not_models():
    """An accuracy summary of a dataset goes stats -> backends -> io, never through models."""
    assert not [x for x in _imports("stats") if x[1].startswith("mrcstats.models.outofcore")]
    assert not (SRC / "stats" / "_sql.py").exists()


def test_models_reach_rows_through_backends():
    """The out-of-core fit reads rows only through a backend: no SQL or Dask code in models."""
    models = _imports("models")
    assert not [x for x in models if x[1].startswith(("mrcstats.backends.sql", "dask", "duckdb", "distributed"))]
