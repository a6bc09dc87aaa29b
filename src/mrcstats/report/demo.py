"""The demo report: a RACE-like log with known truth, made by mrcstats itself, analysed end to end.

:func:`run_demo` simulates a log with :func:`mrcstats.tasks.simulate.simulate_log`
(three models, passages with four questions each, four masking conditions, masking
rates 0-100 %, two trials; a binomial GLMM with a random intercept per passage
generates correctness), writes it with its spec (``demo.yaml``, an example of
the spec format) and builds ``demo.pdf`` with :func:`mrcstats.report.build_report`:
accuracy summary, the GLMM on the unmasked rows (fixed effects against the
simulated truth, random effects), Fisher tests, item discrimination (P_d) and
masking curves with the NA indicator. Native engine only: no R, no downloaded model.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mrcstats._files import write_text_atomic
from mrcstats._repr import Result

#: simulation settings of the demo (kept small enough to run in seconds)
DEMO_SIM: dict[str, Any] = {"n_passages": 200, "questions_per_passage": 4, "trials": 2,
                            "masking_rates": tuple(range(0, 101, 10))}


def _sd(values: Any) -> float:
    """Sample standard deviation (n − 1)."""
    import numpy as np

    return float(np.std(np.fromiter(values, dtype=float), ddof=1))


def demo_spec(log_name: str, truth: dict[str, Any], seed: int) -> dict[str, Any]:
    """The spec of the demo report (also written as ``demo.yaml``)."""
    fixef = {k: float(v) for k, v in truth["fixef"].items()}
    return {
        "title": "mrcstats demo report",
        "subtitle": "A simulated RACE-like evaluation: three models, passages with several questions, "
                    "masking conditions, known truth",
        "seed": seed,
        "notes": [
            f"The log was simulated by mrcstats.tasks.simulate.simulate_log(seed={seed}, "
            + ", ".join(f"{k}={v!r}" for k, v in DEMO_SIM.items() if k != "masking_rates")
            + ", masking_rates=0..100 step 10). True model on the unmasked rows: "
            f"{truth['formula']} with treatment contrasts (reference model {truth['reference_model']}), "
            f"passage SD {truth['sd_passage']}; each masking condition lowers the log-odds linearly in the "
            f"masking rate (slopes per 100 %: "
            + ", ".join(f"{c} {v:g}" for c, v in truth["masking_slope"].items())
            + f"); {truth['invalid_rate']:.0%} of the answers are made invalid at random.",
            ("The truth describes the valid answers: the invalid ones are drawn at random, independently of the "
             "model, item and correctness. The GLMM checked against the truth therefore leaves the invalid answers "
             "out (invalid: exclude); counted as wrong, they would lower every model's log-odds, most for the "
             "strongest model, and the check would compare unlike with unlike. The accuracy tables count them as "
             "not correct, as everywhere else."),
            (f"The {len(truth['u'])} passage effects drawn for this log have SD {_sd(truth['u'].values()):.3f} "
             f"(the population SD of the simulation is {truth['sd_passage']:g}): an estimated passage SD is "
             "compared with both."),
        ],
        "logs": [log_name],
        "analyses": [
            {"type": "summary", "by": ["model"], "filter": {"masking_rate": 0, "condition": "regular"},
             "title": "Accuracy on unmasked items"},
            {"type": "compare", "filter": {"masking_rate": 0, "condition": "regular"}, "cluster": "cluster",
             "title": "Model comparison on unmasked items"},
            {"type": "glmm", "name": "token count", "formula": truth["formula"], "filter": {"masking_rate": 0},
             "invalid": "exclude", "nagq": 1, "engine": "native", "drop1": True, "gvif": True, "truth": fixef,
             "truth_sd": {"cluster.(Intercept)": float(truth["sd_passage"])},
             "sigma_table": {"feature": "scaled_tok", "factor": "model", "raw": "n_tokens",
                             "label": "Token count"},
             "loess": True, "ranef": True},
            {"type": "wh_extremes", "glmm": "token count", "n": 50},
            {"type": "contingency", "rows": "condition", "cols": "correct", "tests": ["fisher", "chisq"],
             "filter": {"masking_rate": 50, "condition": ["strict", "lenient"]},
             "title": "strict vs lenient masking at MR = 50 %"},
            {"type": "discrimination", "filter": {"masking_rate": 0}, "cutoffs": [0, 0.1, 0.2, 0.5], "n": 50,
             "bootstrap": 500},
            {"type": "masking"},
            {"type": "accuracy", "rows": "condition", "cols": "model", "filter": {"masking_rate": 50},
             "title": "Accuracy at masking rate 50 % (mean over 2 trials)"},
        ],
    }


@dataclass(frozen=True, repr=False)
class DemoResult(Result):
    """What :func:`run_demo` wrote: the report, the log and its summary, the simulated truth."""

    report: Any
    log: Path
    ingest: dict[str, Any] = field(default_factory=dict)
    by_model: list[dict[str, Any]] = field(default_factory=list)
    truth: dict[str, Any] = field(default_factory=dict)

    @property
    def headline(self) -> dict[str, Any]:
        return dict(self.report.headline)

    def to_dict(self) -> dict[str, Any]:
        return {**self.report.to_dict(), "log": str(self.log), "ingest": self.ingest, "by_model": self.by_model,
                "truth": {k: v for k, v in self.truth.items() if k != "u"}}

    def to_frame(self) -> Any:
        """Accuracy by model (the rows of ``demo_summary.md``)."""
        import pandas as pd

        return pd.DataFrame(self.by_model)

    def summary(self) -> str:
        return self.report.summary()


def run_demo(outdir: str | Path = "reports", seed: int = 0) -> DemoResult:
    """Simulate the demo log, write ``demo_log.parquet``, ``demo.yaml`` and ``demo_summary.{md,json}``, build
    ``demo.pdf`` and the interactive ``demo.html``; the result's ``headline`` has the recovered fixed effects beside the truth."""
    import yaml

    from mrcstats._jsonout import dumps
    from mrcstats.io import log_stats, write_log
    from mrcstats.report.build import build_report
    from mrcstats.stats.accuracy import summarize
    from mrcstats.tasks.simulate import simulate_log

    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    sim = simulate_log(seed=seed, **DEMO_SIM)
    log, truth = sim.log, sim.truth
    log_path = write_log(log, out / "demo_log.parquet")
    spec = demo_spec("demo_log.parquet", truth, seed)
    text = ("# mrcstats report spec of the demo (mrcstats demo writes it; mrcstats report demo.yaml --out demo.pdf "
            "rebuilds the PDF)\n" + yaml.safe_dump(spec, sort_keys=False, allow_unicode=True, width=100))
    write_text_atomic(out / "demo.yaml", text)
    report = build_report(out / "demo.yaml", out / "demo.pdf", html=True)
    by_model = summarize(log, by=["model"])
    res = DemoResult(report, Path(log_path), log_stats(log), by_model.to_dict()["groups"], dict(truth))
    head = (f"Simulated log `{log_path}` ({len(log)} rows, seed {seed}); report `{report.pdf}` "
            f"({report.pages} pages), interactive `{report.html}`.")
    md = f"# mrcstats demo\n\n{head}\n\n## Accuracy by model\n\n```\n{by_model.summary()}\n```\n"
    write_text_atomic(out / "demo_summary.md", md)
    write_text_atomic(out / "demo_summary.json", dumps(res.to_dict(), indent=2) + "\n")
    return res
