"""Power of the item screen and of DIF on real multiple-choice outputs: the public MMLU-Pro model outputs.

Data (not committed; fetched by the user): TIGER-AI-Lab/MMLU-Pro's ``eval_results/model_outputs_<model>_5shots.zip``
- one JSON list per model of 12,032 questions with ``question_id``, ``answer`` (the key letter), ``pred`` (the
extracted letter or null), ``src`` and ``category``. Unzip them into one folder, e.g.::

    git clone --depth 1 https://github.com/TIGER-AI-Lab/MMLU-Pro /tmp/mmlupro   # or any copy of eval_results/
    mkdir -p /tmp/mmlupro_json && for z in /tmp/mmlupro/eval_results/*.zip; do unzip -o -q "$z" -d /tmp/mmlupro_json; done
    python benchmarks/bench_screen.py /tmp/mmlupro_json

(some archives in the repository are Git LFS pointers or multi-file; the ones that are not zip archives of one JSON
list are skipped and named.) The multi-model log: ``model`` (file name), ``item`` = ``question_id``, ``gold`` =
``answer``, ``pred``, ``correct = pred == gold`` (<NA> when ``pred`` is null), ``family`` (the model-name prefix:
Llama, Mistral, Qwen, ...), ``category``.

Screen: ``--frac`` (3%) of the keys are moved to a distractor some model chose (``mrcstats.stats.screen.
screen_validate``, seed ``--seed``); printed: ROC AUC and precision at K of the score and of every single
signal, the flags at the estimated FDR, and the top flagged items that were *not* injected (candidate real key
errors: question, options, key, the option the strong models chose). DIF: ``--dif-k`` items are made easier for
one family (wrong answers turned right with probability 0.8) and the AUC of MH and logistic DIF is printed.

Usage: python benchmarks/bench_screen.py JSON_DIR [--frac 0.03] [--seed 0] [--dif-k 60] [--show 8]
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
import zipfile
from pathlib import Path

import pandas as pd

_FAMILIES = ("Llama-2", "Meta-Llama-3", "Mistral", "Mixtral", "Qwen", "Yi", "gemma", "gemini", "DeepSeek", "Phi",
             "c4ai", "jamba", "mathstral")


def family(model: str) -> str:
    for f in _FAMILIES:
        if model.lower().startswith(f.lower()):
            return {"Mixtral": "Mistral", "mathstral": "Mistral", "Meta-Llama-3": "Llama-3"}.get(f, f)
    return model


def _records(path: Path) -> list:
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as z:
            names = [n for n in z.namelist() if n.endswith(".json")]
            return json.loads(z.read(names[0])) if len(names) == 1 else []
    return json.loads(path.read_text())


def load(folder: Path) -> tuple[pd.DataFrame, dict]:
    """The multi-model log and the question texts."""
    rows, texts, skipped = [], {}, []
    files = sorted([*folder.glob("*.json"), *folder.glob("*.zip")])
    for f in files:
        name = re.sub(r"^model_outputs_|_5shots(\.json)?(\.zip)?$|\.json$|\.zip$", "", f.name)
        try:
            recs = _records(f)
        except (zipfile.BadZipFile, json.JSONDecodeError, UnicodeDecodeError):
            skipped.append(f.name)
            continue
        n_bad = 0
        for r in recs:
            if not isinstance(r, dict):
                n_bad += 1
                continue
            qid = str(r["question_id"])
            rows.append((name, qid, r["answer"], r.get("pred"), r.get("category")))
            if qid not in texts:
                texts[qid] = (r.get("question"), r.get("options"), r.get("src"))
        if n_bad:
            print(f"  {f.name}: {n_bad} records that are not objects skipped", file=sys.stderr)
    if skipped:
        print(f"  skipped (not a readable JSON list): {', '.join(skipped)}", file=sys.stderr)
    d = pd.DataFrame(rows, columns=["model", "item", "gold", "pred", "category"])
    d["correct"] = pd.array((d["pred"] == d["gold"]).to_numpy(), dtype="boolean")
    d.loc[d["pred"].isna(), "correct"] = pd.NA
    d["family"] = d["model"].map(family)
    from mrcstats.io.schema import validate_log

    return validate_log(d), texts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--frac", type=float, default=0.03)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dif-k", type=int, default=60)
    ap.add_argument("--show", type=int, default=8)
    a = ap.parse_args(argv)
    from mrcstats.stats.dif import dif_validate
    from mrcstats.stats.screen import screen_validate

    t0 = time.time()
    log, texts = load(a.folder)
    J, I = log["model"].nunique(), log["item"].nunique()
    print(f"log: {len(log):,} rows, {J} models, {I:,} items; {int(log['correct'].isna().sum()):,} empty answers "
          f"({time.time() - t0:.0f}s)")
    k = round(a.frac * I)
    t0 = time.time()
    v = screen_validate(log, k, seed=a.seed, progress=True)
    print(f"\nScreen with {k} keys moved to another option (seed {a.seed}; {time.time() - t0:.0f}s):")
    print(v.metrics.to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    m = v.metrics.set_index("signal")
    best = m["auc"].drop("score").max()
    print(f"score AUC {m.loc['score', 'auc']:.4f} vs best single {best:.4f} "
          f"({m['auc'].drop('score').idxmax()}): {'beats' if m.loc['score', 'auc'] > best else 'DOES NOT beat'} "
          "every single signal")
    print(f"precision@K score {m.loc['score', 'precision_at_k']:.4f} vs best single "
          f"{m['precision_at_k'].drop('score').max():.4f}")
    res = v.result
    it = res.items
    inj = set(v.injected["item"])
    fl = it[it["flag"]]
    print(f"flagged at Bayesian FDR <= {res.fdr}: {len(fl)} items, {int(fl['item'].isin(inj).sum())} injected, "
          f"{int((~fl['item'].isin(inj)).sum())} not injected")
    print(f"answer model: {json.dumps(res.model, default=str)}")
    top = it[~it["item"].isin(inj)].head(a.show)
    print(f"\nTop {a.show} items that were NOT injected:")
    for r in top.itertuples():
        q, opts, src = texts.get(r.item, (None, None, None))
        print(f"- item {r.item} ({src}): score {r.score:.2f}, q {r.q_value:.3g}, accuracy {r.accuracy:.2f}, "
              f"r_pb {r.r_pb:.2f}, a {r.a:.2f}; key {r.gold}, strong models chose {r.strong_choice} "
              f"(weighted share {r.strong_share:.2f} vs key {r.gold_strong_share:.2f}), suggested {r.suggested_key}")
        print(f"    Q: {str(q)[:300]!r}")
        print(f"    options: {str(opts)[:400]}")
    t0 = time.time()
    dv = dif_validate(log, "family", a.dif_k, seed=a.seed, group="Llama-2")
    print(f"\nDIF: {a.dif_k} items made easier for family {dv.group!r} (wrong answers turned right with "
          f"probability {dv.rate}; {time.time() - t0:.0f}s):")
    print(dv.metrics.to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    counts = dv.result.table["ets"].value_counts().to_dict()
    print(f"ETS classes over all items x families: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
