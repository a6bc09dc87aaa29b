"""The families of :mod:`mrcstats.models.family` by name, link and response, what each kind of fit supports, and
how reports name its scales; without numpy.

What the command line offers before any model is fitted (``mrcstats glmer --family`` choices and help):
building the parser must not import numpy (``mrcstats --help`` starts in well under 0.2 s). The records
themselves, with their kernels, are :data:`mrcstats.models.family.FAMILIES`; tests/cli/test_startup.py
checks that this table names exactly those, with the same links and responses.

:data:`CAPABILITIES` is the one table of what a fit of each family (and the lmer and clmm fits) supports:
interval methods (``confint.Wald``, ``confint.profile``, ``confint.boot``, ``confint.satterthwaite``),
``simulate``, ``emmeans``, ``predict`` and the tests (``anova``: the likelihood-ratio test of two nested fits,
``drop1``, ``gvif``, ``anova.F``: lmerTest's F tests per term), and how a family is fitted (``fit.lme4``: R's
lme4 has the family, so ``engine="lme4"`` can fit it; ``fit.columns``: the native fit reads a pandas-free table;
``fit.outofcore``: a dataset folder is fitted from binomial counts collapsed out of core; ``fit.binary``: the
response of a log is its 0/1 ``correct``, so a graded log -- scores without correctness -- is refused). Every public entry that takes a fit calls
:func:`require` first, and the model commands ask it from their options before reading any data, so a method a
family does not support is refused up front (:class:`~mrcstats.errors.InputError`, CLI exit 2) with a message
naming what to use instead -- never computed with another family's kernel (tests/test_layers.py checks the
entries). A question about what a family can do is asked here and nowhere else: no code outside this module
compares a family's name (tests/test_layers.py).

:data:`LABELS` holds the presentation strings of each family (the names of its scales in emmeans' columns and
notes, the report's tables and sentences), apart from the numerical record: :func:`family_labels` of a family or
a fit.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mrcstats.errors import InputError

#: name -> (link, response the design reads), in the order of ``FAMILIES``
FAMILY_TABLE: dict[str, tuple[str, str]] = {
    "binomial": ("logit", "binomial"),
    "poisson": ("log", "count"),
    "gaussian": ("identity", "continuous"),
    "betabinomial": ("logit", "binomial"),
}


@dataclass(frozen=True)
class Capabilities:
    """What a fit of one kind supports (``supports``: capability names, see the module docstring) and, for what it
    does not, why and what to use instead (``instead``: (capability, advice) pairs; a capability without advice
    gets the list of the supported ones of its group)."""

    kind: str
    supports: frozenset[str]
    instead: tuple[tuple[str, str], ...] = ()

    def __contains__(self, what: object) -> bool:
        return what in self.supports

    def refusal(self, what: str) -> str:
        """The InputError message for ``what`` (which this kind does not support)."""
        advice = dict(self.instead).get(what)
        if advice is None:
            group = what.partition(".")[0]
            same = sorted(c.partition(".")[2] for c in self.supports if c.startswith(group + ".") and "." in c)
            advice = (f"use method {' or '.join(repr(s) for s in same)}" if same else
                      f"it supports {', '.join(sorted(self.supports))}")
        return f"{_label(what)} is not available for a {self.kind} fit: {advice}"


def _label(what: str) -> str:
    group, _, method = what.partition(".")
    return f"{group} method {method!r}" if group == "confint" and method else what


_GLMM = frozenset({"confint.Wald", "confint.profile", "confint.boot", "simulate", "emmeans", "predict", "anova",
                   "drop1", "gvif", "fit.columns", "fit.lme4"})
_LMER_INSTEAD = {
    "confint.boot": "the linear mixed model has no parametric bootstrap yet; use method 'profile', 'Wald' or "
                    "'satterthwaite'",
    "anova": "use the F tests per term (lmerTest's anova: LmerResult.anova(), mrcstats lmer --anova)",
    "drop1": "use the F tests per term (LmerResult.anova(), mrcstats lmer --anova)",
    "gvif": "compute it from the covariance: mrcstats.models.compare.gvif_from_vcov(m.vcov, m.info.assign, "
            "m.info.term_labels)",
}
_LMER = Capabilities("lmer", frozenset({"confint.Wald", "confint.profile", "confint.satterthwaite", "emmeans",
                                         "anova.F"}), tuple(_LMER_INSTEAD.items()))
_BETABINOMIAL_INSTEAD = {
    "confint.profile": "its likelihood profile through the Laplace engine (with the dispersion) is not implemented; "
                       "use method 'Wald' or 'boot' (a beta-binomial parametric bootstrap)",
    "fit.lme4": "lme4 has no such family (glmmTMB has); use engine='native'",
}
_GLMM_INSTEAD = {"fit.outofcore": "the out-of-core path (a dataset folder, backend duckdb/dask) fits binomial models; "
                                  "read the rows into a data frame for other families"}
_CLMM_INSTEAD = {"confint.Wald": "use the Wald table of summary() (estimate ± z SE from m.se)"}

#: kind ("binomial", "poisson", "gaussian", "betabinomial", "lmer", "clmm") -> what its fits support
CAPABILITIES: dict[str, Capabilities] = {
    "binomial": Capabilities("binomial", _GLMM | {"fit.outofcore", "fit.binary"}),
    "poisson": Capabilities("poisson", _GLMM, tuple(_GLMM_INSTEAD.items())),
    "gaussian": Capabilities("gaussian", _LMER.supports, _LMER.instead),    # glmer(family="gaussian") is lmer
    "betabinomial": Capabilities("betabinomial", _GLMM - {"confint.profile", "fit.lme4"},
                                 tuple({**_BETABINOMIAL_INSTEAD, **_GLMM_INSTEAD}.items())),
    "lmer": _LMER,
    "clmm": Capabilities("clmm", frozenset({"emmeans", "predict"}), tuple(_CLMM_INSTEAD.items())),
}


@dataclass(frozen=True)
class FamilyLabels:
    """How reports and emmeans name a family's scales (presentation only; the numbers are the
    :class:`~mrcstats.models.family.Family`'s)."""

    scale_name: str         # the report's name of the link scale: "logit scale", "log scale"
    contrast_scale: str     # emmeans' scale of differences of η: "log odds ratio", "log"
    response_col: str       # emmeans' response-scale column (R: prob, rate)
    ratio_col: str          # emmeans' back-transformed contrasts (R: odds.ratio, ratio)
    eta_desc: str           # tables: what η is ("log-odds", "log rate")
    ratio_desc: str         # tables: what exp(β) is ("Odds ratios", "Rate ratios")
    response_desc: str      # tables: what μ is ("probability of a correct answer", "expected count")
    response_plural: str    # ("probabilities", "expected counts")


_BINOMIAL_LABELS = FamilyLabels("logit scale", "log odds ratio", "prob", "odds.ratio", "log-odds", "Odds ratios",
                                "probability of a correct answer", "probabilities")
_GAUSSIAN_LABELS = FamilyLabels("response scale", "response", "response", "difference", "response", "Differences",
                                "mean response", "means")

#: family name -> its :class:`FamilyLabels` ("cumulative": the latent scale of a clmm's emmeans)
LABELS: dict[str, FamilyLabels] = {
    "binomial": _BINOMIAL_LABELS,
    "poisson": FamilyLabels("log scale", "log", "rate", "ratio", "log rate", "Rate ratios", "expected count",
                            "expected counts"),
    "gaussian": _GAUSSIAN_LABELS,
    "betabinomial": _BINOMIAL_LABELS,
    "cumulative": FamilyLabels(**{**_GAUSSIAN_LABELS.__dict__, "contrast_scale": "latent"}),
}


def family_labels(family: Any) -> FamilyLabels:
    """The :class:`FamilyLabels` of a family (a Family, its name, or a fit with a ``family``)."""
    fam = getattr(family, "family", family)
    name = fam if isinstance(fam, str) else getattr(fam, "name", None)
    lab = LABELS.get(name)  # type: ignore[arg-type]
    if lab is None:
        raise InputError(f"family {name!r} declares no labels (mrcstats.models.family_table.LABELS)")
    return lab


def supports(fit: Any, what: str) -> bool:
    """Whether a fit (or kind, or family) supports ``what``, for code that takes another path instead of
    refusing (:func:`require` refuses)."""
    return what in capabilities(fit)


def capabilities(fit: Any) -> Capabilities:
    """The :class:`Capabilities` of a fit (its ``capabilities`` attribute), a kind's name or a Capabilities."""
    if isinstance(fit, Capabilities):
        return fit
    if isinstance(fit, str):
        caps = CAPABILITIES.get(fit)
        if caps is None:
            raise InputError(f"no fits of kind {fit!r}; kinds: {', '.join(CAPABILITIES)}")
        return caps
    caps = getattr(fit, "capabilities", None)
    if caps is None and getattr(fit, "family", None) is not None:
        raise InputError(f"family {getattr(fit.family, 'name', fit.family)!r} declares no capabilities "
                         "(mrcstats.models.family_table.CAPABILITIES); nothing can be computed from its fits")
    if not isinstance(caps, Capabilities):
        raise InputError(f"expected a fitted model (mrcstats.glmer, lmer or clmm), got {type(fit).__name__}")
    return caps


def require(fit: Any, what: str) -> Capabilities:
    """Refuse ``what`` (a capability name, e.g. ``"confint.boot"``) up front unless the fit (or kind) supports it:
    an InputError naming the alternative. Returns the fit's Capabilities."""
    caps = capabilities(fit)
    if what not in caps:
        raise InputError(caps.refusal(what))
    return caps


#: a model command's option -> the capability it asks for (a function of the option's value)
OPTION_CAPABILITIES: dict[str, Any] = {
    "confint": lambda v: f"confint.{v}",
    "emmeans": lambda v: "emmeans",
    "drop1": lambda v: "drop1",
    "gvif": lambda v: "gvif",
    "compare": lambda v: "anova",
    "anova": lambda v: "anova.F",
}


def require_options(options: Any, kind: str) -> None:
    """:func:`require` of every capability a model command's parsed options ask for (:data:`OPTION_CAPABILITIES`;
    unset options ask for nothing), for fits of ``kind``."""
    for opt, cap in OPTION_CAPABILITIES.items():
        value = getattr(options, opt, None)
        if value:
            require(kind, cap(value))
