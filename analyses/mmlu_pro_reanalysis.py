#!/usr/bin/env python
"""Issue 25 re-analysis: public MMLU-Pro outputs of several models, as a new user would run it (PDF report).

Reads TIGER-AI-Lab/MMLU-Pro's ``eval_results/model_outputs_<model>_5shots.zip``, unzipped one folder per model
under DIR (``DIR/<model>/model_outputs_<model>_5shots.json``, one JSON list per model; not committed), writes the
canonical log ``mmlu_pro_log.parquet`` and ``reports/mmlu_pro/mmlu_pro.pdf``: accuracy by model (clustered by the
91 source subsets ``src``), the model comparison, accuracy by category and model, item discrimination by
category and a GLMM with a random intercept per question. Invalid answers (``pred`` null) count as not correct
in every section.

Usage: python analyses/mmlu_pro_reanalysis.py DIR [--out reports/mmlu_pro]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from mrcstats.report.analysis import analysis_parser, display_path

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = analysis_parser(__doc__, REPO, "mmlu_pro")
    args = ap.parse_args(argv)
    root = Path(args.data)
    folders = sorted(p for p in root.iterdir() if p.is_dir() and any(p.glob("*.json"))) if root.is_dir() else []
    if len(folders) < 2:
        print(f"mmlu_pro_reanalysis: {root} not found or holds fewer than 2 model folders with MMLU-Pro JSON "
              "outputs; pass the folder as the first argument", file=sys.stderr)
        return 2
    from mrcstats.errors import MrcstatsError
    from mrcstats.io import read_log, write_log
    from mrcstats.report import build_report

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        log = read_log([str(p) for p in folders], model={str(p): p.name for p in folders},
                       mapping={"item": "question_id", "gold": "answer", "pred": "pred", "cluster": "src"})
    except MrcstatsError as exc:
        print(f"mmlu_pro_reanalysis: {exc}", file=sys.stderr)
        return 2
    if "category" not in log.columns:
        print("mmlu_pro_reanalysis: the outputs have no 'category' field", file=sys.stderr)
        return 2
    log_path = write_log(log, out / "mmlu_pro_log.parquet")
    n_models = log["model"].nunique()
    spec = {
        "title": "MMLU-Pro re-analysis: one interval, one denominator",
        "subtitle": f"Public 5-shot outputs of {n_models} models (TIGER-AI-Lab/MMLU-Pro), read as a new user would",
        "seed": 0,
        "notes": [f"Source: the model_outputs_<model>_5shots.json files of {', '.join(p.name for p in folders)}, "
                  "read with mrcstats.read_log(mapping={item: question_id, gold: answer, pred: pred, cluster: src}). "
                  "The 91 source subsets (src) are the clusters of the intervals; questions without a "
                  "prediction (pred null) are invalid answers."],
        "logs": [str(log_path)],
        "analyses": [
            {"type": "summary", "by": ["model"], "title": "Accuracy"},
            {"type": "compare", "cluster": "cluster", "title": "Model comparison"},
            {"type": "accuracy", "rows": "category", "cols": "model", "title": "Accuracy by category and model"},
            {"type": "discrimination", "cluster": "category", "n": 5},
            {"type": "glmm", "name": "question", "formula": "correct ~ model + (1 | item)", "ranef": False},
        ],
    }
    try:
        res = build_report(spec, out / "mmlu_pro.pdf")
    except MrcstatsError as exc:
        print(f"mmlu_pro_reanalysis: {exc}", file=sys.stderr)
        return 2
    head = {"pdf": display_path(res.pdf, REPO), "pages": res.pages, "rows": len(log), "models": n_models,
            "skipped": list(res.skipped)}
    (out / "headline.json").write_text(json.dumps(head, indent=2) + "\n")
    print(res.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
