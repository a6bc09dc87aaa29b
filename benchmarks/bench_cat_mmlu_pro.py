#!/usr/bin/env python
"""Adaptive testing on MMLU-Pro's published model outputs: leave-one-model-out (issue 40).

For each of the 29 models: calibrate an item bank (:func:`mrcstats.stats.cat.calibrate`, 2PL, content groups =
MMLU-Pro's 14 categories, screen off: the held-out model's answers never enter its bank) on the other 28, then
predict the held-out model's full accuracy (mean over all 12,032 questions, no extracted answer = not correct)
from 25, 50 and 100 of its real answers chosen by

* ``adaptive``: :func:`mrcstats.stats.cat.run_cat` (max information, content balancing, randomesque top 5),
  predictions after the first 25/50/100 items of one run, the interval with the bank's out-of-sample model-misfit
  variance (:func:`mrcstats.stats.cat.kfold_misfit`: a K-fold refit over the 28 calibration models only; the
  held-out model is in no fold); ``adaptive-nomisfit``: the same predictions, interval without it;
* ``random``, ``stratified`` (random within categories, proportional quotas) and ``anchor`` (anchor points on the
  training models): :func:`mrcstats.stats.subsets.subset`;

each with the p-IRT prediction and its interval (:func:`mrcstats.stats.cat.predict_accuracy`), plus two classical
estimators: ``random-mean`` (the subset mean with a normal interval, finite-population corrected) and
``anchor-weighted`` (the anchor-weighted mean, no interval). Prints MAE, the MAE ratio to ``random`` and the
coverage of the 95% intervals per method and count, and the calibration time.

Reads the folder of TIGER-AI-Lab/MMLU-Pro ``eval_results`` JSON files (``benchmarks/bench_screen.py``'s loader).

Usage: python benchmarks/bench_cat_mmlu_pro.py /tmp/mmlupro_json [--models N] [--seed 0] [--adaptive-only]
       [--shard K/N --rows-out F] [--merge F...] [--json]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

COUNTS = (25, 50, 100)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--models", type=int, default=0, help="hold out only the first N models (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--draws", type=int, default=400)
    ap.add_argument("--irt-model", default="auto", choices=("auto", "1pl", "2pl"))
    ap.add_argument("--shard", default="0/1", metavar="K/N", help="hold out the models with index %% N == K "
                                                                  "(run N shards in parallel, then --merge)")
    ap.add_argument("--rows-out", type=Path, help="write the per-model rows (JSON) for --merge")
    ap.add_argument("--merge", type=Path, nargs="+", help="combine the --rows-out files of the shards")
    ap.add_argument("--only", nargs="+", metavar="MODEL", help="hold out only these models (in this order)")
    ap.add_argument("--folds", type=int, default=None, help="folds of the misfit estimate (default: the "
                                                            "library's; 0: none)")
    ap.add_argument("--adaptive-only", action="store_true", help="skip the random, stratified and anchor methods")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.merge:
        rows, cal_times, misfit_times = [], [], []
        for f in a.merge:
            obj = json.loads(f.read_text())
            rows += obj["rows"]
            cal_times += obj["cal_times"]
            misfit_times += obj.get("misfit_times", [])
        return report(pd.DataFrame(rows), cal_times, misfit_times, obj["irt_model"], obj["n_models"], obj["items"], a)
    if not a.folder.is_dir() or not any(a.folder.glob("*.json")):
        print(f"{a.folder}: no MMLU-Pro JSON outputs; skipped", file=sys.stderr)
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from dataclasses import replace

    from bench_screen import load

    from mrcstats.stats.cat import MISFIT_FOLDS, calibrate, kfold_misfit, predict_accuracy, run_cat
    from mrcstats.stats.subsets import subset

    log, _ = load(a.folder)
    log = log[["model", "item", "correct", "category"]]
    models = sorted(log["model"].unique())
    held = models[: a.models] if a.models else models
    if a.only:
        held = [m for m in a.only if m in set(held)]
    if a.folds is None:
        a.folds = MISFIT_FOLDS
    k_, n_ = (int(x) for x in a.shard.split("/"))
    held = [m for i, m in enumerate(held) if i % n_ == k_]
    print(f"{len(models)} models, {log['item'].nunique()} questions; holding out {len(held)}", file=sys.stderr)
    rows, cal_times, misfit_times = [], [], []
    for mi, m in enumerate(held):
        t_fold = time.perf_counter()
        train = log[log["model"] != m]
        t0 = time.perf_counter()
        bank = calibrate(train, irt_model=a.irt_model, content="category", screen=False, progress=False, folds=0)
        cal_times.append(time.perf_counter() - t0)
        if a.folds:    # what `calibrate(folds=K)` adds, timed apart: calibration time before / after
            t0 = time.perf_counter()
            bank = replace(bank, misfit=kfold_misfit(train, bank, folds=a.folds, seed=a.seed, progress=False))
            misfit_times.append(time.perf_counter() - t0)
        items = bank.items["item"].to_numpy(str)
        pos = {it: k for k, it in enumerate(items)}
        test = log[log["model"] == m]
        ans = dict(zip(test["item"].astype(str), test["correct"].fillna(False).astype(bool)))
        y_all = np.array([float(ans.get(it, False)) for it in items])
        truth = float(y_all.mean())
        N = len(items)

        def add(method: str, k: int, est: float, lo: float, hi: float, m: str = m, truth: float = truth) -> None:
            rows.append({"model": m, "method": method, "k": k, "truth": truth, "estimate": est,
                         "error": est - truth, "covered": (lo <= truth <= hi) if math.isfinite(lo) else np.nan,
                         "width": hi - lo})

        res = run_cat(bank, lambda it, ans=ans: ans.get(it, False), model=m, max_items=max(COUNTS), seed=a.seed,
                      draws=a.draws)
        asked = [pos[i] for i in res.trace["item"]]
        for k in COUNTS:
            p = predict_accuracy(bank, asked[:k], y_all[asked[:k]], draws=a.draws, seed=a.seed)
            add("adaptive", k, p.accuracy, *p.ci)
            p0 = predict_accuracy(bank, asked[:k], y_all[asked[:k]], draws=a.draws, seed=a.seed, misfit=False)
            add("adaptive-nomisfit", k, p0.accuracy, *p0.ci)
        for k in () if a.adaptive_only else COUNTS:
            for name, kw in (("random", {"method": "random"}),
                             ("stratified", {"method": "random", "stratify": "category"}),
                             ("anchor", {"method": "anchor"})):
                sub = subset(train, k, seed=a.seed, **kw)
                idx = [pos[i] for i in sub.items]
                p = predict_accuracy(bank, idx, y_all[idx], draws=a.draws, seed=a.seed)
                add(name, k, p.accuracy, *p.ci)
                if name == "random":
                    mu = float(y_all[idx].mean())
                    se = math.sqrt(max(mu * (1 - mu), 1e-12) / k * (N - k) / (N - 1))
                    add("random-mean", k, mu, mu - 1.96 * se, mu + 1.96 * se)
                if name == "anchor":
                    add("anchor-weighted", k, float(np.dot(sub.weights, y_all[idx])), math.nan, math.nan)
        if a.rows_out:    # after every model: a run cut short keeps what it has
            a.rows_out.write_text(json.dumps({"rows": rows, "cal_times": cal_times, "misfit_times": misfit_times,
                                              "irt_model": bank.irt_model,
                                              "n_models": len(models), "items": int(log["item"].nunique())},
                                             default=lambda v: None if pd.isna(v) is True else v))
        last = [r for r in rows if r["model"] == m and r["k"] == 100]
        mf = bank.misfit
        print("  misfit SD at n = " + ", ".join(f"{n}: {math.sqrt(v):.4f}" for n, v in zip(mf.get("n", ()),
                                                                                      mf.get("var", ()))),
              file=sys.stderr)
        print(f"[{mi + 1}/{len(held)}] {m}: truth {truth:.4f}, calibration {cal_times[-1]:.1f} s, fold "
              f"{time.perf_counter() - t_fold:.0f} s; k=100 errors "
              + ", ".join(f"{r['method']} {r['error']:+.4f}" for r in last), file=sys.stderr, flush=True)
    if a.rows_out:
        a.rows_out.write_text(json.dumps({"rows": rows, "cal_times": cal_times, "misfit_times": misfit_times,
                                              "irt_model": bank.irt_model,
                                          "n_models": len(models), "items": int(log["item"].nunique())},
                                         default=lambda v: None if pd.isna(v) is True else v))
    return report(pd.DataFrame(rows), cal_times, misfit_times, bank.irt_model, len(models), int(log["item"].nunique()), a)


def report(df: pd.DataFrame, cal_times: list[float], misfit_times: list[float], irt_model: str, n_models: int, n_items: int,
           a: argparse.Namespace) -> int:
    """Print the table of MAE, ratio to random, coverage and width per method and count."""
    df["covered"] = df["covered"].astype(float)
    tab = df.groupby(["method", "k"]).agg(mae=("error", lambda e: float(np.mean(np.abs(e)))),
                                          bias=("error", "mean"), coverage=("covered", "mean"),
                                          width=("width", "mean"), n=("error", "size")).reset_index()
    rnd = tab[tab["method"] == ("random" if (tab["method"] == "random").any() else "adaptive")].set_index("k")["mae"]
    tab["mae_vs_random"] = tab["mae"] / tab["k"].map(rnd)
    order = ["adaptive", "adaptive-nomisfit", "random", "stratified", "anchor", "random-mean", "anchor-weighted"]
    tab["o"] = tab["method"].map({m: i for i, m in enumerate(order)})
    tab = tab.sort_values(["o", "k"]).drop(columns="o").reset_index(drop=True)
    ad = tab[tab["method"] == "adaptive"].set_index("k")
    checks = {"adaptive_mae_100_le_0.02": bool(ad.at[100, "mae"] <= 0.02),
              "adaptive_beats_random_every_k": bool(all(ad.at[k, "mae"] < rnd[k] for k in COUNTS))
              if (tab["method"] == "random").any() else None,
              "adaptive_coverage_ge_0.90_every_k": bool((ad["coverage"] >= 0.90).all())}
    timing = {"calibration_s_mean": float(np.mean(cal_times)), "calibration_s_max": float(np.max(cal_times)),
              "calibration_s_median": float(np.median(cal_times)),
              "misfit_s_mean": float(np.mean(misfit_times)) if misfit_times else None,
              "misfit_s_median": float(np.median(misfit_times)) if misfit_times else None,
              "train_models": n_models - 1, "items": n_items}
    if a.json:
        print(json.dumps({"irt_model": irt_model, "table": tab.to_dict(orient="records"), "checks": checks,
                          "timing": timing, "held_out": int(df["model"].nunique()), "seed": a.seed}))
    else:
        print(f"item bank: {irt_model.upper()} ({a.irt_model}); {df['model'].nunique()} models held out")
        print(tab.to_string(index=False, float_format=lambda x: f"{x:.4f}"))
        print(f"calibration on {timing['train_models']} models x {timing['items']} items: mean "
              f"{timing['calibration_s_mean']:.1f} s, median {timing['calibration_s_median']:.1f} s, max "
              f"{timing['calibration_s_max']:.1f} s")
        if misfit_times:
            print(f"  + K-fold misfit estimate: mean {timing['misfit_s_mean']:.1f} s, median "
                  f"{timing['misfit_s_median']:.1f} s")
        for k, v in checks.items():
            print(f"{k}: {'n/a' if v is None else 'yes' if v else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
