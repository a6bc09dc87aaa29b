"""Convert nyu-mll/nlu-test-sets response matrices to a canonical mrcstats log.

The repository (Vania et al., ACL 2021, "Comparing Test Sets with Item Response Theory")
holds ``data/<dataset>_irt_all_coded.csv``: one row per model checkpoint (``userid``, e.g.
``roberta-large_best``; 18 models x 5 checkpoints), one 0/1 column per item. Nothing of it is
committed here: fetch the repository, extract the files to a folder outside the repository
and point this script at it::

    git --git-dir=<mirror> show HEAD:data/mnli_irt_all_coded.csv > /tmp/nlu/mnli_irt_all_coded.csv
    python benchmarks/nlu_test_sets_log.py /tmp/nlu --datasets mnli --out /tmp/nlu_mnli.parquet

Log columns: ``model`` (the userid), ``item`` (the column name), ``cluster`` (the dataset),
``correct``, and ``family`` (the userid without its checkpoint suffix, to hold out all
checkpoints of a model together: ``mrcstats subset-eval --groups family``).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd


def read_matrix(path: Path, checkpoints: str) -> pd.DataFrame:
    wide = pd.read_csv(path)
    if "userid" not in wide.columns:
        raise SystemExit(f"{path}: no userid column; is this an nlu-test-sets *_irt_all_coded.csv file?")
    if checkpoints == "best":
        wide = wide[wide["userid"].str.endswith("_best")]
    dataset = path.name.replace("_irt_all_coded.csv", "")
    long = wide.melt(id_vars="userid", var_name="item", value_name="y")
    bad = ~long["y"].isin([0, 1])
    if bad.any():
        print(f"{path.name}: {int(bad.sum())} cell(s) not 0/1 kept as invalid (<NA>)", file=sys.stderr)
    return pd.DataFrame({"model": long["userid"].astype(str), "item": long["item"].astype(str),
                         "cluster": dataset,
                         "correct": long["y"].where(~bad).astype("Float64").astype("boolean"),
                         "family": long["userid"].str.replace(r"_(best|\d+)$", "", regex=True)})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", help="folder holding the extracted *_irt_all_coded.csv files")
    ap.add_argument("--datasets", default=None, help="comma-separated dataset names (default: all)")
    ap.add_argument("--checkpoints", choices=("all", "best"), default="all",
                    help="all five checkpoints per model (90 respondents) or only _best (18)")
    ap.add_argument("--sample-items", type=int, default=None, metavar="N",
                    help="keep N items drawn at random (seeded) from the chosen datasets")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True, help="output log (.parquet or .csv)")
    args = ap.parse_args(argv)
    folder = Path(args.folder)
    files = sorted(folder.glob("*_irt_all_coded.csv"))
    if args.datasets:
        want = {d.strip() for d in args.datasets.split(",")}
        files = [f for f in files if f.name.replace("_irt_all_coded.csv", "") in want]
    if not files:
        raise SystemExit(f"no *_irt_all_coded.csv files (for {args.datasets or 'any dataset'}) in {folder}")
    log = pd.concat([read_matrix(f, args.checkpoints) for f in files], ignore_index=True)
    if args.sample_items:
        items = np.sort(log["item"].unique())
        rng = np.random.default_rng(args.seed)
        keep = set(rng.choice(items, size=min(args.sample_items, len(items)), replace=False))
        log = log[log["item"].isin(keep)].reset_index(drop=True)
    from mrcstats.io import write_log

    write_log(log, args.out)
    print(f"{log['model'].nunique()} models ({log['family'].nunique()} families) x {log['item'].nunique()} items "
          f"from {len(files)} dataset(s): {len(log)} rows -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
