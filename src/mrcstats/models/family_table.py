"""The families of :mod:`mrcstats.models.family` by name, link and response, and what each kind of fit supports;
without numpy.

What the command line offers before any model is fitted (``mrcstats glmer --family`` choices and help):
building the parser must not import numpy (``mrcstats --help`` starts in well under 0.2 s). The records
themselves, with their kernels, are :data:`mrcstats.models.family.FAMILIES`; tests/cli/test_startup.py
checks that this table names exactly those, with the same links and responses.

:data:`CAPABILITIES` is the one table of what a fit of each family (and the lmer and clmm fits) supports:
interval methods (``confint.Wald``, ``confint.profile``, ``confint.boot``, ``confint.satterthwaite``),
``simulate``, ``emmeans``, ``predict`` and the tests (``anova``: the likelihood-ratio test of two nested fits,
``drop1``, ``gvif``, ``anova.F``: lmerTest's F tests per term). Every public entry that takes a fit calls
:func:`require` first, and the model commands ask it from their options before reading any data, so a method a
family does not support is refused up front (:class:`~mrcstats.errors.InputError`, CLI exit 2) with a message
naming what to use instead -- never computed with another family's kernel (tests/test_layers.py checks the
entries).
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
                   "drop1", "gvif"})
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
}
_CLMM_INSTEAD = {"confint.Wald": "use the Wald table of summary() (estimate ± z SE from m.se)"}

#: kind ("binomial", "poisson", "gaussian", "betabinomial", "lmer", "clmm") -> what its fits support
CAPABILITIES: dict[str, Capabilities] = {
    "binomial": Capabilities("binomial", _GLMM),
    "poisson": Capabilities("poisson", _GLMM),
    "gaussian": Capabilities("gaussian", _LMER.supports, _LMER.instead),    # glmer(family="gaussian") is lmer
    "betabinomial": Capabilities("betabinomial", _GLMM - {"confint.profile"}, tuple(_BETABINOMIAL_INSTEAD.items())),
    "lmer": _LMER,
    "clmm": Capabilities("clmm", frozenset({"emmeans", "predict"}), tuple(_CLMM_INSTEAD.items())),
}


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
