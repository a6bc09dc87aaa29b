"""Item screening against expert verdicts: mrcstats' screen beside the simple screens, on real wrong keys.

Data (not committed): a folder laid out as ``../shared/data/redux_dev`` - ``<log>/LOG.csv`` (columns model, item,
cluster, pred, gold, correct: the option each model chose on MMLU items) and ``<log>/TRUTH.json`` (``wrong_key``
and ``any_error``: the items MMLU-Redux's experts marked), and ``labels/mmlu_<subject>.csv`` (the experts'
``error_type`` per question, in the order of the items ``<subject>/<row>``; used for the error-type check where
the item ids follow that pattern). Usage::

    python benchmarks/bench_screen_redux.py ../shared/data/redux_dev [--logs helm14 pro] [--inject 60] [--json OUT]

Printed, per log and per truth (wrong keys; any error): ROC AUC, precision at K (K = the number of true items,
and 50; ties broken by expectation) of

* ``mrcstats score`` (``P(wrong key | answers)``, the screen's ranking) and ``mrcstats p_broken``
  (``1 - P(clean | answers)``);
* the simple screens: ``fraction wrong`` (1 - accuracy), ``-point-biserial`` (rest score), ``weighted vote``
  (the share of the models choosing the most chosen non-key option, each weighted by its accuracy) and their
  ``rank sum``;

then the default flags (Bayesian FDR 0.1): how many, how many the experts confirmed (realised precision), for
wrong keys and any error; the error type given to the flagged items against the experts' type; and, with
``--inject K``, the injected keys' answer patterns beside the real wrong keys' (is the simulation like the real
thing?). Everything from one run.
"""
from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

import mrcstats
from mrcstats.stats.screen import inject_key_errors, roc_auc

_TYPES = {"wrong groundtruth": "wrong_key", "wrong_groundtruth": "wrong_key", "multiple correct answers":
          "multiple_correct", "multiple_correct_answers": "multiple_correct", "no correct answer": "no_correct",
          "no_correct_answer": "no_correct"}


def precision(score: np.ndarray, label: np.ndarray, k: int) -> float:
    """Expected share of true items among the ``k`` highest scores, ties broken at random."""
    s = np.where(np.isnan(score), -np.inf, score)
    thr = np.sort(s)[::-1][k - 1]
    above, tied = s > thr, s == thr
    return float((label[above].sum() + (k - above.sum()) * label[tied].mean()) / k)


def simple_screens(log: pd.DataFrame, items: list[str]) -> dict[str, np.ndarray]:
    """The ten-line screens, each oriented higher = more suspect."""
    from scipy.stats import rankdata

    d = log.dropna(subset=["pred"]).copy()
    d["c"] = d["correct"].astype(float)
    acc_m = d.groupby("model")["c"].mean()
    fw = 1 - d.groupby("item")["c"].mean().reindex(items).to_numpy()
    wide = d.pivot_table(index="model", columns="item", values="c", aggfunc="mean").reindex(columns=items)
    tot, cnt = wide.sum(axis=1), wide.notna().sum(axis=1)
    pb = np.array([wide[i].corr((tot - wide[i].fillna(0)) / (cnt - wide[i].notna())) for i in items])
    d["w"] = d["model"].map(acc_m)
    v = d[d["pred"] != d["gold"]].groupby(["item", "pred"])["w"].sum().groupby("item").max()
    vote = (v / d.groupby("item")["w"].sum()).reindex(items).fillna(0).to_numpy()
    npb = -np.nan_to_num(pb)
    return {"fraction wrong": fw, "-point-biserial": npb, "weighted vote": vote,
            "rank sum": rankdata(fw) + rankdata(npb) + rankdata(vote)}


def expert_types(labels: Path) -> dict[str, str]:
    out = {}
    for f in sorted(labels.glob("mmlu_*.csv")):
        txt = f.read_text(encoding="utf-8", errors="replace")
        first = txt.splitlines()[0]
        df = pd.read_csv(io.StringIO(txt), sep=";" if first.count(";") > first.count(",") else ",", engine="python")
        df.columns = [c.strip().lower() for c in df.columns]
        subj = f.stem.removeprefix("mmlu_")
        for k, et in enumerate(df["error_type"].astype(str).str.strip().str.lower()):
            out[f"{subj}/{k}"] = _TYPES.get(et, et)
    return out


def pattern(log: pd.DataFrame, items: set[str]) -> pd.DataFrame:
    """Per item: the share of answers on the key, on the most chosen other option, and the number of options
    chosen."""
    d = log[log["item"].isin(items)].dropna(subset=["pred"])
    n = d.groupby("item").size()
    key = (d["pred"] == d["gold"]).groupby(d["item"]).mean()
    other = d[d["pred"] != d["gold"]].groupby(["item", "pred"]).size().groupby("item").max().reindex(n.index).fillna(0)
    return pd.DataFrame({"key share": key, "top other share": other / n,
                         "options chosen": d.groupby("item")["pred"].nunique()})


def run(folder: Path, name: str, inject: int, types: dict[str, str]) -> dict:
    log = pd.read_csv(folder / name / "LOG.csv", dtype={"item": str, "pred": str, "gold": str, "cluster": str})
    truth = json.loads((folder / name / "TRUTH.json").read_text())
    t0 = time.perf_counter()
    res = mrcstats.screen(mrcstats.read_log(folder / name / "LOG.csv"), progress=False)
    secs = time.perf_counter() - t0
    it = res.items.set_index("item")
    items = list(it.index)
    scores = {"mrcstats score": it["score"].to_numpy(float), "mrcstats p_broken": it["p_broken"].to_numpy(float),
              **simple_screens(log, items)}
    rows = []
    for what in ("wrong_key", "any_error"):
        lab = np.isin(items, truth[what])
        k = int(lab.sum())
        for s_name, s in scores.items():
            rows.append({"log": name, "truth": what, "n": k, "screen": s_name, "auc": roc_auc(s, lab),
                         "p@K": precision(s, lab, k), "p@50": precision(s, lab, 50)})
    flag = it["flag"].to_numpy(bool)
    wk, ae = np.isin(items, truth["wrong_key"]), np.isin(items, truth["any_error"])
    flags = {"log": name, "flagged": int(flag.sum()), "wrong keys": int(wk.sum()),
             "flagged wrong keys": int((flag & wk).sum()), "flagged any error": int((flag & ae).sum()),
             "precision (wrong key)": float((flag & wk).sum() / max(flag.sum(), 1)),
             "precision (any error)": float((flag & ae).sum() / max(flag.sum(), 1)),
             "nominal FDR": res.fdr, "fit seconds": secs, "model": res.model}
    out = {"metrics": rows, "flags": flags}
    known = [i for i in items if i in types]
    if known and flag.any():
        et = it["error_type"]
        fl = [i for i in np.asarray(items)[flag] if types.get(i) in ("wrong_key", "multiple_correct", "no_correct")]
        conf = pd.crosstab(pd.Series([types[i] for i in fl], name="expert"), pd.Series([et[i] for i in fl],
                           name="screen"))
        out["types"] = {"n": len(fl), "right": int(sum(types[i] == et[i] for i in fl)), "table": conf}
    if inject:
        full = mrcstats.read_log(folder / name / "LOG.csv")
        clean = full[~full["item"].isin(truth["any_error"])].reset_index(drop=True)
        bad, inj = inject_key_errors(clean, inject, seed=0)
        real = pattern(log, set(truth["wrong_key"])).describe().loc[["25%", "50%", "75%", "mean"]]
        sim = pattern(bad, set(inj["item"])).describe().loc[["25%", "50%", "75%", "mean"]]
        out["inject"] = pd.concat({"real wrong keys": real, "injected": sim}, axis=1)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--logs", nargs="+", default=["helm14", "pro"])
    ap.add_argument("--inject", type=int, default=60, help="keys to move on the clean items (0: no check)")
    ap.add_argument("--json", type=Path, help="also write the metrics here")
    a = ap.parse_args(argv)
    if not (a.folder / a.logs[0] / "LOG.csv").is_file():
        print(f"bench_screen_redux: no {a.folder / a.logs[0] / 'LOG.csv'}; give the redux_dev folder", file=sys.stderr)
        return 2
    types = expert_types(a.folder / "labels") if (a.folder / "labels").is_dir() else {}
    allrows, flags = [], []
    for name in a.logs:
        out = run(a.folder, name, a.inject, types)
        allrows += out["metrics"]
        flags.append(out["flags"])
        m = pd.DataFrame(out["metrics"])
        for what, g in m.groupby("truth", sort=False):
            print(f"\n== {name}: {what} (n = {int(g['n'].iloc[0])})")
            print(g.drop(columns=["log", "truth", "n"]).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        f = out["flags"]
        print(f"\nflags at Bayesian FDR <= {f['nominal FDR']}: {f['flagged']} flagged ({f['wrong keys']} wrong keys in "
              f"the log); wrong keys among them {f['flagged wrong keys']} (precision {f['precision (wrong key)']:.3f}); "
              f"any error {f['flagged any error']} (precision {f['precision (any error)']:.3f}); "
              f"screen {f['fit seconds']:.1f} s")
        if "types" in out:
            t = out["types"]
            print(f"error type of the flagged items the experts typed: {t['right']} of {t['n']} right")
            print(t["table"].to_string())
        if "inject" in out:
            print("answer patterns: real wrong keys vs keys moved by inject_key_errors (clean items)")
            print(out["inject"].to_string(float_format=lambda v: f"{v:.3f}"))
    if a.json:
        a.json.write_text(json.dumps({"metrics": allrows, "flags": flags}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
