"""``cat``: an adaptive run of one model of the log replayed against an item bank (issue 40).

The bank is a file from ``mrcstats cat calibrate`` (``bank:``) or, without one, calibrated on the log's
*other* models (leave that model out). Shows the ability trace, the items asked, and the predicted full
accuracy with its interval against the number of items, beside the model's actual accuracy on the bank's items.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from mrcstats.report import figures as F
from mrcstats.report.analyses.base import Analysis, AnalysisSpec, Context, Key, Output
from mrcstats.report.tables import Table
from mrcstats.stats.cat import calibrate, load_bank, predict_accuracy, replay

_NONE = type(None)


class Cat(Analysis):
    type = "cat"
    title = "Adaptive testing"
    keys: ClassVar[dict[str, Key]] = {
        "model": Key((str,), None, required=True, help="the model of the log to run adaptively"),
        "bank": Key((str, _NONE), None, help="item bank file (default: calibrated on the log's other models)"),
        "max_items": Key((int,), 50),
        "topk": Key((int,), 5),
        "every": Key((int,), 5, help="predict the full accuracy after every this many items"),
    }

    def check(self, opts: dict[str, Any], err: Any, base: Any) -> None:
        if opts.get("bank"):
            p = Path(opts["bank"])
            if not p.is_absolute():
                p = Path(base) / p
            if not p.is_file():
                raise err("bank", f"no such item bank {str(p)!r} (a file `mrcstats cat calibrate --out` wrote)")
            opts["bank"] = str(p)
        if opts["max_items"] < 1 or opts["every"] < 1:
            raise err("max_items", "max_items and every must be whole numbers >= 1")

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        data = ctx.rows(a)
        model = a.get("model")
        if a.get("bank"):
            bank = load_bank(a.get("bank"))
            how = f"item bank {Path(a.get('bank')).name}"
        else:
            bank = calibrate(data[data["model"].astype(str) != model], screen=False, progress=False)
            how = f"item bank calibrated on the log's other {data['model'].nunique() - 1} models"
        held = data[data["model"].astype(str) == model]
        res = replay(bank, held, model, max_items=a.get("max_items"), topk=a.get("topk"), seed=ctx.seed)
        tr = res.trace
        first = held.drop_duplicates("item")
        ans = dict(zip(first["item"].astype(str), first["correct"].astype("boolean").fillna(False).astype(bool)))
        inbank = [i for i in bank.items["item"] if i in ans]
        actual = float(np.mean([ans[i] for i in inbank]))
        pos = {it: k for k, it in enumerate(bank.items["item"])}
        idx = np.array([pos[i] for i in tr["item"]])
        y = tr["correct"].astype(float).to_numpy()
        counts = sorted({*range(a.get("every"), len(tr) + 1, a.get("every")), len(tr)})
        preds = [predict_accuracy(bank, idx[:n], y[:n], seed=ctx.seed, draws=200) for n in counts]
        curve = pd.DataFrame({"items": counts, "predicted": [p.accuracy for p in preds],
                              "lo": [p.ci[0] for p in preds], "hi": [p.ci[1] for p in preds]})
        out = Output(a.get("title") or f"Adaptive testing: {model}")
        out.figure(F.cat_trace_plot(tr, curve, actual), f"a{a.index}_cat_trace",
                   f"Left: ability (EAP ± 2 posterior SD) after each item. Right: predicted full accuracy with its "
                   f"95% interval against the number of items; the dashed line is {model}'s actual accuracy on the "
                   f"{len(inbank)} bank items it answered.")
        curve["error"] = curve["predicted"] - actual
        out.table(Table(curve.rename(columns={"items": "Items", "predicted": "Predicted", "lo": "95% low",
                                              "hi": "95% high", "error": "Error"}),
                        caption=f"Predicted full accuracy against the number of items asked ({how}); actual "
                                f"{actual:.4f}.", label=f"a{a.index}_cat_curve"))
        shown = tr[["step", "item", "content", "correct", "ability", "ability_se"]]
        out.table(Table(shown.rename(columns={"step": "Step", "item": "Item", "content": "Content",
                                              "correct": "Correct", "ability": "θ after", "ability_se": "SE"}),
                        caption="The items asked, in order, with the ability estimate after each answer.",
                        label=f"a{a.index}_cat_items"))
        for n in res.notes:
            out.note(n)
        out.headline["cat"] = {"model": model, "items_asked": res.items_asked, "predicted": res.prediction.accuracy,
                               "ci": list(res.prediction.ci), "actual": actual}
        out.methods.append(
            f"Adaptive testing ({how}, {bank.irt_model.upper()}): next item of maximum Fisher information at the EAP "
            f"ability (N(0, 1) prior), content balancing over the bank's groups, randomesque choice among the "
            f"{a.get('topk')} most informative; predicted accuracy = (observed answers + expected answers of the "
            f"items not asked) / N; interval: {res.prediction.method}.")
        return out
