"""Property tests: canonical logs survive write_log -> read_log (Parquet exactly, CSV on every value)."""
from __future__ import annotations

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrcstats.io import read_log, validate_log, write_log

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\r")
                | st.sampled_from([",", '"', "\n", "\t", "'"]), min_size=1, max_size=12)
_ident = st.text(alphabet="abcXYZ019_-:./ ", min_size=1, max_size=8).filter(lambda s: s.strip() == s)


@st.composite
def logs(draw):
    n = draw(st.integers(1, 25))
    keys = draw(st.lists(st.tuples(_ident, _ident, st.integers(0, 3), st.sampled_from(["", "partial", "x y"])),
                         min_size=n, max_size=n, unique=True))
    df = pd.DataFrame(keys, columns=["model", "item", "trial", "condition"])
    df["cluster"] = draw(st.lists(_ident, min_size=n, max_size=n))
    df["masking_rate"] = pd.array(draw(st.lists(st.one_of(st.none(), st.integers(0, 20).map(lambda k: 5.0 * k)),
                                                min_size=n, max_size=n)), dtype="Float64")
    df["correct"] = pd.array(draw(st.lists(st.one_of(st.none(), st.booleans()), min_size=n, max_size=n)),
                             dtype="boolean")
    df["response"] = pd.array(draw(st.lists(st.one_of(st.none(), _text), min_size=n, max_size=n)), dtype="string")
    df["extra_int"] = draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n))
    return validate_log(df)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(logs())
def test_parquet_roundtrip(tmp_path, log):
    p = write_log(log, tmp_path / "l.parquet")
    back = read_log(p)
    pd.testing.assert_frame_equal(log, back)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(logs(), st.sampled_from(["l.csv", "l.csv.gz", "l.tsv"]))
def test_csv_roundtrip(tmp_path, log, name):
    p = write_log(log, tmp_path / name)
    back = read_log(p)
    core = ["model", "item", "cluster", "trial", "condition", "masking_rate", "correct", "response"]
    pd.testing.assert_frame_equal(log[core], back[core])
    assert back["extra_int"].tolist() == log["extra_int"].tolist()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(logs(), st.sampled_from(["json", "jsonl"]))
def test_json_records_roundtrip(tmp_path, log, fmt):
    import json

    core = ["model", "item", "cluster", "trial", "condition", "masking_rate", "correct", "response"]
    recs = [{k: (None if pd.isna(v) else v) for k, v in r.items()}
            for r in log[core].astype(object).to_dict(orient="records")]
    p = tmp_path / f"l.{fmt}"
    p.write_text(json.dumps(recs) if fmt == "json" else "\n".join(json.dumps(r) for r in recs))
    back = read_log(p)
    pd.testing.assert_frame_equal(log[core], back[core])
