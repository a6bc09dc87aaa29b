"""What a review changed: each model's accuracy and rank on the log before and after its verdicts were applied
(:func:`mrcstats.io.relabel.apply_verdicts`)."""
from __future__ import annotations

import pandas as pd

__all__ = ["relabel_effect"]


def relabel_effect(before: pd.DataFrame, after: pd.DataFrame, by: str = "model") -> pd.DataFrame:
    """Per model: ``accuracy_before``, ``accuracy_after`` (the one accuracy of :func:`mrcstats.stats.accuracy.
    summarize`: invalid answers count as not correct), ``change`` (after - before), ``items_before``,
    ``items_after`` (items answered) and ``rank_before``, ``rank_after`` (1 = the highest accuracy; ties share the
    lowest rank, R's ``rank(ties.method = "min")``), ordered by ``accuracy_after``."""
    from mrcstats.stats.accuracy import summarize

    def table(log: pd.DataFrame, tag: str) -> pd.DataFrame:
        t = summarize(log, by=[by]).to_frame()[[by, "accuracy"]].rename(columns={"accuracy": f"accuracy_{tag}"})
        t[f"items_{tag}"] = t[by].map(log.groupby(by)["item"].nunique()).astype(int)
        t[f"rank_{tag}"] = t[f"accuracy_{tag}"].rank(ascending=False, method="min").astype(int)
        return t

    out = table(before, "before").merge(table(after, "after"), on=by, how="outer")
    out["change"] = out["accuracy_after"] - out["accuracy_before"]
    cols = [by, "accuracy_before", "accuracy_after", "change", "items_before", "items_after", "rank_before",
            "rank_after"]
    return out[cols].sort_values("accuracy_after", ascending=False, kind="mergesort").reset_index(drop=True)
