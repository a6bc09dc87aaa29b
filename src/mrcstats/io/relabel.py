"""A person's verdicts on screened items applied to a log, with provenance: the triage step after
``mrcstats screen --review``.

The review file is a CSV with one row per item and the columns ``item`` and ``verdict`` (``keep``, ``rekey``,
``drop``, or empty: not reviewed), ``new_key`` (the correct option, for ``rekey``), and optionally ``reviewer``,
``date`` and ``reason`` (who, when, why); other columns (the screen's evidence) are read past. Applying it:

* ``rekey``: the item's ``gold`` becomes ``new_key`` and ``correct`` (and a binary ``score``) is recomputed from
  each row's ``pred``; rows without an extracted answer (empty ``pred``) keep what they had (an invalid answer);
* ``drop``: every row of the item is removed, counted in ``attrs["skipped"]`` with the reason;
* ``keep`` and empty: nothing changes.

Nothing else in the log changes. The provenance - the review file (path and SHA-256), when it was applied, by
which mrcstats, and every verdict with its reviewer, date and reason - is appended to ``attrs["relabel"]``, which
the Parquet log keeps; :func:`relabel_notes` gives the lines every command and report prints for such a log.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mrcstats._files import sha256_of
from mrcstats._repr import Result
from mrcstats._words import plural
from mrcstats.errors import InputError

__all__ = ["MAX_KEY_LABELS", "VERDICTS", "RelabelResult", "apply_verdicts", "item_options", "option_pairs", "read_verdicts", "rekey",
           "relabel_notes"]

#: what a reviewer can decide about an item (empty: not reviewed)
VERDICTS: tuple[str, ...] = ("keep", "rekey", "drop")
#: at most this many labels used as keys in a log are every item's options (A-D on MMLU, A-J on MMLU-Pro); the
#: one rule of the item screen (:mod:`mrcstats.stats.screen`) and of the verdicts' check
MAX_KEY_LABELS = 26


def option_pairs(pred_items, preds, key_items, keys, items) -> pd.DataFrame:
    """The ``(i, o)`` pairs of every item's options, sorted: the options some model chose (``preds`` of
    ``pred_items``), the item's key (``keys`` of ``key_items``), and every label used as a key anywhere when there
    are at most :data:`MAX_KEY_LABELS` of them (``A``-``D`` on MMLU: an option nobody chose is still an option).
    The one option-set rule of the screen's answer model and of ``relabel``'s key check."""
    parts = [pd.DataFrame({"i": np.asarray(pred_items), "o": np.asarray(preds, dtype=object)}),
             pd.DataFrame({"i": np.asarray(key_items), "o": np.asarray(keys, dtype=object)})]
    labels = pd.unique(pd.Series(np.asarray(keys, dtype=object)).dropna())
    if len(labels) <= MAX_KEY_LABELS:
        items = np.asarray(items)
        parts.append(pd.DataFrame({"i": np.repeat(items, len(labels)), "o": np.tile(labels, len(items))}))
    return pd.concat(parts).dropna().drop_duplicates().sort_values(["i", "o"]).reset_index(drop=True)


def item_options(log: pd.DataFrame) -> dict[str, list[str]]:
    """Every item's options as the screen sees them (:func:`option_pairs`)."""
    gold = log["gold"].astype("string").str.strip() if "gold" in log.columns else pd.Series(pd.NA, index=log.index)
    pred = log["pred"].astype("string").str.strip() if "pred" in log.columns else pd.Series(pd.NA, index=log.index)
    item = log["item"].astype(str)
    out: dict[str, list[str]] = {i: [] for i in pd.unique(item)}
    pairs = option_pairs(item, pred.astype(object), item, gold.astype(object), list(out))
    for i, o in pairs.itertuples(index=False):
        out[i].append(str(o))
    return out


def rekey(log: pd.DataFrame, new_keys: Mapping[str, str], item_col: str = "item") -> pd.DataFrame:
    """A copy of ``log`` with the key of every item in ``new_keys`` changed: ``gold`` is the new key, ``correct``
    is recomputed from each row's ``pred`` (``pred == new key``) and a ``score`` column follows it; rows without
    an extracted answer (empty ``pred``) keep the ``correct`` they had - an invalid answer says nothing about the
    new key. The one place a key change recomputes correctness (``relabel`` and the screen's injected keys)."""
    out = log.copy()
    it = out[item_col].astype(str)
    hit = it.isin(new_keys).to_numpy()
    nk = it[hit].map(new_keys).astype("string")
    pred = out.loc[hit, "pred"].astype("string").str.strip()
    answered = pred.notna().to_numpy()
    corr = out["correct"].astype("boolean")
    new_corr = corr[hit].copy()
    new_corr[answered] = (pred[answered] == nk[answered]).astype("boolean")
    out["correct"] = corr
    out.loc[hit, "correct"] = new_corr.to_numpy()
    out["gold"] = out["gold"].astype("string")
    out.loc[hit, "gold"] = nk.to_numpy()
    if "score" in out.columns:
        sc = out["score"].astype("Float64")
        sc[hit] = new_corr.astype("Float64").to_numpy()
        out["score"] = sc
    return out


def read_verdicts(path: str | Path) -> pd.DataFrame:
    """The review file's rows with a verdict: ``row`` (1-based data row, as a spreadsheet shows it after the header),
    ``item``, ``verdict``, ``new_key``, ``reviewer``, ``date``, ``reason``. A missing column, an unknown verdict or
    an item twice is one :class:`InputError` naming the file, row and column."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"--verdicts {p}: no such file; give the review CSV that `mrcstats screen --review` wrote")
    try:
        df = pd.read_csv(p, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise InputError(f"--verdicts {p}: not a readable CSV ({str(exc).splitlines()[0]}); save it as CSV (UTF-8)") from None
    df.columns = [str(c).strip().lower() for c in df.columns]
    for col in ("item", "verdict"):
        if col not in df.columns:
            raise InputError(f"--verdicts {p}: no column {col!r}; the review file needs 'item' and 'verdict' "
                             f"(and 'new_key' for rekey) - start from the file `mrcstats screen --review` writes")
    for col in ("new_key", "reviewer", "date", "reason"):
        if col not in df.columns:
            df[col] = ""
    df = df.assign(row=range(2, len(df) + 2))[["row", "item", "verdict", "new_key", "reviewer", "date", "reason"]]
    for c in ("item", "verdict", "new_key", "reviewer", "date", "reason"):
        df[c] = df[c].astype(str).str.strip()
    df["verdict"] = df["verdict"].str.lower()
    bad = df[~df["verdict"].isin(("", *VERDICTS))]
    if len(bad):
        r = bad.iloc[0]
        raise InputError(f"--verdicts {p}: line {r['row']}, column verdict: {r['verdict']!r} is not a verdict; use "
                         f"{', '.join(VERDICTS)} or leave it empty (not reviewed)")
    empty_item = df[df["item"] == ""]
    if len(empty_item):
        raise InputError(f"--verdicts {p}: line {empty_item['row'].iloc[0]}, column item: empty")
    dup = df[df["item"].duplicated(keep=False) & (df["verdict"] != "")]
    if len(dup):
        raise InputError(f"--verdicts {p}: item {dup['item'].iloc[0]!r} has more than one verdict (lines "
                         f"{', '.join(map(str, dup['row'].head(3)))}); keep one")
    miss = df[(df["verdict"] == "rekey") & (df["new_key"] == "")]
    if len(miss):
        raise InputError(f"--verdicts {p}: line {miss['row'].iloc[0]}, column new_key: verdict 'rekey' needs the "
                         f"correct option (item {miss['item'].iloc[0]!r})")
    return df[df["verdict"] != ""].reset_index(drop=True)


@dataclass(frozen=True, repr=False)
class RelabelResult(Result):
    """A log with verdicts applied: ``log`` (provenance in ``log.attrs["relabel"]``), ``verdicts`` (one row per
    reviewed item: item, verdict, old_key, new_key, reviewer, date, reason, rows), and the counts."""

    log: pd.DataFrame
    verdicts: pd.DataFrame
    changed: int
    dropped: int
    kept: int
    rows_dropped: int
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_frame(self) -> pd.DataFrame:
        return self.verdicts.copy()

    def to_dict(self) -> dict[str, Any]:
        return {"changed": self.changed, "dropped": self.dropped, "kept": self.kept, "rows_dropped": self.rows_dropped,
                "rows": len(self.log), "verdicts": self.verdicts.to_dict(orient="records"), "notes": list(self.notes)}

    def summary(self) -> str:
        lines = [(f"Relabelled: {plural(self.changed, 'key')} changed, {plural(self.dropped, 'item')} dropped "
                 f"({plural(self.rows_dropped, 'row')}), {self.kept} kept; {len(self.log)} rows left")]
        if len(self.verdicts):
            lines.append(self.verdicts.drop(columns=["rows"]).to_string(index=False))
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def apply_verdicts(log: pd.DataFrame, verdicts: pd.DataFrame | str | Path, *, reviewer: str = "",
                   source: str | None = None) -> RelabelResult:
    """Apply a review's verdicts to a canonical log (module docstring); ``verdicts``: a review CSV path or the
    frame :func:`read_verdicts` returns; ``reviewer``: who, for rows whose ``reviewer`` is empty."""
    from mrcstats import __version__

    src = source
    sha = None
    if isinstance(verdicts, (str, Path)):
        src, sha = str(verdicts), sha256_of(verdicts)
        verdicts = read_verdicts(verdicts)
    where = f"--verdicts {src}" if src else "verdicts"
    if not isinstance(log, pd.DataFrame) or "item" not in log.columns:
        raise InputError("relabel: expected a canonical log with an 'item' column")
    opts = item_options(log)
    v = verdicts.copy()
    unknown = v[~v["item"].isin(opts)]
    if len(unknown):
        r = unknown.iloc[0]
        raise InputError(f"{where}: line {r['row']}, column item: {r['item']!r} is not an item of the log "
                         f"({len(unknown)} of {len(v)} verdicts name items the log does not have); check the log and the "
                         "review file belong together")
    rk = v[v["verdict"] == "rekey"]
    if len(rk) and ("pred" not in log.columns or log["pred"].notna().sum() == 0):
        raise InputError(f"{where}: verdict 'rekey' needs the log's 'pred' column (each model's answer) to "
                         "recompute correct; this log has none - drop the item instead")
    for r in rk.itertuples():
        if r.new_key not in opts[r.item]:
            raise InputError(f"{where}: line {r.row}, column new_key: {r.new_key!r} is not an option of item "
                             f"{r.item!r} (options: {', '.join(opts[r.item])})")
    score_binary = "score" not in log.columns or bool(log["score"].dropna().isin((0.0, 1.0)).all())
    if len(rk) and not score_binary:
        raise InputError(f"{where}: the log has graded scores; a new key cannot recompute them - drop the item "
                         "instead")
    out = log.copy()
    it = out["item"].astype(str)
    old = (out["gold"].astype("string").str.strip().groupby(it).agg(lambda s: s.dropna().iloc[0] if s.notna().any()
                                                                     else pd.NA) if "gold" in out.columns else {})
    v["old_key"] = [old.get(i, pd.NA) if len(old) else pd.NA for i in v["item"]]
    v["new_key"] = v["new_key"].where(v["verdict"] == "rekey", "")
    v["reviewer"] = v["reviewer"].where(v["reviewer"] != "", reviewer)
    rows = it.value_counts()
    v["rows"] = [int(rows.get(i, 0)) for i in v["item"]]
    if len(rk):
        out = rekey(out, dict(zip(rk["item"], rk["new_key"], strict=True)))
    drop = set(v.loc[v["verdict"] == "drop", "item"])
    gone = it.isin(drop).to_numpy()
    out = out[~gone].reset_index(drop=True)
    out.attrs = {k: (dict(val) if isinstance(val, dict) else list(val) if isinstance(val, list) else val)
                 for k, val in log.attrs.items()}
    n_changed, n_drop = int((v["verdict"] == "rekey").sum()), len(drop)
    notes = []
    if gone.any():
        skipped = dict(out.attrs.get("skipped") or {})
        skipped[f"{plural(n_drop, 'item')} dropped by review ({src or 'verdicts'})"] = int(gone.sum())
        out.attrs["skipped"] = skipped
    when = datetime.now(UTC).isoformat(timespec="seconds")
    record = {"source": src, "sha256": sha, "applied": when, "tool": f"mrcstats {__version__}",
              "changed": n_changed, "dropped": n_drop, "rows_dropped": int(gone.sum()),
              "kept": int((v["verdict"] == "keep").sum()),
              "items": [{k: (None if pd.isna(r[k]) or r[k] == "" else r[k]) for k in
                         ("item", "verdict", "old_key", "new_key", "reviewer", "date", "reason")}
                        for r in v.to_dict(orient="records")]}
    out.attrs["relabel"] = [*list(log.attrs.get("relabel") or []), record]
    if not len(v):
        notes.append("the review file holds no verdict; the log is unchanged")
    cols = ["item", "verdict", "old_key", "new_key", "reviewer", "date", "reason", "rows"]
    return RelabelResult(out, v[cols].reset_index(drop=True), n_changed, n_drop, record["kept"], int(gone.sum()),
                         tuple(notes))


def relabel_notes(attrs: dict[str, Any] | Iterable[Any] | None) -> list[str]:
    """One line per review applied to a log: how many keys changed and items dropped, from which file, by whom."""
    recs = (attrs or {}).get("relabel") if isinstance(attrs, dict) else attrs
    out = []
    for r in recs or []:
        who = sorted({i.get("reviewer") for i in r.get("items", []) if i.get("reviewer")})
        out.append(f"relabelled by review: {plural(int(r.get('changed', 0)), 'key')} changed, "
                   f"{plural(int(r.get('dropped', 0)), 'item')} dropped ({r.get('source') or 'verdicts'}"
                   + (f", by {', '.join(who)}" if who else "") + f", applied {r.get('applied')})")
    return out
