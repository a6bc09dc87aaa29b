"""Issue 36, one invalid-answer rule: an empty extracted answer beside a given correct is invalid (counted
and reported), and mrcstats.glmer counts invalid answers as not correct by default, as the CLI and the
reports do (invalid='exclude' leaves them out)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import mrcstats
from mrcstats.errors import InputError
from mrcstats.io.schema import unanswered, validate_log
from mrcstats.stats.accuracy import summarize


@pytest.mark.parametrize("ext", ["csv", "parquet", "jsonl"])
def test_empty_pred_beside_a_correct_is_invalid(tmp_path, ext) -> None:
    df = pd.DataFrame({"model": "m", "item": list("abcde"), "correct": [True, False, True, False, True],
                       "pred": ["A", "", None, "[invalid]", " b "]})
    p = tmp_path / f"log.{ext}"
    if ext == "csv":
        df.to_csv(p, index=False)
    elif ext == "parquet":
        df.to_parquet(p)
    else:
        df.to_json(p, orient="records", lines=True)
    log = mrcstats.read_log(p)
    assert log["correct"].isna().tolist() == [False, True, True, True, False]
    assert log["score"].isna().tolist() == [False, True, True, True, False]
    s = summarize(log).to_frame().iloc[0]
    assert s["invalid"] == 3 and s["accuracy"] == pytest.approx(2 / 5)
    if ext != "parquet":                              # the streamed reader (ingest --dataset) decides the same
        from mrcstats.io.stream import stream_chunks

        streamed = pd.concat([c for c, _ in stream_chunks(p, ext if ext == "csv" else "jsonl", chunk_rows=3)])
        assert int(streamed["correct"].isna().sum()) == 3


def test_a_pred_column_left_empty_decides_nothing(tmp_path) -> None:
    p = tmp_path / "log.csv"
    pd.DataFrame({"model": "m", "item": list("ab"), "correct": [1, 0], "pred": [None, None]}).to_csv(p, index=False)
    assert mrcstats.read_log(p)["correct"].tolist() == [True, False]
    assert not unanswered(pd.Series([None, ""], dtype="string")).any()
    # a frame built by hand is the caller's: validate_log keeps its correct
    df = pd.DataFrame({"model": "m", "item": list("ab"), "correct": [True, False], "pred": ["A", ""]})
    assert validate_log(df)["correct"].tolist() == [True, False]


def test_the_cli_counts_them(tmp_path, capsys) -> None:
    import json

    from mrcstats.cli import main

    p = tmp_path / "log.csv"
    pd.DataFrame({"model": "m", "item": list("abcd"), "correct": [1, 1, 0, 1], "pred": ["A", "", "C", "D"]}).to_csv(
        p, index=False)
    assert main(["summary", str(p), "--json"]) == 0
    g = json.loads(capsys.readouterr().out)["groups"][0]
    assert g["invalid"] == 1 and g["accuracy"] == pytest.approx(0.5)


def _data() -> pd.DataFrame:
    rng = np.random.default_rng(4)
    n = 400
    g = rng.integers(0, 20, n)
    u = rng.normal(0, 1, 20)[g]
    y = pd.array(rng.random(n) < 1 / (1 + np.exp(-(0.4 + u))), dtype="boolean")
    y[rng.random(n) < 0.1] = pd.NA
    return pd.DataFrame({"model": "m", "item": [f"q{i}" for i in range(n)], "cluster": [f"c{c}" for c in g],
                         "correct": y})


def test_glmer_counts_invalid_as_wrong_by_default() -> None:
    d = _data()
    n_inv = int(d["correct"].isna().sum())
    wrong = mrcstats.glmer("correct ~ 1 + (1 | cluster)", d)
    assert wrong.nobs == len(d) and any(f"{n_inv} invalid answers count as not correct" in m
                                        for m in wrong.messages)
    same = mrcstats.glmer("correct ~ 1 + (1 | cluster)", d.assign(correct=d["correct"].fillna(False)))
    assert wrong.fixef.iloc[0] == pytest.approx(same.fixef.iloc[0], rel=1e-8)
    excl = mrcstats.glmer("correct ~ 1 + (1 | cluster)", d, invalid="exclude")
    assert excl.nobs == len(d) - n_inv
    with pytest.raises(InputError, match="invalid must be"):
        mrcstats.glmer("correct ~ 1 + (1 | cluster)", d, invalid="drop")


def test_out_of_core_refuses_wrong_with_invalid_rows(tmp_path) -> None:
    from mrcstats.io.ingest import write_dataset

    d = _data()
    d.to_parquet(tmp_path / "s.parquet")
    ds = write_dataset(tmp_path / "s.parquet", tmp_path / "ds")
    with pytest.raises(InputError, match="invalid='exclude'"):
        mrcstats.glmer("correct ~ 1 + (1 | cluster)", ds)
    excl = mrcstats.glmer("correct ~ 1 + (1 | cluster)", ds, invalid="exclude")
    rows = mrcstats.glmer("correct ~ 1 + (1 | cluster)", d, invalid="exclude")
    assert excl.fixef.iloc[0] == pytest.approx(rows.fixef.iloc[0], rel=1e-5)


def test_a_canonical_log_is_taken_as_written(tmp_path) -> None:
    """A log written by mrcstats (an Inspect log's optional answers in pred) keeps its correct when read back."""
    df = pd.DataFrame({"model": "m", "item": list("abc"), "correct": [True, False, True], "pred": ["A", None, ""]})
    log = validate_log(df)
    for ext in ("parquet", "csv"):
        p = tmp_path / f"log.{ext}"
        mrcstats.write_log(log, p)
        assert mrcstats.read_log(p)["correct"].tolist() == [True, False, True]
