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
    """ingest_log (one log file), ingest (writing datasets) -> reader (read_log, open_log) -> dataset
    (opening/scanning): one way only; the two writers are siblings (neither imports the other)."""
    io = _imports("io")
    order = ["mrcstats.io.ingest_log", "mrcstats.io.ingest", "mrcstats.io.reader", "mrcstats.io.dataset"]
    for i, mod in enumerate(order):
        path = mod.removeprefix("mrcstats.").replace(".", "/") + ".py"
        above = order[:i]
        assert not [m for f, m in io if f == path and m in above], (mod, above)
    # and nothing below ingest imports it (the CLI and tasks may)
    assert not [x for x in io if x[1] == "mrcstats.io.ingest" and x[0] != "io/__init__.py"]
    assert not [x for x in io if x[1] == "mrcstats.io.ingest_log"]


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


# no import circle among the io modules (issue 37)


def _module_name(p: Path) -> str:
    parts = list(p.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph(package: str) -> dict[str, set[str]]:
    """``module -> modules of ``package`` it imports``, read from the source (no import runs): every ``import`` and
    ``from ... import`` anywhere in the file -- at module level, inside functions, under ``TYPE_CHECKING`` --
    counts, because a function-level import is a circle deferred to run time, not removed; relative imports are
    resolved. ``from pkg import name`` counts ``pkg.name`` when that is a module, else ``pkg`` itself. Not counted:
    the parent package's ``__init__`` that Python runs before any submodule (every module would then sit in a
    circle with it; the package ``__init__`` files are checked as modules like the others)."""
    files = {_module_name(p): p for p in (SRC / package).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for mod, p in files.items():
        here = mod if p.name == "__init__.py" else mod.rsplit(".", 1)[0]
        deps: set[str] = set()
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.ImportFrom):
                if n.level:
                    base = here.split(".")[: len(here.split(".")) - n.level + 1]
                    target = ".".join([*base, *([n.module] if n.module else [])])
                else:
                    target = n.module or ""
                for a in n.names:
                    deps.add(f"{target}.{a.name}" if f"{target}.{a.name}" in files else target)
            elif isinstance(n, ast.Import):
                deps.update(a.name for a in n.names)
        graph[mod] = {d for d in deps if d in files and d != mod}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_io_modules_import_no_circle():
    """No import circle among the io modules, function-level imports included: the readers sit below the format
    registry (which imports them lazily to read a file) and the registry below detection and the openers."""
    graph = _import_graph("io")
    assert len(graph) > 20 and "mrcstats.io.source" in graph["mrcstats.io.helm"]
    assert not _cycles(graph), _cycles(graph)


def test_the_cycle_check_sees_a_circle():
    """The check itself: a two-module circle through a function-level import is found."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# the kind of log (an in-memory frame, the pandas-free Columns, a dataset folder) is decided in io / backends


#: the classes of the log's kinds: a statistic or model that tests for one decides what io / backends decide
LOG_KINDS = ("LogDataset", "Columns")
#: sites not yet routed through the row passes, each to be removed, never added to (issue 37); none left
#: (stats/variance.py's dataset branch is ``dataset_pass(log).to_frame()``)
KIND_TESTS_LEFT: dict[str, int] = {}


def _kind_tests(p: Path) -> int:
    """``isinstance(x, LogDataset | Columns | (.., Columns))`` and ``type(x).__name__ == "LogDataset"`` in a file."""
    n = 0
    for node in ast.walk(ast.parse(p.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance" \
                and len(node.args) == 2:
            names = {x.id if isinstance(x, ast.Name) else x.attr for x in ast.walk(node.args[1])
                     if isinstance(x, (ast.Name, ast.Attribute))}
            n += bool(names & set(LOG_KINDS))
        elif isinstance(node, ast.Compare) and any(isinstance(c, ast.Constant) and c.value in LOG_KINDS
                                                   for c in node.comparators):
            n += 1
    return n


def test_no_isinstance_of_the_log_kind_outside_io_and_backends():
    """Statistics and models take what io opens through the backends' row passes
    (:func:`mrcstats.backends.dataset_pass`, :func:`mrcstats.backends.pass_backend`): no test of the log's kind."""
    found = {}
    for p in SRC.rglob("*.py"):
        rel = str(p.relative_to(SRC))
        if rel.startswith(("io/", "backends/")):
            continue
        if n := _kind_tests(p):
            found[rel] = n
    over = {f: n for f, n in found.items() if n > KIND_TESTS_LEFT.get(f, 0)}
    assert not over, f"a test of the log's kind outside io/backends (route it through the row passes): {over}"


def test_the_kind_check_sees_one(tmp_path):
    p = tmp_path / "x.py"
    p.write_text("def f(log):\n    if isinstance(log, (pd.DataFrame, io.LogDataset)):\n        pass\n"
                 "    return type(log).__name__ == 'Columns'\n")
    assert _kind_tests(p) == 2


# a family is asked, never named: what it can do is the capability table's (models/family_table.py), and it
# travels on the model spec, not beside it (issue 37)

def _table_keys(*tables: str) -> tuple[str, ...]:
    """The string keys of the dict literals assigned to ``tables`` in models/family_table.py (from the source)."""
    keys: list[str] = []
    for node in ast.parse((SRC / "models" / "family_table.py").read_text()).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in tables \
                and isinstance(node.value, ast.Dict):
            keys += [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
    return tuple(dict.fromkeys(keys))


#: the families by name: the keys of the table's FAMILY_TABLE and LABELS ("cumulative": the clmm's latent scale)
FAMILY_NAMES = _table_keys("FAMILY_TABLE", "LABELS")
#: where a family's name may be compared: its record, the table, and the front door reading R's spelling
FAMILY_HOMES = ("models/family.py", "models/family_table.py")
#: the functions that take a family: the front door (R's glmer(family =)), the spec's own setter, the registry's
#: reader, the table's questions, and the two records of what was built from a spec (the kernels' rows, the result)
FAMILY_PARAMETER_OK = {("models/fit.py", "glmer"), ("models/formula.py", "with_family"),
                       ("models/family.py", "get_family"), ("models/family_table.py", "family_labels"),
                       ("models/deviance.py", "__init__"), ("models/results.py", "from_estimates")}


def _family_name_tests(p: Path) -> int:
    """Comparisons (``==``, ``!=``, ``in``) with a family's name as a string literal (alone or in a literal
    tuple/list/set)."""
    n = 0
    for node in ast.walk(ast.parse(p.read_text())):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        lits = [c for s in sides for c in ([s] if isinstance(s, ast.Constant) else
                                           s.elts if isinstance(s, (ast.Tuple, ast.List, ast.Set)) else [])]
        n += any(isinstance(c, ast.Constant) and c.value in FAMILY_NAMES for c in lits)
    return n


def _family_parameters(p: Path) -> list[str]:
    """Functions with a parameter named ``family``."""
    out = []
    for node in ast.walk(ast.parse(p.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            if any(x.arg == "family" for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]):
                out.append(node.name)
    return out


def test_no_family_name_comparisons_outside_the_table():
    """Whether a family supports an interval method, a simulation, emmeans, the lme4 engine, a pandas-free table
    or the out-of-core fit is asked of :data:`mrcstats.models.family_table.CAPABILITIES` (``require`` /
    ``supports``), and how it is named in a report of ``LABELS``: no ``family.name == "binomial"`` elsewhere."""
    found = {}
    for p in SRC.rglob("*.py"):
        rel = str(p.relative_to(SRC))
        if rel not in FAMILY_HOMES and (n := _family_name_tests(p)):
            found[rel] = n
    assert not found, f"a family's name compared outside the capability table (ask family_table): {found}"


def test_the_family_travels_only_on_the_spec():
    """No function takes a ``family`` beside the model it fits (the design, the engines, the refits read
    ``spec.family``), apart from the front door and the table's own questions."""
    found = [(rel, f) for p in SRC.rglob("*.py") for rel in [str(p.relative_to(SRC))]
             for f in _family_parameters(p) if (rel, f) not in FAMILY_PARAMETER_OK]
    assert not found, f"a family= parameter beside the spec (give the spec its family, spec.with_family): {found}"


def test_the_family_checks_see_them(tmp_path):
    assert {"binomial", "poisson", "gaussian", "betabinomial", "cumulative"} <= set(FAMILY_NAMES)
    p = tmp_path / "x.py"
    p.write_text("def f(m, family=None):\n    if m.family.name == 'binomial' or fam in ('poisson', 'x'):\n"
                 "        pass\n    return 'gaussian' != args.family\n")
    assert _family_name_tests(p) == 3 and _family_parameters(p) == ["f"]
# no module imports another module's private name (issue 37): a helper two modules need gets a public name in
# the module that owns it

#: (importing module, owner module, name) imports allowed, with the reason
PRIVATE_IMPORTS_ALLOWED: set[tuple[str, str, str]] = set()


def _private_imports() -> set[tuple[str, str, str]]:
    """(file, module, name) of every ``from mrcstats.X import _name`` (function-level included) where ``_name``
    is not a module of its own (``from mrcstats.report.analyses import _tests`` imports a module)."""
    out = set()
    for p in SRC.rglob("*.py"):
        rel = str(p.relative_to(SRC))
        own = "mrcstats." + rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        for n in ast.walk(ast.parse(p.read_text())):
            if not (isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("mrcstats")):
                continue
            for a in n.names:
                if not a.name.startswith("_") or a.name.startswith("__") or n.module == own:
                    continue
                base = SRC.parent / n.module.replace(".", "/") / a.name
                if base.with_suffix(".py").exists() or (base / "__init__.py").exists():
                    continue
                out.add((rel, n.module, a.name))
    return out


def test_no_private_name_is_imported_from_another_module():
    found = _private_imports()
    assert not found - PRIVATE_IMPORTS_ALLOWED, sorted(found - PRIVATE_IMPORTS_ALLOWED)
    assert not PRIVATE_IMPORTS_ALLOWED - found, ("allowed but gone: drop from the list",
                                                 sorted(PRIVATE_IMPORTS_ALLOWED - found))


def test_the_private_import_check_sees_one(tmp_path, monkeypatch):
    """The check itself: a private name imported from another module is found, a private module is not."""
    pkg = tmp_path / "mrcstats"
    (pkg / "a").mkdir(parents=True)
    (pkg / "a" / "__init__.py").write_text("")
    (pkg / "a" / "_mod.py").write_text("def _helper(): pass\n")
    (pkg / "b.py").write_text("def f():\n    from mrcstats.a._mod import _helper\n    from mrcstats.a import _mod\n")
    import sys

    monkeypatch.setattr(sys.modules[__name__], "SRC", pkg)
    assert _private_imports() == {("b.py", "mrcstats.a._mod", "_helper")}
