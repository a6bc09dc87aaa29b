"""Number formatting (mrcstats.report.format): examples from the issue and property tests."""
from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrcstats.errors import InputError
from mrcstats.report.format import (
    KINDS,
    MISSING,
    format_ci,
    format_num,
    format_p,
    format_stat,
    parse_formatted,
)

ZEROS = re.compile(r"(?<![\d.])[−-]?0\.0000")   # a string of zeros as a printed number


def _clean(s: str) -> None:
    assert "nan" not in s.lower()
    assert "inf" not in s.lower()
    assert not ZEROS.search(s), s
    assert not re.search(r"p = [−-]?0(?![.\d])", s), s


# --------------------------------------------------------------------------- examples


@pytest.mark.parametrize("p, text", [
    (0.0, "< 2.2e-16"), (1e-300, "< 2.2e-16"), (0.000999, "0.000999"), (0.001, "0.001"), (0.0421, "0.0421"),
    (0.05, "0.05"), (0.5, "0.5"), (0.9994, "0.9994"), (0.99996, "1"), (1.0, "1"), (3.2e-7, "3.2e-07"),
    (None, MISSING), (float("nan"), MISSING), (pd.NA, MISSING), (np.float64(0.2), "0.2"),
])
def test_format_p_is_r_format_pval(p, text):
    assert format_p(p) == text


def test_format_p_monte_carlo():
    assert format_p(1 / 2001, mc_b=2000) == "≤ 0.0004998 (MC, B = 2000)"
    assert format_p(0.048, mc_b=2000) == "0.048 (MC SE 0.0048, B = 2000)"
    assert format_p(0.048, mc_b=2000, mc_se=0.0047) == "0.048 (MC SE 0.0047, B = 2000)"
    assert format_p(1 / 100, mc_b=99) == "≤ 0.01 (MC, B = 99)"
    assert format_p(0.02, mc_b=100000) == "0.02 (MC SE 0.00044, B = 100,000)"
    assert format_p(0.0004, mc_b=100000) == "4e-04 (MC SE 6.3e-05, B = 100,000)"
    assert format_p(None, mc_b=2000) == MISSING
    assert format_p(np.float64(0.048), mc_b=np.int64(2000)) == "0.048 (MC SE 0.0048, B = 2000)"


@pytest.mark.parametrize("kw, match", [
    ({"p": 1.5}, "lie in"), ({"p": -0.1}, "lie in"), ({"p": "x"}, "expected a number"),
    ({"p": 0.1, "mc_se": 0.01}, "needs mc_b"), ({"p": 0.1, "mc_b": 0}, "positive whole"),
    ({"p": 0.1, "mc_b": 2.5}, "positive whole"),
])
def test_format_p_rejects(kw, match):
    p = kw.pop("p")
    with pytest.raises(InputError, match=match):
        format_p(p, **kw)


@pytest.mark.parametrize("x, kind, text", [
    (0.05213, "difference", "0.052"), (-0.05213, "difference", "−0.052"),
    (5.21e-17, "variance", "5.21e-17"), (0.0002, "accuracy", "< 0.001"), (0.9999, "accuracy", "> 0.999"),
    (1.0, "accuracy", "1.000"), (0.0, "accuracy", "0"), (1045, "count", "1,045"), (910.0, "count", "910"),
    (12.5, "count", "12.50"), (3, "df", "3"), (18.43, "df", "18.43"), (17.5, "percent", "17.5"),
    (0.03, "percent", "< 0.1"), (-2.1, "statistic", "−2.10"), (1.847, "odds_ratio", "1.85"),
    (10746.31, "ic", "10746.3"), (-0.0001, "estimate", "−1.00e-04"), (1e15, "estimate", "1.00e+15"),
    (float("inf"), "estimate", "∞"), (float("-inf"), "statistic", "−∞"), (None, "se", MISSING),
    (0.21, "cramers_v", "0.210"),
])
def test_format_num_examples(x, kind, text):
    assert format_num(x, kind) == text


def test_format_num_rejects_unknown_kind_and_non_numbers():
    with pytest.raises(InputError, match="unknown kind"):
        format_num(1.0, "money")
    with pytest.raises(InputError, match="expected a number"):
        format_num("abc", "estimate")
    with pytest.raises(InputError, match="boolean"):
        format_num(True, "count")


def test_format_stat_and_ci():
    assert format_stat("chi2", 5.311, 2) == "χ²(2) = 5.31"
    assert format_stat("chisq", 5.311, 2, n=120) == "χ²(2, N = 120) = 5.31"
    assert format_stat("z", 2.1) == "z = 2.10"
    assert format_stat("t", -2.1, 18.43) == "t(18.43) = −2.10"
    assert format_stat("F", 4.2, (1, 20)) == "F(1, 20) = 4.20"
    assert format_stat("F", np.float64(4.2), np.array([1, 20])) == "F(1, 20) = 4.20"
    assert format_stat("chi2", 5.311, np.int64(2)) == "χ²(2) = 5.31"
    assert format_stat("G2", 3.0, 1) == "G²(1) = 3.00"
    assert format_ci(0.052, 0.011, 0.093, "difference") == "0.052 [0.011, 0.093]"
    assert format_ci(1.847, 1.2, 2.85, "odds_ratio") == "1.85 [1.20, 2.85]"
    assert format_ci(0.2134, 0.105, 0.3201, "cramers_v") == "0.213 [0.105, 0.320]"
    assert format_ci(0.5, None, None, "proportion") == "0.500"
    assert format_ci(0.5, None, 0.7, "proportion") == f"0.500 [{MISSING}, 0.700]"
    with pytest.raises(InputError, match="needs a name"):
        format_stat("", 1.0)


# --------------------------------------------------------------------------- properties

finite = st.floats(min_value=-1e300, max_value=1e300)   # 1.8e308 would read back as inf
anything = st.one_of(finite, st.just(float("nan")), st.just(float("inf")), st.just(float("-inf")), st.none(),
                     st.floats(min_value=-1e-12, max_value=1e-12), st.integers(-10**12, 10**12))


def _check_roundtrip(x: float, s: str, kind: str) -> None:
    rule = KINDS[kind]
    v = parse_formatted(s)
    if math.isinf(x):
        assert v == x
        return
    if s.startswith("< "):
        assert x < v
        return
    if s.startswith("> "):
        assert x > v
        return
    if "e" in s:   # scientific: relative error within half a unit of the last mantissa digit
        assert math.isclose(v, x, rel_tol=0.5 * 10 ** -(rule.sig - 1) + 1e-12)
        return
    dec = len(s.split(".")[1]) if "." in s else 0
    assert abs(v - x) <= 0.5 * 10 ** -dec * (1 + 1e-9) + 4 * math.ulp(x), (x, s)


@settings(max_examples=300, deadline=None)
@given(x=anything, kind=st.sampled_from(sorted(KINDS)))
def test_format_num_never_prints_zeros_or_nan_and_reads_back(x, kind):
    s = format_num(x, kind)
    _clean(s)
    if x is None or (isinstance(x, float) and math.isnan(x)):
        assert s == MISSING
        return
    if math.isinf(float(x)):
        assert parse_formatted(s) == float(x)
        return
    if float(x) != 0:
        assert s != "0"
    _check_roundtrip(float(x), s, kind)


@settings(max_examples=300, deadline=None)
@given(p=st.one_of(st.floats(0, 1), st.just(0.0), st.just(1.0), st.floats(0, 1e-3)),
       b=st.one_of(st.none(), st.integers(1, 10**6)))
def test_format_p_never_prints_zero_and_reads_back(p, b):
    s = format_p(p, mc_b=b)
    _clean(s)
    assert s != "0"
    v = parse_formatted(s)
    head = s.split(" (")[0]
    if head.startswith("< "):
        assert p < v
    elif head.startswith("≤ "):
        assert p <= v
    elif head.startswith("> "):
        assert p > v
    else:
        assert v == pytest.approx(p, rel=1e-3)
    if b is not None:
        assert f"B = {b:,}" in s or f"B = {b}" in s


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(["chi2", "z", "t", "F", "G2"]), value=anything,
       df=st.one_of(st.none(), st.integers(1, 10**6), st.floats(0.5, 1e4)))
def test_format_stat_is_clean(name, value, df):
    s = format_stat(name, value, df)
    _clean(s)
    assert " = " in s
    if value is not None and not (isinstance(value, float) and math.isnan(value)):
        _check_roundtrip(float(value), s.rsplit(" = ", 1)[1], "statistic")


@settings(max_examples=200, deadline=None)
@given(est=finite, lo=finite, hi=finite, kind=st.sampled_from(["difference", "odds_ratio", "cramers_v",
                                                                "estimate", "proportion"]))
def test_format_ci_is_clean(est, lo, hi, kind):
    s = format_ci(est, lo, hi, kind)
    _clean(s)
    assert re.fullmatch(r".+ \[.+, .+\]", s)
    _check_roundtrip(est, s.split(" [")[0], kind)


def test_one_definition_of_missing():
    """report.format.is_missing is the tables' rule too: None, pd.NA, NaT, a NaN (numbers, or text reading as one)."""
    from decimal import Decimal

    import numpy as np
    import pandas as pd

    from mrcstats.report import format as fmt
    from mrcstats.report import tables

    assert tables.is_missing is fmt.is_missing
    for v in (None, pd.NA, pd.NaT, float("nan"), np.float32("nan"), Decimal("NaN"), "nan"):
        assert fmt.is_missing(v), v
        assert tables.format_number(v) == fmt.format_num(v) == fmt.MISSING, v
    for v in ("", 0, 0.0, False, np.inf, "x", Decimal(1)):
        assert not fmt.is_missing(v), v
