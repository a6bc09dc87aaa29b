"""mrcstats.report: publication tables, figures and PDF reports.

* :mod:`.analyses` — the analysis plug-ins (one module per spec ``type``, listed in :mod:`.analyses.registry`);
* :mod:`.tables` — the :class:`~.tables.Table` object (LaTeX booktabs, Markdown, CSV, HTML) and builders
  (lme4/compact regression tables, probability-at-σ, contingency, P_d cutoffs, accuracy mean ± SD,
  masking indicators);
* :mod:`.figures` — matplotlib vector figures in one colour-blind-safe style;
* :mod:`.pdf` — a PDF route with no TeX (reportlab + embedded vector figures), deterministic;
* :mod:`.spec` — the YAML report spec and its validation;
* :func:`build_report` — spec in, PDF + LaTeX tables out (:mod:`.build`, the orchestrator).
"""
from __future__ import annotations

from mrcstats._lazy import lazy_exports

__all__ = ["ReportDocument", "ReportResult", "Table", "build_report", "load_spec"]

_LAZY = {"build_report": "mrcstats.report.build", "ReportResult": "mrcstats.report.build",
         "load_spec": "mrcstats.report.spec", "Table": "mrcstats.report.tables",
         "ReportDocument": "mrcstats.report.pdf"}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
