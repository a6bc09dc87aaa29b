"""Every result record carries the family it was fitted with, set where it is built, never by a default.

GlmerResult, LmerResult, EmmeansResult and PairsResult used to default ``family`` (binomial, gaussian): a record
built without it claimed a family nobody asked for. The field is required now; a result pickled before the
field existed is read back with the one family such a record could have had, and says so in its messages/notes.
"""
from __future__ import annotations

import dataclasses
import inspect
import pickle

import numpy as np
import pandas as pd
import pytest

from mrcstats.models import glmer, lmer
from mrcstats.models.emmeans import EmmeansResult, PairsResult, emmeans, pairs
from mrcstats.models.lmm_results import LmerResult
from mrcstats.models.results import GlmerResult

RECORDS = (GlmerResult, LmerResult, EmmeansResult, PairsResult)


def _data(seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(10), 24)
    f = np.tile(["a", "b", "c"], 80)
    u = rng.normal(0, 0.5, 10)[g]
    eta = 0.3 + (f == "b") * 0.4 + u
    return pd.DataFrame({"g": [f"g{i}" for i in g], "f": f, "n": rng.poisson(np.exp(eta)),
                         "y": eta + rng.normal(0, 1, g.size)})


@pytest.fixture(scope="module")
def fits():
    d = _data()
    return {"poisson": glmer("n ~ f + (1 | g)", d, family="poisson"), "gaussian": lmer("y ~ f + (1 | g)", d)}


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_family_is_a_required_field(cls):
    fam = {f.name: f for f in dataclasses.fields(cls)}["family"]
    assert fam.default is dataclasses.MISSING and fam.default_factory is dataclasses.MISSING, \
        f"{cls.__name__}.family has a default: a record built without it would claim a family"


def test_from_estimates_asks_for_the_family():
    assert inspect.signature(GlmerResult.from_estimates).parameters["family"].default is inspect.Parameter.empty


def test_each_record_has_the_family_of_its_fit(fits):
    for name, m in fits.items():
        assert m.family.name == name and m.to_dict()["family"] == name
        em = emmeans(m, "f")
        pr = pairs(em)
        assert em.family is m.family and pr.family is m.family
        assert em.link == m.family.link


@pytest.mark.parametrize("which", ["poisson", "gaussian"])
def test_pickle_round_trip_keeps_the_family(fits, which):
    m = fits[which]
    back = pickle.loads(pickle.dumps(m))
    assert back.family.name == which and back.messages == m.messages
    if which == "poisson":      # (an lmer fit's means keep a closure for the contrasts' df: not picklable)
        em = emmeans(m, "f")
        em_back = pickle.loads(pickle.dumps(em))
        assert em_back.family.name == which and em_back.notes == em.notes


def _stored_without_family(obj):
    """``obj`` as pickle would restore a copy stored before the ``family`` field existed."""
    cls, args, state = obj.__reduce_ex__(2)[:3]
    state = {k: v for k, v in state.items() if k != "family"}
    old = cls(*args) if cls is not type(obj) else object.__new__(type(obj))
    old.__setstate__(state)
    return old


def test_a_stored_result_without_its_family_loads_with_a_note(fits):
    cases = [(fits["poisson"], "binomial", "messages"), (fits["gaussian"], "gaussian", "messages"),
             (emmeans(fits["poisson"], "f"), "binomial", "notes"),
             (pairs(emmeans(fits["poisson"], "f")), "binomial", "notes")]
    for obj, before, notes in cases:
        old = _stored_without_family(obj)
        assert old.family.name == before
        note = getattr(old, notes)[-1]
        assert "stored before" in note and before in note, note
        assert getattr(old, notes)[:-1] == getattr(obj, notes)
        old.summary()                     # usable
