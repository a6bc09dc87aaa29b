"""The per-family capability table (mrcstats.models.family_table) is the one place every entry that takes a fit
asks: each is found here by enumeration (not a hand list) and must refuse a fit that supports nothing, with the
table's message; the model commands ask it from their options, found from the argparse parsers, before any data
is read."""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import types

import pytest

import mrcstats.models as models_pkg
from mrcstats.errors import InputError
from mrcstats.models.family_table import CAPABILITIES, OPTION_CAPABILITIES, Capabilities, require

NOTHING = Capabilities("nothing-supported", frozenset())
#: every capability group the table knows (confint, simulate, emmeans, predict, anova, drop1, gvif)
GROUPS = sorted({c.partition(".")[0] for caps in CAPABILITIES.values() for c in [*caps.supports,
                                                                                  *dict(caps.instead)]})


class _Fit:
    """A fit that supports nothing: any entry must stop at require() before touching anything else."""

    capabilities = NOTHING

    def __getattr__(self, name):
        raise AssertionError(f"an entry read .{name} of the fit before asking its capabilities")


def _entries():
    """(label, callable(fit)) for every public function of mrcstats.models whose first parameter is the fitted
    model (``m``/``m0``, the package's convention) and every method named after a capability group on every class
    with a ``capabilities`` attribute."""
    out = []
    for info in pkgutil.iter_modules(models_pkg.__path__):
        mod = importlib.import_module(f"mrcstats.models.{info.name}")
        for name, obj in vars(mod).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != mod.__name__:
                continue
            if inspect.isfunction(obj):
                params = list(inspect.signature(obj).parameters.values())
                if params and params[0].name in ("m", "m0"):
                    req = [p for p in params if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
                    out.append((f"{info.name}.{name}", obj, len(req)))
            elif inspect.isclass(obj) and "capabilities" in vars(obj):
                for g in GROUPS:
                    meth = vars(obj).get(g)
                    if isinstance(meth, types.FunctionType):
                        req = [p for p in inspect.signature(meth).parameters.values()
                               if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
                        out.append((f"{info.name}.{name}.{g}", meth, len(req)))
    return out


ENTRIES = _entries()


def test_the_enumeration_finds_the_entries():
    found = {label for label, _, _ in ENTRIES}
    for must in ("confint.confint", "simulate.simulate", "emmeans.emmeans", "compare.drop1", "compare.anova",
                 "compare.gvif", "predict.predict", "results.GlmerResult.confint", "lmm_results.LmerResult.confint",
                 "lmm_results.LmerResult.anova", "lmm_tests.contest", "clmm.ClmmResult.emmeans"):
        assert must in found, must


@pytest.mark.parametrize("label,entry,nreq", ENTRIES, ids=[e[0] for e in ENTRIES])
def test_every_entry_that_takes_a_fit_asks_the_table_first(label, entry, nreq):
    fit = _Fit()
    args = [fit] * max(nreq, 1)
    if nreq >= 2 and not label.endswith("anova"):       # (m, specs) and the like: the fit first, then a value
        args = [fit] + ["LLM"] * (nreq - 1)
    with pytest.raises(InputError, match="is not available for a nothing-supported fit"):
        entry(*args)


def test_require_names_the_alternative():
    with pytest.raises(InputError, match="'Wald' or 'boot'"):
        require("betabinomial", "confint.profile")
    with pytest.raises(InputError, match="method 'Wald' or 'profile' or 'satterthwaite'|'profile', 'Wald'"):
        require("lmer", "confint.boot")
    assert "confint.boot" in require("betabinomial", "simulate")
    for kind in ("binomial", "poisson"):
        for what in ("confint.Wald", "confint.profile", "confint.boot", "simulate", "emmeans", "drop1", "anova"):
            require(kind, what)


def test_families_carry_their_row_of_the_table():
    from mrcstats.models.family import FAMILIES

    for name, fam in FAMILIES.items():
        assert fam.capabilities is CAPABILITIES[name]


def _parsers():
    from mrcstats.cli import build_parser

    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, __import__("argparse")._SubParsersAction)).choices
    for cmd, p in subs.items():
        opts = {a.dest: a for a in p._actions if a.dest in OPTION_CAPABILITIES}
        if opts:
            yield cmd, p, opts


def _cases():
    out = []
    for cmd, p, opts in _parsers():
        fam = next((a for a in p._actions if a.dest == "family"), None)
        kinds = list(fam.choices) if fam is not None else [cmd]
        assert all(k in CAPABILITIES for k in kinds), (cmd, kinds)
        for dest, act in opts.items():
            flag = act.option_strings[0]
            values = list(act.choices) if act.choices else [None]
            for kind in kinds:
                for v in values:
                    out.append((cmd, kind, fam is not None, dest, flag, v, act.nargs == 0))
    return out


@pytest.mark.parametrize("cmd,kind,has_family,dest,flag,value,is_flag", _cases())
def test_model_commands_refuse_what_the_kind_cannot_do_before_reading_data(cmd, kind, has_family, dest, flag,
                                                                            value, is_flag, tmp_path, capsys):
    from mrcstats.cli import main

    argv = [cmd, str(tmp_path / "missing.csv"), "--formula", "y ~ LLM + (1 | item)"]
    if has_family:
        argv += ["--family", kind]
    argv += [flag] if is_flag else [flag, value if value is not None else {"emmeans": "LLM"}.get(dest, "y ~ 1 + (1 | item)")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    cap = OPTION_CAPABILITIES[dest](value if value is not None else True)
    refused = "is not available for a" in err
    assert refused == (cap not in CAPABILITIES[kind]), (argv, err)
