"""Every code example in README.md and in the documentation pages (docs/**/*.md) runs: Python blocks are
executed, CLI lines are run in-process.

The examples run in a temporary folder holding small generated stand-ins for the files they name
(``results.csv``, ``log.parquet``, ``log.csv``, ``TABLE.csv``, ``trees.csv``, ``log.jsonl``), with
substitutions for speed: ``parser="auto"``/``--parser link-grammar`` become ``none`` (the parsers are
tested in tests/features), ``nsim=1000`` becomes 20, and optional ``[--flag VALUE]`` parts are dropped. What cannot run offline on
generated data is skipped by a rule with its reason (``SKIP``); a block that no rule covers must run, so
a new README or docs example is tested as soon as it is written (a new docs page included). Blocks executed
by the docs build itself (```` ```python exec="1" ````, ```` ```console exec="1" ````: the tutorials) are left to
that build (tests/test_docs.py), and ```` ```text ```` blocks are not run.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ._docblocks import blocks, cli_lines

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: the README and every documentation page, in a stable order
PAGES = (README, *sorted((ROOT / "docs").rglob("*.md")))

#: (pattern in a CLI line or Python block, reason it is not run here)
SKIP: tuple[tuple[str, str], ...] = (
    ("../shared/data", "needs the shared real data (its readers are tested in tests/io with that data)"),
    ("RQA/", "needs maskcode outputs (tests/io/test_mskqa.py, tests/stats/test_masking.py)"),
    ("MskCal_2/", "needs maskcode MskCal outputs (tests/stats/test_mskcal.py)"),
    ("rqa.parquet", "made from the shared maskcode outputs above"),
    ('"results/task 5"', "needs the ELAGENT result files (tests/io/test_sources.py)"),
    ("mrcstats query", "sends requests to a model endpoint (tests/query use a local stub)"),
    ("models download", "downloads Stanza models (network)"),
    ("make demo", "make targets build a venv (the demo itself: tests/report/test_demo.py)"),
    ("make test", "make targets build a venv"),
    ("mrcstats demo", "the demo report: tests/report/test_demo.py"),
    ("reports/demo.yaml", "made by mrcstats demo (tests/report/test_demo.py)"),
    ("Rscript", "R parity: tests/models/test_r_parity.py"),
    ("ds/", "a log dataset folder (mrcstats ingest --dataset): tests/io/test_dataset.py, tests/models/test_outofcore.py"),
    ("sched:8786", "needs a running Dask scheduler (the tests use a LocalCluster)"),
    ("SLURMCluster", "needs dask-jobqueue and a batch system"),
)


#: pages whose examples need files of their own (real tool logs, generated datasets) and are run by a test
#: beside them, on those files -- not here on the generic stand-ins
OWN_TESTS: dict[str, str] = {
    "docs/datasets.md": "tests/test_docs_datasets.py",
    "docs/formats.md": "tests/test_docs_formats.py",
    "docs/harness.md": "tests/test_docs_harness_scores.py",
    "docs/scores.md": "tests/test_docs_harness_scores.py",
    "docs/inspect.md": "tests/conformance/test_inspect_docs.py",
    "docs/models.md": "tests/models/test_docs_models.py",
    "docs/clmm.md": "tests/models/test_clmm.py",
    "docs/screening.md": "tests/test_docs_screening.py",
    "docs/ranks.md": "tests/test_docs_ranks.py",
    "docs/variance.md": "tests/test_docs_variance.py",
    "docs/subsets_irt.md": "tests/test_docs_subsets_irt.py",
    "docs/fuzzing.md": "tests/fuzz (its commands run the fuzz suite itself)",
}


def _strip(cmd: str) -> str:
    """Drop trailing comments (outside quotes) and optional ``[...]`` parts; fast parser."""
    lex = shlex.shlex(cmd, posix=True, punctuation_chars=False)
    lex.whitespace_split = True
    lex.commenters = "#"
    words = list(lex)
    text = " ".join(shlex.quote(w) for w in words)
    text = re.sub(r"'?\[[^\]]*\]'?", "", text)
    return text.replace("--parser link-grammar", "--parser none")


def _skip_reason(text: str) -> str | None:
    return next((why for pat, why in SKIP if pat in text), None)


def _cases() -> list:
    cases = []
    for page in PAGES:
        name = page.relative_to(ROOT).as_posix()
        if name in OWN_TESTS:
            assert (ROOT / OWN_TESTS[name].split(" ")[0]).exists(), f"{name}: its test {OWN_TESTS[name]} is gone"
            continue
        for line, lang, body in blocks(page):
            if lang == "python":
                cases.append(pytest.param("python", body, id=f"{name}:L{line}-python"))
            elif lang == "bash":
                for i, cmd in enumerate(cli_lines(body)):
                    cases.append(pytest.param("bash", cmd, id=f"{name}:L{line}-bash{i}"))
            elif lang == "yaml":
                cases.append(pytest.param("yaml", body, id=f"{name}:L{line}-yaml"))
    return cases


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """Generated stand-ins for the files the README names."""
    from mrcstats.tasks.simulate import simulate_log

    d = tmp_path_factory.mktemp("readme")
    log = simulate_log(seed=1, models=("gpt-4", "llama", "mistral"), n_passages=12, questions_per_passage=3,
                       masking_rates=(0,), conditions=("regular",), trials=1).log
    res = log.rename(columns={"item": "question_id", "cluster": "src"})
    res["LLM"] = res["model"]
    res.to_csv(d / "results.csv", index=False)
    # what `mrcstats ingest results.csv ... --out log.parquet` writes, with the docs' GLMM factor LLM
    log.assign(LLM=log["model"]).to_parquet(d / "log.parquet")
    pd.DataFrame([[12, 5, 3], [7, 9, 11]], index=["factual", "counterfactual"],
                 columns=["right", "wrong", "invalid"]).to_csv(d / "TABLE.csv")
    pd.DataFrame({"item": ["a", "b"], "tree": ["(ROOT (S (NP (DT The) (NN cat)) (VP (VBD sat))))",
                                              "(ROOT (S (NP (PRP It)) (VP (VBD rained))))"]}).to_csv(
        d / "trees.csv", index=False)
    # models with their own intercept and slope of x, items with their own difficulty: the README's
    # (1 + x | model) + (1 | item) fit is not singular, so its profile intervals exist (a singular fit's are refused)
    rng = np.random.default_rng(6)
    model, item, x = rng.integers(0, 6, 1200), rng.integers(0, 50, 1200), rng.normal(size=1200)
    eta = 0.4 * x + rng.normal(0, 0.8, 6)[model] + rng.normal(0, 0.5, 6)[model] * x + rng.normal(0, 1.0, 50)[item]
    lc = pd.DataFrame({"model": [f"m{i + 1}" for i in model], "item": item.astype(str), "x": x,
                       "correct": (rng.random(1200) < 1 / (1 + np.exp(-eta))).astype(int)})
    lc.to_csv(d / "log.csv", index=False)
    q = log.head(12).copy()
    q["status"] = "ok"
    q["prompt"] = "What is 1 + 1? Answer in brackets."
    q[["model", "item", "trial", "condition", "cluster", "correct", "response", "gold", "pred", "status",
       "prompt"]].to_json(d / "log.jsonl", orient="records", lines=True)
    return d


@pytest.fixture(scope="module")
def namespace(workdir):
    """Variables the Python examples assume (``df``, ``newdata``, ``log``, ``glmm_result``, ``features``)."""
    import mrcstats

    rng = np.random.default_rng(1)
    n = 400
    df = pd.DataFrame({"passage": rng.integers(0, 40, n).astype(str), "scaled_tok": rng.normal(size=n),
                       "LLM": rng.choice(["gpt4", "llama", "mistral"], n)})
    eta = 0.5 * (df.LLM == "gpt4") - 0.4 * (df.LLM == "llama") + 0.3 * df.scaled_tok
    df["correct"] = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
    df["x"], df["cond"], df["g"] = df["scaled_tok"], rng.choice(["a", "b"], n), (df["passage"].astype(int) % 8)
    from mrcstats.tasks.simulate import simulate_log

    # enough passages for the examples' 100 easiest / hardest clusters (RACE-h has 1,000+)
    log = simulate_log(seed=2, n_passages=220, questions_per_passage=2, masking_rates=(0,), conditions=("regular",),
                       trials=1).log
    feats = mrcstats.features(log, parser="none")
    return {"mrcstats": mrcstats, "df": df, "newdata": df.head(5), "log": log, "features": feats,
            "glmm_result": mrcstats.glmer("correct ~ scaled_tok + (1 | cluster)", log)}


@pytest.mark.parametrize("lang,code", _cases())
def test_readme_example(lang, code, workdir, namespace, monkeypatch, capsys):
    why = _skip_reason(code)
    if lang == "yaml":
        why = why or "a spec reference (every key is checked by tests/report/test_spec.py)"
    if why:
        pytest.skip(why)
    monkeypatch.chdir(workdir)
    if lang == "python":
        if code.lstrip().startswith("# src/mrcstats/report/analyses/"):  # a plug-in template: it must import
            exec(compile(code, "README", "exec"), {})  # noqa: S102 - the README is ours
            return
        code = code.replace('parser="auto"', 'parser="none"').replace("nsim=1000", "nsim=20")
        exec(compile(code, "README", "exec"), {**namespace})  # noqa: S102 - the README is ours
        return
    from mrcstats.cli import main

    argv = shlex.split(_strip(code))
    assert argv[0] == "mrcstats", argv
    code_ = main(argv[1:])
    err = capsys.readouterr().err
    assert code_ == 0, f"{code}\n{err[-1500:]}"
