"""mrcstats: item-level statistics for LLM evaluation logs.

Layers (data flows one way): ``io`` (readers, canonical log schema) ->
``features`` -> ``models`` (GLMM engine) -> ``stats`` -> ``report``; ``tasks``
and ``query`` produce new logs; ``cli`` is a thin shell over this API.

The public API is imported lazily (``mrcstats.glmer`` loads the GLMM engine on
first use) so that the command line starts fast.
"""
from __future__ import annotations

from mrcstats._lazy import lazy_exports

__version__ = "0.1.0"

# name -> module that defines it. Each area keeps its own block.
_API: dict[str, str] = {
    # io
    "read_log": "mrcstats.io",
    "validate_log": "mrcstats.io",
    "write_log": "mrcstats.io",
    "write_eee": "mrcstats.report.eee",
    "CANONICAL_COLUMNS": "mrcstats.io",
    # stats: accuracy
    "summarize": "mrcstats.stats.accuracy",
    # features
    "features": "mrcstats.features",
    # models
    "glmer": "mrcstats.models",
    "lmer": "mrcstats.models",
    "clmm": "mrcstats.models.clmm",
    "GlmerResult": "mrcstats.models",
    "anova": "mrcstats.models",
    "drop1": "mrcstats.models",
    "gvif": "mrcstats.models",
    # stats: contingency and discrimination
    "fisher": "mrcstats.stats.contingency",
    "chisq": "mrcstats.stats.contingency",
    "mcnemar": "mrcstats.stats.contingency",
    "discrimination": "mrcstats.stats.discrimination",
    "cluster_difficulty": "mrcstats.stats.discrimination",
    "wh_word_table": "mrcstats.stats.tables",
    "condition_outcome_table": "mrcstats.stats.tables",
    "confusion_table": "mrcstats.stats.tables",
    # stats: masking
    "masking_accuracy": "mrcstats.stats.masking",
    "masking_indicators": "mrcstats.stats.masking",
    "mskcal": "mrcstats.stats.mskcal",
    "mask_text": "mrcstats.tasks.masking",
    # query and ELAGENT tasks
    "run_query": "mrcstats.query",
    "QueryConfig": "mrcstats.query",
    "elagent_generate": "mrcstats.tasks.elagent",
    "elagent_verify": "mrcstats.tasks.elagent",
    "elagent_score": "mrcstats.tasks.elagent",
    # report
    "build_report": "mrcstats.report",
    # report: side-by-side model tables
    "table": "mrcstats.report.modeltable",
    "ModelTable": "mrcstats.report.modeltable",
    # stats: model comparison (issue 16)
    "compare": "mrcstats.stats.compare",
    "compare_scores": "mrcstats.stats.compare",
    "per_item_scores": "mrcstats.stats.compare",
    "p_adjust": "mrcstats.stats.multiplicity",
    "CompareResult": "mrcstats.stats.compare",
    "power": "mrcstats.stats.power",
    "PowerResult": "mrcstats.stats.power",
    # models: estimated marginal means (emmeans)
    "emmeans": "mrcstats.models.emmeans",
    "pairs": "mrcstats.models.emmeans",
    # models: confidence intervals (issue 17)
    "confint": "mrcstats.models.confint",
    "ConfintResult": "mrcstats.models.confint",
    # item response theory and evaluation subsets
    "irt": "mrcstats.stats.irt",
    "subset": "mrcstats.stats.subsets",
    "subset_eval": "mrcstats.stats.subsets",
    # scale: log datasets larger than memory (DuckDB), out-of-core GLMMs, Dask
    "open_log": "mrcstats.io",
    "open_dataset": "mrcstats.io",
    "write_dataset": "mrcstats.io",
    "glmer_outofcore": "mrcstats.models.outofcore",
    "leaderboard_log": "mrcstats.tasks.leaderboard",
    # stats: screening for broken items and DIF between model groups (issue 27)
    "screen": "mrcstats.stats.screen",
    "screen_validate": "mrcstats.stats.screen",
    "ScreenResult": "mrcstats.stats.screen",
    "dif": "mrcstats.stats.dif",
    "dif_validate": "mrcstats.stats.dif",
    "DifResult": "mrcstats.stats.dif",
    # stats: rank confidence sets, tie groups, top-k sets (issue 39)
    "ranks": "mrcstats.stats.ranks",
    "rank_sets": "mrcstats.stats.ranks",
    "RanksResult": "mrcstats.stats.ranks",
    # stats: variance components, signal-to-noise, rank stability (issue 39)
    "variance": "mrcstats.stats.variance",
    "VarianceResult": "mrcstats.stats.variance",
    "sensitivity": "mrcstats.stats.sensitivity",
    "SensitivityResult": "mrcstats.stats.sensitivity",
    # stats: inter-rater agreement (issue 38)
    "agreement": "mrcstats.stats.agreement",
    "AgreementResult": "mrcstats.stats.agreement",
    "judge": "mrcstats.stats.judge",
    "JudgeResult": "mrcstats.stats.judge",
    "JudgePanel": "mrcstats.stats.judge",
    "JudgeBias": "mrcstats.stats.judge",
    "read_inspect_raters": "mrcstats.io.inspect_raters",
}

__all__ = [*sorted(_API), "__version__"]  # noqa: PLE0604


__getattr__, __dir__ = lazy_exports(__name__, _API, globals())
