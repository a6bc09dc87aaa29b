"""Prompt sensitivity of LLM judges on JUDGE-BENCH's published prompt variants (results/other_prompts/).

JUDGE-BENCH (dmg-illc/JUDGE-BENCH) re-ran three judges (Llama-3.1-8B/70B-Instruct, Mixtral-8x7B-Instruct) on
WMT-23 en-de and zh-en under four prompt variants (a few-shot prompt ``fsp`` and three paraphrases) besides the
regular prompt (results/regular/). The files hold aggregates only -- each judge's correlation with the human
quality scores per prompt, no per-item judgements -- so this script gives the rank-stability part of
:mod:`mrcstats.stats.sensitivity` on the judges × templates matrix (Kendall's W with Friedman's test, the
pairwise template concordance, each judge's range across templates); the item-bootstrap CIs need per-item
scores, which the repository does not publish.

Usage::

    python benchmarks/prompt_sensitivity_judgebench.py GITDIR [--metric spearman]

``GITDIR``: a git directory of JUDGE-BENCH (e.g. the search tool's mirror ``/work/.mirror/dmg-illc+JUDGE-BENCH/repo``)
or a checkout (read with ``git show HEAD:path``).
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd


def _git(gitdir: Path, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={gitdir}", *args], capture_output=True, text=True, check=True).stdout


def _value(obj: dict, metric: str) -> float:
    (inner,) = obj.values()
    return float(inner["corr_coeff"][metric])


def load(gitdir: Path, metric: str) -> dict[str, pd.DataFrame]:
    """``{dataset: judges × templates}`` of the judges' correlation with the humans."""
    files = [f for f in _git(gitdir, "ls-tree", "-r", "--name-only", "HEAD", "results/other_prompts").split()
             if f.endswith(".json")]
    out: dict[str, dict[str, dict[str, float]]] = {}
    for f in files:
        m = re.match(r"results/other_prompts/(wmt-23-[a-z-]+?)_(.+)_tpprompt_(.+)\.json$", f)
        if not m:
            continue
        ds, judge, prompt = m.groups()
        obj = json.loads(_git(gitdir, "show", f"HEAD:{f}").replace("NaN", "null"))
        (key,) = obj
        out.setdefault(ds, {}).setdefault(judge, {})[prompt] = _value(obj[key], metric)
    for ds, judges in out.items():
        reg = json.loads(_git(gitdir, "show", f"HEAD:results/regular/{ds}.json").replace("NaN", "null"))
        for key, val in reg.items():
            name = key.split(" (")[0].replace("Meta-", "")
            if name in judges:
                judges[name]["regular"] = _value(val, metric)
    return {ds: pd.DataFrame(j).T.sort_index()[["regular", "fsp", "paraphrase_1", "paraphrase_2", "paraphrase_3"]]
            for ds, j in sorted(out.items())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("gitdir", type=Path)
    ap.add_argument("--metric", default="spearman", choices=("pearson", "spearman", "kendall"))
    a = ap.parse_args(argv)
    if not a.gitdir.exists():
        print(f"skip: {a.gitdir} does not exist (fetch dmg-illc/JUDGE-BENCH)", file=sys.stderr)
        return 0
    from mrcstats.stats.sensitivity import kendall_w, pair_concordance

    for ds, tab in load(a.gitdir, a.metric).items():
        print(f"\n{ds}: each judge's {a.metric} correlation with the human quality scores, by prompt")
        print(tab.round(4).to_string())
        s = tab.to_numpy(dtype=float)
        w, chi2, p = kendall_w(s)
        conc, per = pair_concordance(s)
        ranks = tab.rank(ascending=False)
        print("  range across prompts: " + ", ".join(f"{j} {tab.loc[j].max() - tab.loc[j].min():.4f}"
                                                       for j in tab.index))
        print("  rank of each judge per prompt: " + "; ".join(f"{c}: " + ",".join(f"{int(v)}" for v in ranks[c])
                                                                for c in ranks.columns))
        print(f"  Kendall's W = {w:.3f} (Friedman chi2 = {chi2:.2f} on {len(tab) - 1} df, p = {p:.3g}); "
              f"template pairs ordering two judges alike: {conc:.3f}")
        iu = np.triu_indices(len(tab), 1)
        print("  per judge pair: " + "; ".join(f"{tab.index[i]} ~ {tab.index[j]} {per[i, j]:.2f}"
                                              for i, j in zip(*iu)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
