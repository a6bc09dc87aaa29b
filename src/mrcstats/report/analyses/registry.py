"""The one list of analysis types a report spec can name: ``type`` -> plug-in class.

Adding an analysis type = one module in this package with an :class:`~.base.Analysis` subclass, one line here,
and its test. Plain imports only: a renamed module or class fails at import, never as a silent skip.
"""
from __future__ import annotations

from mrcstats.report.analyses.accuracy import Accuracy
from mrcstats.report.analyses.base import Analysis
from mrcstats.report.analyses.cat import Cat
from mrcstats.report.analyses.compare import Compare
from mrcstats.report.analyses.confusion import Confusion
from mrcstats.report.analyses.contingency import Contingency
from mrcstats.report.analyses.discrimination import Discrimination
from mrcstats.report.analyses.error_types import ErrorTypes
from mrcstats.report.analyses.glmm import Glmm
from mrcstats.report.analyses.irt import Irt, SubsetEval
from mrcstats.report.analyses.judge import Judge
from mrcstats.report.analyses.masking import Masking
from mrcstats.report.analyses.modeltable import ModelTableAnalysis
from mrcstats.report.analyses.probability import Probability
from mrcstats.report.analyses.ranks import Ranks
from mrcstats.report.analyses.screen import Dif, Screen
from mrcstats.report.analyses.summary import Summary
from mrcstats.report.analyses.wh_extremes import WhExtremes

ANALYSES: dict[str, type[Analysis]] = {cls.type: cls for cls in (
    Summary, Glmm, Contingency, Confusion, WhExtremes, ErrorTypes, Probability, Discrimination, Masking, Accuracy,
    # new analysis types: append here
    Compare,
    ModelTableAnalysis,
    Irt,
    SubsetEval,
    Screen, Dif,
    Judge,
    Ranks,
    Cat,
)}
