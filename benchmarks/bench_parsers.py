"""Validate parser densities against gold WSJ trees, and time cold vs cached feature runs.

Usage::

    python benchmarks/bench_parsers.py ../shared/data/treebank/treebank.zip [--jobs 2] [--limit N]

For every sentence of the treebank sample (``combined/wsj_*.mrg``) the gold tree is
normalised (``-NONE-`` empty elements and the phrases they leave empty removed, the
unlabelled outer bracket as ROOT) and counted. Its words, detokenised, are parsed by
each available parser through :func:`mrcstats.features.compute_features`; the script
prints, per parser, the Pearson r and the mean absolute difference (MAD) between the
parser's per-sentence density and the gold density:

* ``density``: nodes / gold tokens (the seed's nodes per token, tokens held fixed);
* ``density_leaves``: nodes / the parser's own leaves.

``flat`` (ROOT over one preterminal per token) is the naive anchor every parser must
beat. Timings: a cold run (empty cache) and a second run from the cache, same input,
with their ratio, and a check that both give identical tables.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from mrcstats.features import Item, ItemSet, compute_features
from mrcstats.features.parsers.stanza import models_present
from mrcstats.features.trees import count_nodes, leaves, normalize, parse_brackets

_UNESCAPE = {"-LRB-": "(", "-RRB-": ")", "-LCB-": "{", "-RCB-": "}", "-LSB-": "[", "-RSB-": "]"}


def gold_sentences(zip_path: Path, limit: int | None = None) -> pd.DataFrame:
    """Gold sentences: id, text (detokenised leaves), gold nodes, gold leaves."""
    from nltk.tokenize.treebank import TreebankWordDetokenizer

    detok = TreebankWordDetokenizer()
    rows = []
    with zipfile.ZipFile(zip_path) as zf:
        names = sorted(n for n in zf.namelist() if "/combined/" in n and n.endswith(".mrg"))
        if not names:
            sys.exit(f"{zip_path}: no combined/*.mrg files")
        for name in names:
            text = zf.read(name).decode("utf-8", errors="replace")
            for k, tree in enumerate(parse_brackets(text)):
                t = normalize(tree)
                if t is None:
                    continue
                words = [_UNESCAPE.get(w, w) for w in leaves(t)]
                c = count_nodes(t)
                rows.append({"item": f"{Path(name).stem}:{k}", "text": detok.detokenize(words),
                             "gold_nodes": c.nodes, "gold_leaves": c.leaves})
                if limit and len(rows) >= limit:
                    return pd.DataFrame(rows)
    return pd.DataFrame(rows)


def available_parsers() -> list[str]:
    out = []
    if importlib.util.find_spec("stanza") is not None and models_present():
        out.append("stanza")
    if importlib.util.find_spec("linkgrammar") is not None:
        out.append("link-grammar")
    return out


def compare(name: str, nodes: np.ndarray, own_leaves: np.ndarray, gold: pd.DataFrame) -> dict:
    g = gold["gold_nodes"].to_numpy(float) / gold["gold_leaves"].to_numpy(float)
    d_tok = nodes / gold["gold_leaves"].to_numpy(float)
    d_leaf = nodes / own_leaves
    return {"parser": name,
            "r_density": float(np.corrcoef(d_tok, g)[0, 1]), "mad_density": float(np.mean(np.abs(d_tok - g))),
            "r_density_leaves": float(np.corrcoef(d_leaf, g)[0, 1]),
            "mad_density_leaves": float(np.mean(np.abs(d_leaf - g))),
            "mean_parser": float(np.mean(d_leaf)), "mean_gold": float(np.mean(g))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("treebank", type=Path, help="path to treebank.zip (NLTK's 10%% WSJ sample)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None, help="first N sentences only")
    args = ap.parse_args(argv)

    gold = gold_sentences(args.treebank, args.limit)
    print(f"{len(gold)} gold sentences, mean gold density {np.mean(gold.gold_nodes / gold.gold_leaves):.4f}")
    items = ItemSet([Item(item=r.item, cluster=r.item, passage=r.text) for r in gold.itertuples()])
    results = []
    n_flat = 1 + 2 * gold["gold_leaves"].to_numpy(float)
    results.append(compare("flat (anchor)", n_flat, gold["gold_leaves"].to_numpy(float), gold))
    for name in available_parsers():
        with tempfile.TemporaryDirectory(prefix="mrcstats-bench-cache-") as cache:
            t0 = time.perf_counter()
            cold = compute_features(items, parser=name, jobs=args.jobs, cache=cache, verbose=False)
            t_cold = time.perf_counter() - t0
            t0 = time.perf_counter()
            warm = compute_features(items, parser=name, jobs=args.jobs, cache=cache, verbose=False)
            t_warm = time.perf_counter() - t0
        same = cold.to_frame().equals(warm.to_frame())
        f = cold.frame
        res = compare(name, f["nodes_passage"].to_numpy(float), f["leaves_passage"].to_numpy(float), gold)
        res.update({"cold_s": t_cold, "cached_s": t_warm, "speedup": t_cold / t_warm, "identical": same,
                    "fallback_sentences": int(cold.parse_fallbacks), "version": cold.parser_version})
        results.append(res)
    if len(results) == 1:
        print("no parser available (install link-grammar or stanza + models); only the anchor is shown")
    table = pd.DataFrame(results).set_index("parser")
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.precision", 4):
        print(table.drop(columns=["version"], errors="ignore"))
    for r in results[1:]:
        print(f"{r['parser']}: cold {r['cold_s']:.1f} s, cached {r['cached_s']:.2f} s "
              f"(cold/cached ratio {r['speedup']:.0f}x), identical tables: {r['identical']}; {r['version']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
