"""read_log / write_log: files -> validated canonical log -> Parquet/CSV."""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from mrcstats._words import plural
from mrcstats.errors import InputError
from mrcstats.io.detect import detect_format
from mrcstats.io.formats import EXTENSIONS, FORMATS, LOG_SUFFIXES, TABLE_FORMATS, get_format
from mrcstats.io.schema import (
    CORE_COLUMNS,
    apply_threshold,
    check_duplicates,
    coerce_log,
    is_validated,
    mark_validated,
    merge_skipped,
    validate_log,
)
from mrcstats.io.source import Source, expand_paths, load_source


def read_source(src: Source, fmt: str, mapping: Mapping[str, str] | None = None,
                model: str | None = None) -> pd.DataFrame:
    """Read one loaded file of format ``fmt`` into a coerced canonical frame (duplicates not yet checked).

    The reader is the registry's (:func:`mrcstats.io.formats.get_format`); an unknown name raises
    :class:`InputError` listing the formats.
    """
    df = get_format(fmt).read(src, mapping, model)
    attrs = dict(df.attrs)
    out = coerce_log(df, source=src.name, model=model)
    out.attrs = attrs
    return out


def model_for(path: str | os.PathLike, model: str | Mapping[str, str] | None) -> str | None:
    """The model name ``read_log(model=...)`` gives the file ``path``: ``model`` itself when it is a name;
    for a ``{PATH: NAME}`` mapping (the CLI's repeated ``--model PATH=NAME``) the name of the longest
    PATH that is the file or a folder above it (``""``/``"*"`` names every other file), else None."""
    if model is None or isinstance(model, str):
        return model
    p = Path(path).resolve()
    best: tuple[int, str] | None = None
    for k, name in model.items():
        if k in ("", "*"):
            hit = 0
        else:
            q = Path(k).resolve()
            if p != q and q not in p.parents:
                continue
            hit = len(q.parts)
        if best is None or hit > best[0]:
            best = (hit, name)
    return None if best is None else best[1]


def read_log(paths: str | os.PathLike | Sequence[str | os.PathLike], format: str | None = None,
             mapping: Mapping[str, str] | None = None, model: str | Mapping[str, str] | None = None,
             on_duplicate: str = "error", threshold: float | None = None) -> pd.DataFrame:
    """Read response logs into one validated canonical log.

    Args:
        paths: a file, a folder (read recursively: ``.csv .tsv .txt .json .jsonl
            .parquet``, each optionally ``.gz``) or a list of them; all of one format.
        format: one of :data:`mrcstats.io.formats.FORMATS`; ``None`` detects it by content
            (:func:`mrcstats.io.formats.detect`).
        mapping: ``{canonical_field: source_column}`` (the CLI's ``--map FIELD=COLUMN``). Refused (InputError)
            for a dataset folder, which is canonical already; so is ``model``.
        model: the model name for sources that do not name one (fills missing models), or
            ``{path: name}`` naming the files under each path (several runs in one call; see
            :func:`model_for`).
        on_duplicate: ``"error"`` (default), ``"first"`` or ``"last"`` for repeated
            ``(model, item, trial, condition)`` keys; dropped rows are counted in
            ``attrs["skipped"]``.
        threshold: binarise graded scores, ``correct = score >= threshold`` where a source gives a score
            and no correctness (:func:`mrcstats.io.schema.apply_threshold`; docs/scores.md).

    Returns:
        The canonical log (see :mod:`mrcstats.io.schema`) with ``attrs["skipped"]``
        (``{reason: rows}``), ``attrs["format"]`` and ``attrs["sources"]`` (file names); with several files, the
        readers' ``invalidated``/``graded_metrics``/``run_settings`` merged (:func:`merge_file_attrs`).

    Raises:
        InputError: unreadable, empty or non-UTF-8 files, mixed formats, missing
            columns, non-binary correctness, duplicate keys.
    """
    check_read_args(format, mapping, model, on_duplicate)
    single = dataset_folder(paths, format, mapping, model)
    if single is not None:      # a partitioned dataset folder (mrcstats ingest --dataset): load it
        from mrcstats.io.dataset import open_dataset

        log = check_duplicates(open_dataset(single).to_log(), on_duplicate, str(single), {})
        return apply_threshold(log, threshold, str(single))   # the same cut as the files' path below
    files = expand_paths(paths, EXTENSIONS)
    sources: list[tuple[Source, str]] = []
    for path in files:
        src = load_source(path)
        fmt = format or detect_format(src)
        if sources and fmt != sources[0][1]:
            raise InputError(f"mixed formats in one call: {sources[0][0].path} is {sources[0][1]} but {path} is "
                             f"{fmt}; read one format at a time (or pass --format)")
        sources.append((src, fmt))
    return _read_loaded(files, sources, mapping, model, on_duplicate, threshold)


def dataset_folder(paths: Any, format: str | None, mapping: Mapping[str, str] | None,
                   model: str | Mapping[str, str] | None) -> str | os.PathLike | None:
    """The log dataset folder (``mrcstats ingest --dataset``) that ``paths`` names alone, or None: where
    :func:`read_log` and :func:`read_data` open a folder as a dataset, whatever else they are given. A dataset is
    canonical already (docs/datasets.md): ``format=``, ``mapping=`` and ``model=`` cannot apply to it and are refused
    with an InputError naming them, rather than ignored or used to read its files as plain ones (a dataset folder
    among other paths is refused where folders are listed, :func:`~mrcstats.io.source.expand_paths`)."""
    single = paths if isinstance(paths, (str, os.PathLike)) else (
        paths[0] if isinstance(paths, (list, tuple)) and len(paths) == 1 else None)
    if not isinstance(single, (str, os.PathLike)):
        return None
    from mrcstats.io.dataset import is_dataset

    if not is_dataset(single):
        return None
    given = [n for n, v in (("format", format), ("mapping", mapping), ("model", model)) if v]
    if given:   # a dataset is canonical already: these cannot apply, so refuse rather than ignore them
        raise InputError(f"{single}: {' and '.join(f'{n}=' for n in given)} cannot apply to a dataset folder "
                         f"(its format, columns and models were fixed by `mrcstats ingest --dataset`); drop the "
                         f"option here, or pass it to ingest when building the dataset from the source files")
    return single


def _read_loaded(files: list[Path], sources: list[tuple[Source, str]], mapping: Mapping[str, str] | None,
                 model: str | Mapping[str, str] | None, on_duplicate: str, threshold: float | None) -> pd.DataFrame:
    """:func:`read_log` after its files are loaded and their one format known (``sources``: (file, format)
    pairs; each file's bytes are released once it is read)."""
    frames: list[pd.DataFrame] = []
    skipped: dict[str, int] = {}
    from mrcstats._progress import progress

    bar = progress(range(len(sources)), desc="reading", unit="file", disable=None if len(sources) > 3 else True)
    for i in bar:
        src, fmt = sources[i]
        df = read_source(src, fmt, mapping, model_for(src.path, model))
        sources[i] = (Source(src.path, b""), fmt)  # release the bytes
        skipped = merge_skipped(skipped, df.attrs.get("skipped", {}))
        frames.append(df)
    if len(frames) == 1:
        log = frames[0]
    else:
        log = pd.concat(frames, ignore_index=True, sort=False)
        log = coerce_log(log, source=None) if not _same_columns(frames) else _restore_dtypes(log, frames[0])
    log, notes = settings_into_condition(log, frames)
    source = str(files[0]) if len(files) == 1 else None
    log = check_duplicates(log, on_duplicate, source, skipped,
                           files=list(zip(file_names(files), map(len, frames))) if len(frames) > 1 else None)
    log = apply_threshold(log, threshold, source)
    base = {k: v for k, v in frames[0].attrs.items()} if len(frames) == 1 else merge_file_attrs(files, frames)
    base["notes"] = [*file_notes(files, frames), *notes]
    if not base["notes"]:
        del base["notes"]
    log.attrs = {**base, "skipped": skipped, "format": sources[0][1],
                 "sources": [str(f) for f in files], **({"threshold": float(threshold)} if threshold is not None
                                                        else {})}
    return mark_validated(log)


def file_names(files: Sequence[str | os.PathLike]) -> list[str]:
    """How messages name the files of one read: each file's name, its path when two names are the same."""
    names = [Path(f).name for f in files]
    return names if len(set(names)) == len(names) else [str(f) for f in files]


#: what a reader records about its file beyond notes/skipped, and how several files' values merge
FILE_ATTRS: tuple[str, ...] = ("invalidated", "graded_metrics", "run_settings")
#: attrs that describe one read rather than the log, kept out of a written file's metadata (:func:`write_log`):
#: ``file_attrs``, each source file's own values by the names of the files read then (the merged values travel)
READ_ONLY_ATTRS: tuple[str, ...] = ("file_attrs",)


def merge_file_attrs(files: Sequence[str | os.PathLike], frames: Sequence[pd.DataFrame]) -> dict:
    """What the readers of several files recorded (:data:`FILE_ATTRS`), merged for the log: ``invalidated`` is
    summed over the files, ``graded_metrics`` the sorted union, ``run_settings`` the union in first-seen order;
    ``file_attrs`` keeps each file's own values (``{file name: {attr: value}}``, files that recorded any)."""
    per = {f: {k: df.attrs[k] for k in FILE_ATTRS if k in df.attrs}
           for f, df in zip(file_names(files), frames)}
    per = {f: d for f, d in per.items() if d}
    if not per:
        return {}
    out: dict = {}
    vals = {k: [d[k] for d in per.values() if k in d] for k in FILE_ATTRS}
    if vals["invalidated"]:
        out["invalidated"] = int(sum(int(v) for v in vals["invalidated"]))
    if vals["graded_metrics"]:
        out["graded_metrics"] = sorted({str(m) for v in vals["graded_metrics"] for m in v})
    if vals["run_settings"]:
        out["run_settings"] = tuple(dict.fromkeys(s for v in vals["run_settings"] for s in v))
    out["file_attrs"] = per
    return out


def file_notes(files: Sequence[str | os.PathLike], frames: Sequence[pd.DataFrame]) -> list[str]:
    """Every reader's notes (``attrs["notes"]``: rows skipped, samples invalidated, a run that ended early), each
    naming its file (``"FILE: note"``; the file's name, its path when two names are the same), so several files read into one log keep what each reader said. With
    several files, the rows a reader skipped (``attrs["skipped"]``) that its notes do not already state are
    noted too (``"FILE: skipped N rows: reason"``): the log's ``skipped`` adds them up over the files."""
    out: list[str] = []
    for f, df in zip(file_names(files), frames):
        mine = [str(n) for n in df.attrs.get("notes") or ()]
        if len(frames) > 1:
            mine += [f"skipped {plural(int(n), 'row')}: {why}" for why, n in (df.attrs.get("skipped") or {}).items()
                     if n and not any(why in m for m in mine)]
        out += [f"{f}: {m}" for m in mine]
    return out


#: run settings the tool readers record as columns (and name in ``attrs["run_settings"]``)
RUN_SETTINGS: tuple[str, ...] = ("num_fewshot",)


def settings_into_condition(log: pd.DataFrame, frames: Sequence[pd.DataFrame]) -> tuple[pd.DataFrame, list[str]]:
    """Run settings a tool records (a reader names them in ``attrs["run_settings"]``: lm-eval's and lighteval's
    ``num_fewshot``) become part of ``condition`` when the read holds some model at several values of one --
    the same model at 0 and 2 shots read together is two conditions, not duplicate rows. Every row then gets
    ``<condition>, <setting>=<value>`` (``num_fewshot=2`` when the condition was empty), so models stay
    comparable within a setting. Returns the log and the notes saying what became the condition (empty when
    nothing changed; a warning repeats them)."""
    settings = list(dict.fromkeys(s for f in frames for s in f.attrs.get("run_settings", ()) if s in log.columns))
    notes: list[str] = []
    for s in settings:
        vals = log[s]
        per_model = vals.groupby(log["model"].astype(str), sort=True, dropna=True).nunique()
        several = per_model[per_model > 1]
        if several.empty:
            continue
        text = vals.astype("string").fillna("NA")
        cond = log["condition"].astype("string").fillna("")
        log = log.copy(deep=False)
        sep = pd.Series(", ", index=log.index, dtype="string").where(cond != "", "")
        log["condition"] = (cond + sep + f"{s}=" + text).astype(log["condition"].dtype)
        shown = "; ".join(f"{m}: {', '.join(sorted(map(str, vals[log['model'].astype(str) == m].dropna().unique())))}"
                          for m in several.index[:5])
        notes.append(f"run setting {s!r} became part of the condition ('<condition>, {s}=<value>'): the read "
                     f"holds a model at several values ({shown})")
    if notes:
        import warnings

        warnings.warn("; ".join(notes), stacklevel=3)
    return log, notes


def read_data(paths: str | os.PathLike | Sequence[str | os.PathLike], format: str | None = None,
              mapping: Mapping[str, str] | None = None, model: str | None = None,
              on_duplicate: str = "error", loaded: Sequence[Source] = ()) -> pd.DataFrame:
    """Read a data table for a model fit: a plain table as it is, any other source as a canonical log.

    The files are loaded and their format detected exactly as :func:`read_log` does (gzip,
    encodings, Git LFS pointers, duplicate column names, every format). A source that only
    makes sense as a log (a tool's format: ``mskqa``, ``harness``, ``inspect``, ... -- every
    :data:`~mrcstats.io.formats.REGISTRY` record with ``log_only``) is read with
    :func:`read_log`; a table (:data:`~mrcstats.io.formats.TABLE_FORMATS`: ``csv``, ``tsv``, ``json``,
    ``jsonl``, ``parquet``) is
    returned with its own columns and rows (a GLMM's data need not be a response log, and
    may repeat a model-item pair): ``mapping`` renames, ``model`` fills a ``model`` column,
    empty cells and ``NA`` are missing (R's ``read.csv``), and a ``correct`` column is read
    with the log's correctness words (:func:`mrcstats.io.schema.coerce_correct`: true/false,
    0/1, yes/no; ``invalid`` or empty = <NA>).
    ``attrs["skipped"]`` counts rows left out. ``loaded``: files the caller has read already
    (:func:`~mrcstats.io.source.load_source`), not read a second time. A log dataset folder is read as the
    canonical log it holds (:func:`read_log`; ``format``/``mapping``/``model`` refused: :func:`dataset_folder`).
    """
    check_read_args(format, mapping, model, on_duplicate)
    if dataset_folder(paths, format, mapping, model) is not None:
        return read_log(paths, on_duplicate=on_duplicate)
    files = expand_paths(paths, EXTENSIONS)
    have = {s.path: s for s in loaded}
    srcs = [have.get(p) or load_source(p) for p in files]
    fmts = [format or detect_format(s) for s in srcs]
    if any(f != fmts[0] for f in fmts):
        i = next(i for i, f in enumerate(fmts) if f != fmts[0])
        raise InputError(f"mixed formats in one call: {files[0]} is {fmts[0]} but {files[i]} is {fmts[i]}; "
                         f"read one format at a time (or pass --format)")
    if fmts[0] not in TABLE_FORMATS:   # a log: read from the files loaded above, not a second time
        return _read_loaded(files, list(zip(srcs, fmts)), mapping, model, on_duplicate, None)
    from mrcstats.io.schema import coerce_correct
    from mrcstats.io.tabular import read_plain_table

    frames = [read_plain_table(s, fmts[0], mapping) for s in srcs]
    for s, f in zip(srcs, frames):
        if "correct" in f.columns:  # the log's correctness words (true/false/invalid, yes/no, 0/1) read alike
            f["correct"] = coerce_correct(f["correct"], s.name)
        name = model_for(s.path, model)
        if name is not None:
            f["model"] = f["model"].fillna(name) if "model" in f.columns else name
    df = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True, sort=False)
    df.attrs = {"skipped": {}, "format": fmts[0], "sources": [str(f) for f in files]}
    return df


def check_read_args(format: Any, mapping: Any, model: Any, on_duplicate: Any) -> None:
    if mapping is not None and not isinstance(mapping, Mapping):
        raise InputError(f"mapping must be a dict {{field: source column}}, e.g. {{'item': 'question_id'}}; got "
                         f"{type(mapping).__name__} {str(mapping)[:60]!r}")
    for k, v in (mapping or {}).items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise InputError(f"mapping must map field names to column names (text), got {k!r}: {v!r}")
    if isinstance(model, Mapping):
        for k, v in model.items():
            if not isinstance(k, (str, os.PathLike)) or not isinstance(v, str) or not v:
                raise InputError(f"model must map paths to model names (text), got {k!r}: {v!r}")
    elif model is not None and not isinstance(model, str):
        raise InputError(f"model must be a model name (text) or {{path: name}}, got {type(model).__name__}")
    if format is not None and format not in FORMATS:
        raise InputError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}")
    if on_duplicate not in ("error", "first", "last"):
        raise InputError(f"on_duplicate must be error, first or last, got {on_duplicate!r}")


def _same_columns(frames: list[pd.DataFrame]) -> bool:
    cols = list(frames[0].columns)
    return all(list(f.columns) == cols for f in frames[1:])


def _restore_dtypes(log: pd.DataFrame, like: pd.DataFrame) -> pd.DataFrame:
    for c in CORE_COLUMNS:
        if log[c].dtype != like[c].dtype:
            log[c] = log[c].astype(like[c].dtype)
    return log


def write_log(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Validate ``df`` and write it atomically: Parquet (``.parquet``/``.pq``, lossless) or CSV/TSV
    (``.csv``/``.tsv``, optionally ``.gz``), by the file ending; any other ending raises :class:`InputError`.
    A log :func:`read_log` or :func:`~mrcstats.io.schema.validate_log` returned is written as it is, not
    validated a second time (:func:`~mrcstats.io.schema.is_validated`).

    ``df.attrs`` (JSON-serialisable parts) travel in the Parquet metadata, so
    :func:`read_log` gives back the same frame, except :data:`READ_ONLY_ATTRS` (``file_attrs``: the per-file
    values of the read that made the log; their merged values travel). The files the log was read from
    (``attrs["sources"]``) are never overwritten (:func:`mrcstats._files.input_clash`).
    Returns the path written.
    """
    from mrcstats._files import atomic_path, check_output_path

    sources = getattr(df, "attrs", {}).get("sources") if isinstance(df, pd.DataFrame) else None
    # the files the log was read from (read_log records them) are inputs: never overwritten
    target = check_output_path(path, suffixes=LOG_SUFFIXES, what="write_log",
                               inputs=sources if isinstance(sources, (list, tuple)) else ())
    log = df if is_validated(df) else validate_log(df)   # read_log's and validate_log's logs: checked once
    name = target.name.lower()
    with atomic_path(target) as tmp:
        if name.endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz")):
            sep = "\t" if ".tsv" in name else ","
            log.to_csv(tmp, index=False, sep=sep, compression="gzip" if name.endswith(".gz") else None)
        else:
            _write_parquet(log, tmp)
    return target


def _write_parquet(log: pd.DataFrame, tmp: Path) -> None:
    import json

    from pyarrow.lib import ArrowException

    from mrcstats._jsonout import to_jsonable

    attrs = log.attrs
    try:
        kept = to_jsonable({k: v for k, v in attrs.items() if k not in READ_ONLY_ATTRS})
        json.dumps(kept)
        log.attrs = kept
    except (TypeError, ValueError):
        log.attrs = {}
    try:
        log.to_parquet(tmp, index=False)
    except (TypeError, ValueError, ArrowException) as exc:  # mixed-type object columns
        bad = [c for c in log.columns if log[c].dtype == object]
        if not bad:
            raise InputError(f"cannot write Parquet: {exc}") from None
        fixed = log.copy()
        for c in bad:
            fixed[c] = fixed[c].astype("string")
        import warnings

        warnings.warn(f"columns {', '.join(map(repr, bad))} hold mixed Python types; written as text",
                      stacklevel=3)
        fixed.to_parquet(tmp, index=False)
    finally:
        log.attrs = attrs
