"""Every result and table shows itself in a terminal and a notebook through one implementation.

``mrcstats._repr.Result`` is the one home of ``__repr__`` and ``_repr_html_``; this test finds every
dataclass with ``to_frame()`` in the package (by reading the source, so optional modules need not import)
and checks it uses that implementation, then renders a few real results.
"""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from mrcstats._repr import MAX_LINES, Result, plain_repr

SRC = Path(__file__).resolve().parents[1] / "src" / "mrcstats"


def _result_classes() -> list[tuple[str, str]]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            is_dc = any("dataclass" in ast.unparse(d) for d in node.decorator_list)
            if is_dc and "to_frame" in methods:
                mod = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
                found.append((mod, node.name))
    return found


CLASSES = _result_classes()


def test_found_the_results():
    names = {c for _, c in CLASSES}
    assert {"GlmerResult", "FisherResult", "CompareResult", "Table", "ModelTable", "AccuracySummary"} <= names
    assert len(CLASSES) >= 35


@pytest.mark.parametrize("mod,name", CLASSES, ids=[c for _, c in CLASSES])
def test_every_result_uses_the_one_repr(mod, name):
    try:
        cls = getattr(importlib.import_module(mod), name)
    except ImportError as exc:  # an optional extra (stanza, rpy2) that is not installed
        pytest.skip(f"{mod} does not import here: {exc}")
    assert issubclass(cls, Result), f"{mod}.{name} must derive from mrcstats._repr.Result"
    assert cls.__repr__ is Result.__repr__, f"{mod}.{name}: declare @dataclass(..., repr=False)"
    assert cls._repr_html_ is Result._repr_html_
    assert callable(getattr(cls, "summary", None)), f"{mod}.{name} has no summary()"


def test_real_results_render(tmp_path):
    import mrcstats
    from mrcstats.tasks.simulate import simulate_log

    log = simulate_log(seed=1, n_passages=10, questions_per_passage=2, masking_rates=(0,),
                       conditions=("regular",), trials=1).log
    objs = [mrcstats.fisher([[11, 0], [8, 9]]), mrcstats.summarize(log, by=["model"]),
            mrcstats.glmer("correct ~ 1 + (1 | cluster)", log), mrcstats.compare(log)]
    objs.append(mrcstats.table([objs[2]]))
    for obj in objs:
        text = repr(obj)
        lines = text.splitlines()
        assert lines[0] == f"<{type(obj).__name__}>"
        assert len(lines) <= MAX_LINES + 2 and max(map(len, lines)) <= 120
        page = obj._repr_html_()
        assert page.startswith('<div class="mrcstats-result">') and "<table" in page and "<details>" in page
    # the numbers shown are the result's own (nothing recomputed): the Fisher p
    assert "0.00393" in objs[0]._repr_html_()


def test_repr_never_raises():
    class Broken(Result):
        def summary(self):
            raise ValueError("no")

        def to_frame(self):
            raise ValueError("no frame")

    b = Broken()
    assert "summary() failed: ValueError: no" in repr(b)
    assert "table unavailable" in b._repr_html_()
    assert plain_repr(b, width=60).startswith("<Broken>")
