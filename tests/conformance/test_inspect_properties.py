"""Property tests for the Inspect reader and the headline (hypothesis).

* any corruption of a real ``.eval`` archive (bytes flipped, cut short) either still reads or raises one
  :class:`InputError` naming the file — never another exception;
* with the mean reducer and m epochs of every sample, Inspect's headline is the trial-level accuracy and its
  stderr is the clustered SE (Miller 2024, one cluster per sample) times sqrt(n / (n - 1));
* ``pass_at_k`` is Chen et al.'s 1 - C(m - c, k) / C(m, k); ``at_least_k`` is the indicator c >= k.
"""
from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.io.inspect_ai import read_inspect
from mrcstats.io.schema import validate_log
from mrcstats.io.source import Source
from mrcstats.stats.accuracy import summarize
from mrcstats.stats.headline import inspect_headline, reduce_epochs

EVAL = Path(__file__).resolve().parent / "inspect" / "epochs_mean.eval"
DATA = EVAL.read_bytes()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flips=st.lists(st.tuples(st.integers(0, len(DATA) - 1), st.integers(1, 255)), min_size=1, max_size=6),
       cut=st.one_of(st.none(), st.integers(4, len(DATA) - 1)))
def test_corrupt_archive_reads_or_one_input_error(flips, cut):
    data = bytearray(DATA)
    for pos, x in flips:
        data[pos] ^= x
    if cut is not None:
        data = data[:cut]
    src = Source(Path("corrupt.eval"), bytes(data), binary=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            read_inspect(src)
        except InputError as exc:
            assert "corrupt.eval" in str(exc) and "\n" not in str(exc)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 12).flatmap(lambda n: st.tuples(
    st.just(n), st.integers(1, 4).flatmap(lambda m: st.lists(st.lists(st.booleans(), min_size=m, max_size=m),
                                                             min_size=n, max_size=n)))))
def test_mean_headline_is_trial_level_with_finite_cluster_correction(case):
    n, grid = case
    m = len(grid[0])
    rows = [{"model": "m", "item": f"t:{s}", "trial": e, "correct": grid[s][e], "score": float(grid[s][e]),
             "value": "C" if grid[s][e] else "I", "reducer": "mean", "task": "t", "scorer": "match"}
            for s in range(n) for e in range(m)]
    log = validate_log(pd.DataFrame(rows))
    head = inspect_headline(log).to_frame().iloc[0]
    trial = summarize(log).to_frame().iloc[0]
    assert head["value"] == trial["accuracy"] or math.isclose(head["value"], trial["accuracy"], abs_tol=1e-12)
    assert math.isclose(head["stderr"], trial["se_cluster"], abs_tol=1e-12)
    r = np.array(grid, dtype=float).mean(axis=1)
    assert math.isclose(head["stderr"], r.std(ddof=1) / math.sqrt(n), abs_tol=1e-12)


@given(st.lists(st.booleans(), min_size=1, max_size=8), st.integers(1, 8))
def test_pass_at_k_and_at_least_k(values, k):
    m, c = len(values), sum(values)
    floats = [float(v) for v in values]
    got = reduce_epochs(f"pass_at_{k}", floats)
    if m < k:
        assert math.isnan(got)
    else:
        assert math.isclose(got, 1 - math.comb(m - c, k) / math.comb(m, k), abs_tol=1e-12)
    assert reduce_epochs(f"at_least_{k}", floats) == float(c >= k)


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=4),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                     max_leaves=8)
_KEYS = ("eval", "status", "samples")
_SAMPLE_KEYS = ("id", "epoch", "scores", "error", "output", "target", "input", "invalidation")


@settings(max_examples=50, deadline=None)
@given(top=st.dictionaries(st.sampled_from(_KEYS), _JSON, max_size=3),
       samples=st.lists(st.dictionaries(st.sampled_from(_SAMPLE_KEYS), _JSON, max_size=6), max_size=3))
def test_any_json_log_shape_reads_or_one_input_error(top, samples):
    import json

    obj = {"eval": {"task": "t", "model": "m"}, **top, "samples": samples}
    src = Source(Path("shape.json"), json.dumps(obj).encode())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            read_inspect(src)
        except InputError as exc:
            assert "shape.json" in str(exc)
