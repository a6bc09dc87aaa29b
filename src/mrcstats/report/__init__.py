"""mrcstats.report: publication tables, figures and PDF reports.

* :mod:`.tables` — the :class:`~.tables.Table` object (LaTeX booktabs, Markdown, CSV, HTML) and builders
  (lme4/compact regression tables, probability-at-σ, contingency, P_d cutoffs, accuracy mean ± SD,
  masking indicators);
* :mod:`.figures` — matplotlib vector figures in one greyscale-readable style;
* :mod:`.pdf` — a PDF route with no TeX (reportlab + embedded vector figures), deterministic;
* :mod:`.spec` — the YAML report spec and its validation;
* :func:`build_report` — spec in, PDF + LaTeX tables out (:mod:`.build`).
"""
from __future__ import annotations

from typing import Any

__all__ = ["ReportDocument", "ReportResult", "Table", "build_report", "load_spec"]

_LAZY = {"build_report": "mrcstats.report.build", "ReportResult": "mrcstats.report.build",
         "load_spec": "mrcstats.report.spec", "Table": "mrcstats.report.tables",
         "ReportDocument": "mrcstats.report.pdf"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mrcstats.report' has no attribute {name!r}")
