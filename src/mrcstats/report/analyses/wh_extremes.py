"""``wh_extremes``: wh-words of the items in the easiest and hardest clusters of a fitted GLMM, Fisher's test."""
from __future__ import annotations

from typing import ClassVar

from mrcstats.errors import InputError
from mrcstats.report.analyses import _tests as T
from mrcstats.report.analyses.base import Analysis, AnalysisSpec, Context, Key, Output, Skip, words
from mrcstats.stats.discrimination import cluster_difficulty


class WhExtremes(Analysis):
    type = "wh_extremes"
    title = "Fisher: wh-words of the easiest and hardest clusters"
    keys: ClassVar[dict[str, Key]] = {"glmm": Key((str,), None, required=True, help="name of a glmm analysis earlier in the spec"),
            "n": Key((int,), 100), "column": Key((str,), "wh_word"), "simulate": Key((bool,), True),
            "B": Key((int,), 2000)}

    def run(self, ctx: Context, a: AnalysisSpec) -> Output:
        res, data, _ga = ctx.glmms.get(a.get("glmm"), (None, None, None))
        if res is None:
            raise Skip(f"the GLMM {a.get('glmm')!r} was not fitted")
        col, n = a.get("column"), a.get("n")
        if col not in data.columns:
            raise InputError(f"no column {col!r} in the data for the wh-word table (join item features with "
                             "`features:`)")
        group = next(iter(dict(res.ranef)))
        k = min(n, len(dict(res.ranef)[group]) // 2)
        cd = cluster_difficulty(res, n=k)
        out = Output(f"Fisher: {words(col)} of the easiest and hardest clusters")
        out.methods_title = "Easiest and hardest clusters"
        e, h = cd.easiest.iloc[0], cd.hardest.iloc[0]
        out.text(f"Easiest {group}: {e['level']} (implied P(correct) {e['probability']:.2f} for the mean model); "
                 f"hardest: {h['level']} ({h['probability']:.2f}).")
        if group != "cluster":
            data = data.assign(cluster=data[group])
        name = T.wh_table(out, ctx.seed, data, cd, col, a.get("simulate"), a.get("B"),
                          f"wh_extremes_{a.get('glmm')}",
                          f"{words(col).capitalize()} of the items in the {k} easiest and {k} hardest "
                          + (f"{group} clusters" if group != "cluster" else "clusters") + " (conditional "
                          + f"modes of the {a.get('glmm')} GLMM; seed 003 Table 3); last row: ratio of column shares.",
                          f"{words(col)}: easiest vs hardest clusters")
        out.headline["easiest_hardest"] = {"easiest": str(e["level"]), "p_easiest": float(e["probability"]),
                                           "hardest": str(h["level"]), "p_hardest": float(h["probability"])}
        out.methods += [(f"The {k} {group} levels with the highest and lowest conditional modes of the "
                         f"{a.get('glmm')} GLMM (implied probability plogis(intercept + mode)); each item's wh-word "
                         "counted once."),
                        T.test_method(out, name)]
        return out
