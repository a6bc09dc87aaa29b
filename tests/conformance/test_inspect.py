"""mrcstats against logs Inspect AI itself wrote (tests/conformance/inspect/, made offline with mock models by
scripts/tool_fixtures/inspect_fixtures.py; manifest.json holds inspect-ai's version, its own headline numbers
``results.scores`` and each sample's scores as ``read_eval_log`` reads them).

Every fixture: keys, per-sample correctness and score, skipped counts, and the headline (epoch reducer within
each sample, then mean and stderr) equal the tool's. Then issue 23's Inspect behaviours one by one: zstd
members, damaged archives (one line, exit 2), errored / fail-fast / SIGINT samples, the SIGKILL journal,
reducers in ``summary``, graded scores, invalidated samples, ``edit_score``.
"""
from __future__ import annotations

import json
import math
import shutil
import struct
import warnings
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from mrcstats.cli import main
from mrcstats.errors import InputError
from mrcstats.io import read_log
from mrcstats.io.inspect_ai import read_inspect
from mrcstats.io.source import load_source
from mrcstats.stats.headline import inspect_headline, reduce_epochs

HERE = Path(__file__).resolve().parent / "inspect"
MANIFEST = json.loads((HERE / "manifest.json").read_text(encoding="utf-8"))
LOGS: dict[str, dict] = MANIFEST["logs"]
#: Inspect's value_to_float, written out here from its documentation (C 1, P 0.5, I and N 0, numbers as is)
TO_FLOAT = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}


def _float(v) -> float:
    return TO_FLOAT[v] if isinstance(v, str) else float(v)


def _read(name: str, **kw) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_log(HERE / name, **kw)


def _scorers(rec: dict) -> list[str]:
    names: list[str] = []
    for s in rec["sample_scores"]:
        names += [k for k in s["scores"] if k not in names]
    return names


def test_manifest_is_the_tools():
    assert MANIFEST["tool"] == "inspect-ai" and MANIFEST["version"]
    assert set(LOGS) == {p.name for p in HERE.iterdir() if p.suffix in (".eval", ".json") and p.name != "manifest.json"}
    total = sum(p.stat().st_size for p in HERE.iterdir())
    assert total < 1_000_000, f"fixtures grew to {total} bytes"


@pytest.mark.parametrize("name", sorted(LOGS))
def test_rows_match_the_tools_samples(name):
    rec = LOGS[name]
    log = _read(name)
    first = _scorers(rec)[0]
    scored = [s for s in rec["sample_scores"] if s["scores"]]
    task = rec["task"]
    assert set(log["model"]) == {rec["model"]}
    want = {(f"{task}:{s['id']}", s["epoch"] - 1): s["scores"][first] for s in scored}
    got = {(r.item, r.trial): r for r in log.itertuples()}
    assert set(got) == set(want)
    graded = any(v not in ("C", "I", "N") for v in want.values())
    for key, v in want.items():
        r = got[key]
        if v == "N":  # no answer: invalid (score and correct <NA>), 0 only in the headline (value_to_float)
            assert pd.isna(r.score) and pd.isna(r.correct)
            continue
        assert r.score == pytest.approx(_float(v), abs=1e-12)
        if graded:
            assert pd.isna(r.correct)
        else:
            assert r.correct == (v == "C")
        assert r.scorer == first
    assert int(log["invalidated"].sum()) == sum(s["invalidated"] for s in scored)


@pytest.mark.parametrize("name", sorted(LOGS))
def test_skipped_counts(name):
    rec = LOGS[name]
    log = _read(name)
    unscored = [s for s in rec["sample_scores"] if not s["scores"]]
    skipped = dict(log.attrs["skipped"])
    cancelled = sum(1 for s in unscored if (s["error"] or "").startswith("CancelledError"))
    assert skipped.pop("Inspect sample cancelled when the run stopped (no score)", 0) == cancelled
    assert skipped.pop("Inspect sample raised an error (no score)", 0) == len(unscored) - cancelled
    never = rec["dataset_samples"] * rec["epochs"] - rec["samples_in_log"]
    if rec["status"] == "success":
        assert never == 0
    else:
        reason = ("not run: Inspect run killed (no header.json)" if name == "sigkill.eval"
                  else f"not run: Inspect log status {rec['status']!r}")
        assert skipped.pop(reason) == never > 0
    assert skipped == {}


def _headline_cases() -> list:
    cases = []
    for name, rec in sorted(LOGS.items()):
        for sc in rec.get("scores") or []:
            cases.append(pytest.param(name, sc, id=f"{name}-{sc['name']}-{sc['reducer']}"))
    return cases


@pytest.mark.parametrize("name,sc", _headline_cases())
def test_headline_equals_inspects_results(name, sc):
    """``results.scores`` of the log: the declared reducer within each sample, then accuracy/mean and stderr."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = read_inspect(load_source(HERE / name), scorer=sc["scorer"])
    head = inspect_headline(rows).to_frame()
    reducer = sc["reducer"] or LOGS[name]["reducers"][0]
    row = head[head["reducer"] == reducer]
    assert len(row) == 1
    value = sc["metrics"].get("accuracy", sc["metrics"].get("mean"))
    assert row["value"].iloc[0] == pytest.approx(value, abs=1e-12)
    assert row["stderr"].iloc[0] == pytest.approx(sc["metrics"]["stderr"], abs=1e-12)
    assert row["samples"].iloc[0] == sc["scored_samples"]


# ------------------------------------------------------------------------------ issue 23, item 1: zstd
def test_eval_members_are_zstd_and_read():
    with zipfile.ZipFile(HERE / "scorers.eval") as zf:
        assert {i.compress_type for i in zf.infolist()} == {93}
        if getattr(zipfile, "ZIP_ZSTANDARD", None) != 93:  # Python < 3.14: the stdlib refuses them
            with pytest.raises(NotImplementedError):
                zf.read("header.json")
    log = _read("scorers.eval")
    assert len(log) == 5 and log.attrs["format"] == "inspect"


def _central_record(data: bytes, name: bytes) -> int:
    """Offset of the central directory record of member ``name``."""
    cd = data.find(b"PK\x01\x02")
    while cd >= 0:
        n = struct.unpack("<H", data[cd + 28:cd + 30])[0]
        if data[cd + 46:cd + 46 + n] == name:
            return cd
        cd = data.find(b"PK\x01\x02", cd + 4)
    raise AssertionError(name)


def _data_start(data: bytes, info: zipfile.ZipInfo) -> int:
    n_name, n_extra = struct.unpack("<HH", data[info.header_offset + 26:info.header_offset + 30])
    return info.header_offset + 30 + n_name + n_extra


def _damage(tmp_path: Path, how: str) -> Path:
    path = HERE / "scorers.eval"
    if how.startswith("deflate"):  # the archive as older Inspect wrote it: every member deflated
        import zstandard

        data = path.read_bytes()
        path = tmp_path / "deflate_src.eval"
        with zipfile.ZipFile(HERE / "scorers.eval") as zin, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zout:
            for i in zin.infolist():
                raw = data[_data_start(data, i):_data_start(data, i) + i.compress_size]
                with zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True) as r:
                    zout.writestr(i.filename, r.read())
        assert len(read_log(path)) == 5  # the intact deflate archive reads
        how = how.removeprefix("deflate_")
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("header.json")
    cd = _central_record(data, b"header.json")
    if how == "truncated":
        data = data[: len(data) // 2]
    elif how == "member_bytes":  # garbage inside the compressed stream of header.json
        start = _data_start(data, info)
        for i in range(start + 8, start + 40):
            data[i] ^= 0x5A
    elif how == "unknown_method":
        data[cd + 10:cd + 12] = struct.pack("<H", 99)
    elif how == "negative_offset":
        data[cd + 42:cd + 46] = struct.pack("<I", 0xFFFFFF00)
    elif how == "not_a_zip":
        data = bytearray(b"PK\x03\x04" + b"\x00" * 200)
    p = tmp_path / f"{how}.eval"
    p.write_bytes(bytes(data))
    return p


@pytest.mark.parametrize("how", ["truncated", "member_bytes", "unknown_method", "negative_offset", "not_a_zip",
                                 "deflate_member_bytes", "deflate_negative_offset"])
def test_damaged_archive_is_one_line_exit_2(tmp_path, capsys, how):
    p = _damage(tmp_path, how)
    with pytest.raises(InputError) as exc:
        read_log(p)
    msg = str(exc.value)
    assert str(p) in msg and "\n" not in msg
    if how.removeprefix("deflate_") in ("member_bytes", "unknown_method", "negative_offset"):
        assert "'header.json'" in msg
    code = main(["summary", str(p)])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err


# ------------------------------------------------------------- item 2: errored, fail-fast, interrupted runs
def test_errored_samples_are_skipped_not_wrong():
    rec = LOGS["errored.eval"]
    with pytest.warns(UserWarning, match=r"scripted failure on 'What is 3\*3\?'"):
        log = read_log(HERE / "errored.eval")
    assert log.attrs["skipped"] == {"Inspect sample raised an error (no score)": rec["errored_in_log"]}
    assert not log["item"].str.endswith(":40").any()  # the errored sample is not scored as wrong
    head = inspect_headline(log).to_frame().iloc[0]
    assert head["value"] == pytest.approx(rec["scores"][0]["metrics"]["accuracy"], abs=1e-12)


@pytest.mark.parametrize("name,status", [("failfast.eval", "error"), ("sigint.eval", "cancelled"),
                                         ("sigint.json", "cancelled")])
def test_stopped_runs_are_read(name, status, capsys):
    rec = LOGS[name]
    assert rec["status"] == status
    with pytest.warns(UserWarning, match=f"status '{status}'"):
        log = read_log(HERE / name)
    assert len(log) == sum(1 for s in rec["sample_scores"] if s["scores"]) > 0
    assert main(["summary", str(HERE / name), "--json"]) == 0
    out, err = capsys.readouterr()
    assert "skipped while reading" in err and json.loads(out)["groups"][0]["n"] == len(log)


# ------------------------------------------------------------------------------ item 3: SIGKILL, no header
def test_killed_run_reads_its_journal():
    rec = LOGS["sigkill.eval"]
    with zipfile.ZipFile(HERE / "sigkill.eval") as zf:
        assert "header.json" not in zf.namelist() and "_journal/start.json" in zf.namelist()
    with pytest.warns(UserWarning, match="killed"):
        log = read_log(HERE / "sigkill.eval")
    assert set(log["model"]) == {"mockllm/model"}
    assert log["item"].str.startswith(f"{rec['task']}:").all()
    assert log.attrs["skipped"] == {"not run: Inspect run killed (no header.json)":
                                    rec["dataset_samples"] * rec["epochs"] - rec["samples_in_log"]}


# ----------------------------------------------------------------------- item 4: reducers in summary
@pytest.mark.parametrize("name", ["epochs_at_least_2.eval", "epochs_pass_at_2.eval", "epochs_two_reducers.eval"])
def test_summary_shows_trial_level_and_tool_headline(name, capsys, tmp_path):
    rec = LOGS[name]
    assert main(["summary", str(HERE / name), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["figure"].startswith("trial level")
    assert out["groups"][0]["n"] == 15  # every epoch a row
    heads = {g["reducer"]: g for g in out["tool_headline"]["groups"]}
    for sc in rec["scores"]:
        if sc["scorer"] == "match":
            assert heads[sc["reducer"]]["value"] == pytest.approx(sc["metrics"]["accuracy"], abs=1e-12)
            assert heads[sc["reducer"]]["stderr"] == pytest.approx(sc["metrics"]["stderr"], abs=1e-12)
    assert main(["summary", str(HERE / name)]) == 0
    text = capsys.readouterr().out
    assert "trial level" in text and "Inspect headline" in text and f"reducer {rec['reducers'][0]}" in text
    # the reducer survives the canonical log written to Parquet
    pq = tmp_path / "log.parquet"
    assert main(["ingest", str(HERE / name), "--out", str(pq)]) == 0
    capsys.readouterr()
    assert main(["summary", str(pq), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["tool_headline"]["groups"] == out["tool_headline"]["groups"]
    # and in a dataset folder (ingest --dataset), read through DuckDB
    assert main(["ingest", str(HERE / name), "--dataset", str(tmp_path / "ds")]) == 0
    capsys.readouterr()
    assert main(["summary", str(tmp_path / "ds"), "--json"]) == 0
    lazy = json.loads(capsys.readouterr().out)
    for a, b in zip(lazy["tool_headline"]["groups"], out["tool_headline"]["groups"], strict=True):
        assert a == pytest.approx(b, abs=1e-12)


def test_reducers_on_hand_values():
    assert reduce_epochs("mean", [1, 0, 1]) == pytest.approx(2 / 3)
    assert reduce_epochs("median", [0, 0.5, 1]) == 0.5
    assert reduce_epochs("mode", [1, 0.5, 0], ["C", "P", "I"]) == 1.0  # a tie: the first seen
    assert reduce_epochs("mode", [1, 0, 0], ["C", "N", "I"]) == 1.0  # N and I are different values to mode
    assert reduce_epochs("max", [0, 0.5]) == 0.5
    assert reduce_epochs("at_least_2", [1, 0, 1]) == 1.0 and reduce_epochs("at_least_3", [1, 0, 1]) == 0.0
    assert reduce_epochs("pass_at_2", [1, 0, 0]) == pytest.approx(1 - math.comb(2, 2) / math.comb(3, 2))
    assert math.isnan(reduce_epochs("pass_at_4", [1, 0, 0]))
    assert reduce_epochs("pass_k_2", [1, 1, 0]) == pytest.approx(1 / 3)
    with pytest.raises(InputError, match="majority"):
        reduce_epochs("majority", [1])


# ------------------------------------------------------------------ item 8 (Inspect's half): graded scores
def test_partial_credit_and_numeric_scores():
    rec = LOGS["scorers.eval"]
    src = load_source(HERE / "scorers.eval")
    partial = read_inspect(src, scorer="partial")
    want = {f"tiny_qa:{s['id']}": _float(s["scores"]["partial"]) for s in rec["sample_scores"]
            if s["scores"]["partial"] != "N"}
    got = dict(zip(partial["item"], partial["score"].astype(float), strict=True))
    assert {k: v for k, v in got.items() if k in want} == want
    none = {f"tiny_qa:{s['id']}" for s in rec["sample_scores"] if s["scores"]["partial"] == "N"}
    assert none and all(math.isnan(got[k]) for k in none)  # N: an invalid answer in a graded log too
    assert 0.5 in want.values() and partial["correct"].isna().all()  # graded: correct left null
    overlap = read_inspect(src, scorer="overlap")
    assert overlap["score"].dtype == "Float64" and overlap["correct"].isna().all()
    match = read_inspect(src, scorer="match")
    assert match["correct"].notna().all() and (match["score"] == match["correct"].astype(float)).all()


# ------------------------------------------------------------------------- item 9: invalidated samples
def test_invalidated_samples_are_kept_apart():
    rec = LOGS["invalidated.eval"]
    with pytest.warns(UserWarning, match="invalidated"):
        log = read_log(HERE / "invalidated.eval")
    flagged = {f"tiny_qa:{s['id']}" for s in rec["sample_scores"] if s["invalidated"]}
    assert set(log.loc[log["invalidated"].astype(bool), "item"]) == flagged and len(flagged) == 2
    head = inspect_headline(log).to_frame().iloc[0]
    # Inspect's results still count them (invalidate_samples does not recompute metrics) ...
    assert head["value"] == pytest.approx(rec["scores"][0]["metrics"]["accuracy"], abs=1e-12)
    # ... and the figure without them is given beside it
    keep = [s for s in rec["sample_scores"] if not s["invalidated"]]
    assert head["invalidated"] == 2
    assert head["value_valid"] == pytest.approx(sum(_float(s["scores"]["match"]) for s in keep) / len(keep))


def test_edit_score_is_read_as_edited():
    rec = LOGS["edited.eval"]
    log = _read("edited.eval")
    assert log.set_index("item").loc["tiny_qa:40", "correct"]
    head = inspect_headline(log).to_frame().iloc[0]
    assert head["value"] == pytest.approx(rec["scores"][0]["metrics"]["accuracy"], abs=1e-12)


def test_folder_of_logs(tmp_path):
    """Several runs of different tasks in one folder are read together (items keep their task)."""
    for n in ("scorers.eval", "sigint.eval"):
        shutil.copy(HERE / n, tmp_path / n)
    log = _read(tmp_path)
    assert set(log["task"]) == {"tiny_qa", "interrupted"}
    assert log.attrs["skipped"]["not run: Inspect log status 'cancelled'"] == 7


# ------------------------------------------------------------- issue 36: N (no answer) is an invalid answer
def test_choice_noanswer_is_invalid_everywhere():
    """``multiple_choice()`` + ``choice()`` with an empty completion: Inspect scores it ``N``. The log stays
    binary; ``N`` is one invalid answer in every output; Inspect's own headline (N = 0) is still reproduced."""
    from mrcstats.io.schema import resolve_outcome
    from mrcstats.stats.accuracy import summarize
    from mrcstats.stats.contingency import mcnemar

    rec = LOGS["choice_noanswer.eval"]
    assert [s["scores"]["choice"] for s in rec["sample_scores"]] == ["C", "C", "I", "N"]
    log = _read("choice_noanswer.eval")
    assert resolve_outcome(log) == "correct"  # one N does not make the log graded
    row = log.set_index("sample_id").loc["mc4"]
    assert pd.isna(row["correct"]) and pd.isna(row["score"]) and row["value"] == "N"
    assert any("'N'" in n for n in log.attrs["notes"])
    wrong = summarize(log, by="model").to_frame().iloc[0]
    assert (wrong["accuracy"], wrong["invalid"], wrong["ci_method"]) == (0.5, 1, "wilson")
    assert (round(wrong["ci_low"], 4), round(wrong["ci_high"], 4)) == (0.15, 0.85)  # Wilson, 2 of 4
    excl = summarize(log, by="model", invalid="exclude").to_frame().iloc[0]
    assert excl["accuracy"] == pytest.approx(2 / 3, abs=1e-12) and excl["invalid"] == 1
    head = inspect_headline(log).to_frame().iloc[0]
    assert head["value"] == pytest.approx(rec["scores"][0]["metrics"]["accuracy"], abs=1e-12)  # 0.5
    assert head["stderr"] == pytest.approx(rec["scores"][0]["metrics"]["stderr"], abs=1e-12)
    # mcnemar takes it (a second model that answers every item right)
    other = log.assign(model="B", correct=True, score=1.0)
    both = pd.concat([log, other], ignore_index=True)
    res = mcnemar(both, models=("mockllm/model", "B"))
    assert (res.n_invalid, res.b_only, res.a_only) == (1, 2, 0)  # N counted invalid, not refused


def test_choice_noanswer_cli(capsys):
    f = str(HERE / "choice_noanswer.eval")
    assert main(["summary", f, "--invalid", "exclude", "--json"]) == 0
    g = json.loads(capsys.readouterr().out)["groups"][0]
    assert g["accuracy"] == pytest.approx(2 / 3, abs=1e-12) and g["invalid"] == 1 and g["ci_method"] == "wilson"
