"""Issue 36, shared items: a model that skipped (hard) items must not rank above a model that is better on
the items both answered; summary --by model shows the shared-item accuracy beside the full one and says which
model lacks which share of the items (notes, JSON, text)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mrcstats.cli import main
from mrcstats.stats.accuracy import summarize
from mrcstats.stats.compare import compare


def _log() -> pd.DataFrame:
    """Model 'skip' lacks the 40 hard items; on the 60 easy ones it is below 'full'."""
    rows = []
    for m, easy, hard in (("full", 0.9, 0.4), ("skip", 0.8, None), ("weak", 0.7, 0.2)):
        for i in range(100):
            if i >= 60 and hard is None:
                continue
            p = easy if i < 60 else hard
            rows.append({"model": m, "item": f"q{i}", "correct": bool((i * 7919 % 100) / 100 < p)})
    return pd.DataFrame(rows)


def test_summary_gives_shared_accuracy_and_a_note() -> None:
    log = _log()
    res = summarize(log)
    t = res.to_frame().set_index("model")
    easy = log[log["item"].str[1:].astype(int) < 60].groupby("model")["correct"].mean()
    assert t["accuracy"]["skip"] > t["accuracy"]["full"]              # the full accuracy favours the skipper
    assert t["accuracy_shared"].to_dict() == pytest.approx(easy.to_dict())
    assert (t["n_shared"] == 60).all()
    note = next(n for n in res.notes if n.startswith("item sets differ"))
    assert "skip lacks 40 of 100 items (40.0%)" in note
    d = res.to_dict()
    assert {"n_shared", "accuracy_shared"} <= set(d["groups"][0]) and note in d["notes"]
    assert "acc_shared" in res.summary() and "item sets differ" in res.summary()


def test_summary_unchanged_when_every_model_answered_every_item() -> None:
    log = _log()
    same = log[log["item"].str[1:].astype(int) < 60]
    res = summarize(same)
    assert "accuracy_shared" not in res.to_frame() and not any("item sets" in n for n in res.notes)


def test_compare_ranks_on_shared_items() -> None:
    res = compare(_log())
    m = res.models.set_index("model")
    assert m.loc["skip", "accuracy"] > m.loc["full", "accuracy"]
    assert m.loc["full", "rank"] == 1 and m.loc["skip", "rank"] == 2      # on the 60 shared items
    assert m.loc["skip", "items_missing"] == 40 and (m["n_shared"] == 60).all()
    d = res.to_dict()
    assert d["rank_basis"] == "shared items" and any("skip lacks 40 of 100" in n for n in d["notes"])
    assert "accuracy_shared (60 items)" in res.summary()


def test_summary_by_model_and_condition_shares_within_each_condition() -> None:
    a = _log().assign(condition="x")
    b = _log().assign(condition="y")
    b = b[~((b["model"] == "weak") & (b["item"] == "q0"))]
    res = summarize(pd.concat([a, b], ignore_index=True), by=["model", "condition"]).to_frame()
    got = res.set_index(["model", "condition"])["n_shared"]
    assert got[("full", "x")] == 60 and got[("full", "y")] == 59


def test_cli_summary_and_compare_say_it(tmp_path, capsys) -> None:
    path = tmp_path / "log.csv"
    _log().to_csv(path, index=False)
    assert main(["summary", str(path), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert "accuracy_shared" in d["groups"][0] and any("item sets differ" in n for n in d["notes"])
    assert main(["compare", str(path), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["rank_basis"] == "shared items"
    assert [m["model"] for m in sorted(d["models"], key=lambda m: m["rank"])][:2] == ["full", "skip"]
    assert main(["compare", str(path)]) == 0
    assert "item sets differ" in capsys.readouterr().out


def test_dataset_path_gives_the_same_shared_columns(tmp_path) -> None:
    from mrcstats.io.ingest import write_dataset

    _log().to_parquet(tmp_path / "s.parquet")
    ds = write_dataset(tmp_path / "s.parquet", tmp_path / "ds")
    mem = summarize(_log()).to_frame().set_index("model")
    duck = summarize(ds).to_frame().set_index("model")
    np.testing.assert_allclose(duck.loc[mem.index, "accuracy_shared"], mem["accuracy_shared"], rtol=1e-12)
