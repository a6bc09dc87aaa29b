"""CLI: mrcstats masking / mskcal / mask (JSON shapes of issue 7, one-line errors, exit codes)."""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from mrcstats.cli import main

TEXT = "Daryl Hall is suing his musical partner John Oates over a sealed lawsuit about 8,000 records."


def _canonical_csv(path, acc_by_rate=None, model="m"):
    acc_by_rate = acc_by_rate or {0: 1.0, 50: 0.5, 100: 0.25}
    rows = []
    for cond in ("regular", "strict"):
        for t in (1, 2):
            for mr, p in acc_by_rate.items():
                n_ok = round(4 * p)
                for i in range(4):
                    rows.append({"model": model, "item": f"q{i}", "trial": t, "condition": cond,
                                 "masking_rate": mr, "correct": i < n_ok})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _json(capsys):
    out = capsys.readouterr().out
    return json.loads(out)


def test_masking_json_shape(tmp_path, capsys):
    log = _canonical_csv(tmp_path / "log.csv")
    base = _canonical_csv(tmp_path / "base.csv", {0: 1.0, 50: 0.75, 100: 0.5})
    assert main(["masking", str(log), "--json"]) == 0
    d = _json(capsys)
    assert set(d) == {"acc", "sd", "acc_valid", "invalid", "weighted"}
    assert d["acc"]["m"]["regular"] == {"0": 1.0, "50": 0.5, "100": 0.25}
    assert d["sd"]["m"]["regular"]["50"] == 0.0
    w = d["weighted"]["m"]["regular"]
    assert w["acc"] == pytest.approx((50 * 0.5 + 100 * 0.25) / 150)
    assert w["ea"] is None and w["ki"] is None

    assert main(["masking", str(log), "--baseline", str(base), "--acc0", "0.8", "--json"]) == 0
    d = _json(capsys)
    w = d["weighted"]["m"]["strict"]
    na = {50: 0.5 / 0.8, 100: 0.25 / 0.8}
    nu = {50: 0.75, 100: 0.5}
    ea = {r: 0.8 * math.sqrt(na[r] * nu[r]) for r in na}
    ki = {r: (nu[r] - na[r]) / (1 - na[r]) for r in na}
    assert w["na"] == pytest.approx((50 * na[50] + 100 * na[100]) / 150)
    assert w["ea"] == pytest.approx((50 * ea[50] + 100 * ea[100]) / 150)
    assert w["ki"] == pytest.approx((50 * ki[50] + 100 * ki[100]) / 150)


def test_masking_text_output_and_notes(tmp_path, capsys):
    log = _canonical_csv(tmp_path / "log.csv")
    assert main(["masking", str(log), "--baseline", str(log)]) == 0
    cap = capsys.readouterr()
    assert "Acc(MR)" in cap.out and "weighted" in cap.out
    assert "KI undefined where NA >= 1" in cap.err


def test_masking_errors_are_one_line(tmp_path, capsys):
    log = _canonical_csv(tmp_path / "log.csv")
    assert main(["masking", str(log), "--acc0", "89.84", "--json"]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    assert len(cap.err.strip().splitlines()) == 1 and "acc0" in cap.err
    assert main(["masking", str(tmp_path / "missing.csv")]) == 2


def _mskcal_files(folder, model="gpt-x"):
    answers = {20: "NR = 11,880\nP = 62,500 yen\nE' = 1,389.96 million yen",
               60: "NR = A - C\n**P (price):** 62,000 yen"}
    for t in range(3):
        row = {}
        for mr, a in answers.items():
            row[f"s4_prg_encode_{mr}"] = "masked"
            row[f"answer_{model}_{mr}"] = a if t < 2 else ""
            row[f"query_{mr}"] = "prompt"
        pd.DataFrame([row]).to_csv(folder / f"MskCal_masker_{t}.csv", index=False)
    pd.DataFrame({"lemma": ["a"], "code": ["r001"]}).to_csv(folder / "MskCal_step4.csv", index=False)


def test_mskcal_json_shape(tmp_path, capsys):
    _mskcal_files(tmp_path)
    assert main(["mskcal", str(tmp_path), "--json"]) == 0
    cap = capsys.readouterr()
    d = json.loads(cap.out)
    assert set(d) == {"variables"}
    p = d["variables"]["P"]
    assert set(p) == {"20", "60"}
    assert set(p["20"]) == {"nar", "mean_rel_error", "trimmed_mean", "success_rate"}
    assert p["20"]["nar"] == pytest.approx(1 / 3) and p["20"]["success_rate"] == 1.0
    assert p["60"]["mean_rel_error"] == pytest.approx(500 / 62_500)
    assert d["variables"]["NR"]["60"]["nar"] == 1.0 and d["variables"]["NR"]["60"]["mean_rel_error"] is None
    assert d["variables"]["E'"]["20"]["mean_rel_error"] == pytest.approx(0.0, abs=1e-12)
    assert "skipped" in cap.err


def test_mskcal_two_models_need_model(tmp_path, capsys):
    _mskcal_files(tmp_path, "a")
    sub = tmp_path / "b"
    sub.mkdir()
    _mskcal_files(sub, "b")
    assert main(["mskcal", str(tmp_path / "MskCal_masker_0.csv"), str(sub / "MskCal_masker_0.csv"),
                 "--json"]) == 2
    assert "--model" in capsys.readouterr().err
    assert main(["mskcal", str(tmp_path / "MskCal_masker_0.csv"), str(sub / "MskCal_masker_0.csv"),
                 "--model", "b", "--json"]) == 0
    assert "variables" in _json(capsys)


def test_mask_json_and_file(tmp_path, capsys):
    assert main(["mask", TEXT, "--rate", "50", "--condition", "strict", "--seed", "4", "--tagger", "rules",
                 "--json"]) == 0
    d = _json(capsys)
    assert {"masked_text", "metadata", "k", "n_candidates", "rate", "condition", "seed"} <= set(d)
    assert d["k"] == round(d["n_candidates"] * 0.5)
    assert all(m["meaning"] == "" for m in d["metadata"])
    assert "8,000" in d["masked_text"]
    f = tmp_path / "t.txt"
    f.write_text(TEXT, encoding="utf-8")
    assert main(["mask", str(f), "--rate", "100", "--seed", "4", "--tagger", "rules"]) == 0
    out = capsys.readouterr().out
    assert "part_of_speech | category | meaning | code" in out
    assert main(["mask", TEXT, "--rate", "150"]) == 2
    assert "0..100" in capsys.readouterr().err
