"""Inspect AI evaluation logs: JSON (``--log-format json``) or the zipped ``.eval`` format (Inspect's default).

A JSON log is ``{"version", "status", "eval": {"task", "model", "dataset", "config"}, "results",
"samples": [...]}``; a ``.eval`` log is a zip archive of ``header.json`` (the same fields without the
samples), ``samples/<id>_epoch_<n>.json`` (one sample each), ``_journal/start.json`` (``eval`` and ``plan``,
written when the run starts) and ``summaries.json``/``reductions.json``. Current Inspect compresses every
member with zstd (zip method 93), which Python's :mod:`zipfile` reads only from 3.14 on: such members are
decompressed with the standard library's ``compression.zstd`` where present, else with the ``zstandard``
wheel, and their CRC-32 is checked. A damaged or unsupported archive (a bad zip, a truncated member, a bad
zlib or zstd stream, an unknown compression method) is one :class:`~mrcstats.errors.InputError` naming the
file and the member.

Rows, one per scored sample-epoch (the **trial level**; every epoch is kept):

* model = ``eval.model`` (or ``--model``); item = ``<task>:<sample id>`` with task = ``eval.task``, as the
  harness reader's ``<task>:<doc_id>``; cluster = item; trial = ``epoch - 1``; ``task`` and ``sample_id``
  keep the originals; gold = ``target``; pred = the scorer's ``answer``; response = the first output
  choice's text; question = ``input``.
* The first scorer of the log is read (``scorer=`` picks another); its name is in the ``scorer`` column and
  its raw value, as text, in ``value``.
* ``score`` (Float64) is Inspect's own ``value_to_float``: ``C`` = 1, ``P`` = 0.5, ``I`` = 0, numbers as
  they are, ``yes``/``true`` = 1, ``no``/``false`` = 0. A scorer whose values are all binary
  (``C``/``I``/``N``, booleans, 0/1) also fills ``correct``; a graded scorer (any ``P`` or other number)
  fills ``score`` only and leaves ``correct`` <NA>.
* ``N`` (Inspect's ``NOANSWER``: the ``choice()`` scorer gives it for an empty completion) is an **invalid
  answer**, decided here and nowhere else (:func:`inspect_outcome`): ``correct`` and ``score`` are both <NA>,
  so the log stays binary, every invalid count includes it, ``--invalid wrong`` (the default) scores it 0
  as Inspect's ``value_to_float`` does and ``--invalid exclude`` leaves it out; :mod:`mrcstats.stats.headline`
  maps the raw ``value`` through :func:`value_to_float` and so still equals Inspect's ``results.scores``.
* ``reducer``: the epoch reducer(s) the run declared (``eval.config.epochs_reducer``, comma-separated;
  ``mean`` when none), which :func:`mrcstats.stats.headline.inspect_headline` applies to reproduce
  Inspect's ``results.scores``.
* ``invalidated`` (boolean): the sample was flagged by ``inspect_ai.log.invalidate_samples``; such rows are
  kept and counted (``attrs["invalidated"]``) and a warning says so.

What is not scored is never refused and never scored as wrong; it is counted in ``attrs["skipped"]`` by
reason (sample-epochs) and a warning gives the counts and each error's first line:

* ``Inspect sample raised an error (no score)``: ``"scores": {}`` with an ``"error"`` (``fail_on_error=False``,
  or the sample that stopped a fail-fast run); Inspect leaves them out of its metrics too;
* ``Inspect sample cancelled when the run stopped (no score)``: the samples running when a run stopped
  (fail-fast or SIGINT), whose error is a ``CancelledError``;
* ``not run: Inspect log status '<status>'`` (``error`` = fail-fast, ``cancelled`` = interrupted): the
  sample-epochs the run was set up for (``eval.dataset.samples`` x ``eval.config.epochs``) that the log
  does not hold;
* ``not run: Inspect run killed (no header.json)``: a ``.eval`` of a run killed with SIGKILL has no
  ``header.json``; task, model, sample count and epochs come from ``_journal/start.json``.
"""
from __future__ import annotations

import io
import json
import math
import struct
import warnings
import zipfile
import zlib
from typing import Any

import pandas as pd

from mrcstats._compat import zstd_decompress, zstd_errors
from mrcstats._words import plural
from mrcstats.errors import InputError
from mrcstats.io.source import Source

#: zip compression method of zstd members (APPNOTE.TXT 4.4.5), which Inspect writes
ZIP_ZSTD = 93
#: Inspect's score value constants (inspect_ai.scorer: CORRECT, INCORRECT, PARTIAL, NOANSWER) as value_to_float
#: maps them
INSPECT_VALUES: dict[str, float] = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
#: ``correct`` of a binary value (``N`` = no answer = invalid)
_BINARY = {"C": True, "I": False, "N": None, "CORRECT": True, "INCORRECT": False, "TRUE": True, "FALSE": False,
           "YES": True, "NO": False}
ERRORED = "Inspect sample raised an error (no score)"
CANCELLED = "Inspect sample cancelled when the run stopped (no score)"
KILLED = "not run: Inspect run killed (no header.json)"


# ------------------------------------------------------------------------------------------ the archive
def _zstd_member(data: bytes, info: zipfile.ZipInfo) -> bytes:
    """A zstd member read from its local header by hand (zipfile before 3.14 refuses method 93)."""
    off = info.header_offset
    head = data[off:off + 30]
    if len(head) < 30 or head[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile("bad local file header")
    n_name, n_extra = struct.unpack("<HH", head[26:30])
    start = off + 30 + n_name + n_extra
    raw = data[start:start + info.compress_size]
    if len(raw) < info.compress_size:
        raise zipfile.BadZipFile(f"truncated: {len(raw)} of {info.compress_size} compressed bytes")
    out = zstd_decompress(raw)
    if len(out) != info.file_size or zlib.crc32(out) != info.CRC:
        raise zipfile.BadZipFile("CRC or size check failed after zstd decompression")
    return out


def _archive_errors() -> tuple[type[BaseException], ...]:
    errs: list[type[BaseException]] = [zipfile.BadZipFile, zlib.error, NotImplementedError, EOFError,
                                       ValueError, OSError, struct.error, RuntimeError, KeyError]
    return (*errs, *zstd_errors())


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _Archive:
    """An Inspect ``.eval`` zip: its member names and members as text, every failure one InputError."""

    def __init__(self, src: Source) -> None:
        self.src = src
        try:
            self.zf = zipfile.ZipFile(io.BytesIO(src.data))
            self.infos = {i.filename: i for i in self.zf.infolist()}
        except _archive_errors() as exc:
            raise InputError(f"{src.name}: damaged .eval archive (its zip directory: {_why(exc)}); the file is "
                             f"truncated or not a zip: copy it again, or re-write it with `inspect log convert`") \
                from None

    @property
    def names(self) -> list[str]:
        return list(self.infos)

    def read(self, name: str) -> bytes:
        info = self.infos[name]
        try:
            if info.compress_type == ZIP_ZSTD and info.compress_type not in _native_methods():
                return _zstd_member(self.src.data, info)
            return self.zf.read(info)
        except _archive_errors() as exc:
            method = {0: "stored", 8: "deflate", 12: "bzip2", 14: "lzma", ZIP_ZSTD: "zstd"}.get(
                info.compress_type, f"unknown method {info.compress_type}")
            raise InputError(f"{self.src.name}: member {name!r} of the .eval archive cannot be read ({method}: "
                             f"{_why(exc)}); the archive is damaged or uses a compression mrcstats does not "
                             f"read") from None

    def json(self, name: str) -> Any:
        data = self.read(name)
        try:
            return self.src.loads(data, f"member {name!r}")
        except json.JSONDecodeError as exc:
            raise InputError(f"{self.src.name}: member {name!r} of the .eval archive is not valid JSON "
                             f"({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
        except InputError as exc:
            raise InputError(str(exc)) from None


def _native_methods() -> set[int]:
    """Compression methods this Python's zipfile reads itself (3.14 adds zstd)."""
    return {0, 8, 12, 14} | ({ZIP_ZSTD} if getattr(zipfile, "ZIP_ZSTANDARD", None) == ZIP_ZSTD else set())


def looks_like_eval_archive(names: list[str]) -> bool:
    """True for the member names of an Inspect ``.eval`` archive (a finished, stopped or killed run)."""
    return ("header.json" in names or "_journal/start.json" in names
            or any(n.startswith("samples/") for n in names))


def archive_names(src: Source) -> list[str]:
    """Member names of a zip file (damage raises one InputError naming the file)."""
    return _Archive(src).names


def _eval_archive(src: Source) -> tuple[dict[str, Any], bool]:
    """An Inspect ``.eval`` archive as one JSON-log dict, and whether its ``header.json`` was missing."""
    ar = _Archive(src)
    names = ar.names
    if "header.json" in names:
        head, killed = ar.json("header.json"), False
    elif "_journal/start.json" in names:
        head, killed = ar.json("_journal/start.json"), True
    else:
        raise InputError(f"{src.name}: a zip archive without header.json or _journal/start.json: not an Inspect "
                         f".eval log")
    if not isinstance(head, dict):
        raise InputError(f"{src.name}: header.json of the .eval archive is not a JSON object")
    samples = [ar.json(n) for n in sorted(n for n in names if n.startswith("samples/") and n.endswith(".json"))]
    return {**head, "samples": samples}, killed


def inspect_log(src: Source) -> dict[str, Any]:
    """One Inspect log (a JSON log, or a ``.eval`` archive's members joined) as the JSON log's dict."""
    obj = _eval_archive(src)[0] if src.binary else src.json()
    if not isinstance(obj, dict) or not isinstance(obj.get("samples"), list):
        raise InputError(f"{src.name}: not an Inspect AI log (no 'samples' list)")
    return obj


def sample_scores(src: Source, i: int, s: Any) -> dict[str, Any]:
    """The ``scores`` of sample ``i`` (0-based) of a log, ``{scorer: score}`` (empty when it has none); a sample
    that is not an object, or scores that are not an object, is an InputError naming the sample."""
    if not isinstance(s, dict):
        raise InputError(f"{src.name}: sample {i + 1} is not a JSON object")
    scores = s.get("scores") or {}
    if not isinstance(scores, dict):
        raise InputError(f"{src.name}: sample {i + 1} (id {s.get('id')!r}): 'scores' is a "
                         f"{type(scores).__name__}, expected an object of scorer name to score")
    return scores


# ------------------------------------------------------------------------------------------ the values
def _content(msg: Any) -> str | None:
    if msg is None:
        return None
    if isinstance(msg, str):
        return msg
    if isinstance(msg, list):  # content parts
        parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in msg]
        return "".join(parts)
    return str(msg)


def _text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, list):
        if all(isinstance(x, str) for x in v):
            return ", ".join(v)
        if all(isinstance(x, dict) for x in v):  # chat messages
            return "\n".join(_content(x.get("content")) or "" for x in v)
        return json.dumps(v, ensure_ascii=False)
    return str(v)


def value_to_float(v: Any) -> float | None:
    """Inspect's ``value_to_float()`` (inspect_ai.scorer): ``C`` 1, ``P`` 0.5, ``I``/``N`` 0, numbers as
    they are, ``yes``/``true`` 1, ``no``/``false`` 0, numeric text as its number; ``None`` for anything else
    (Inspect warns and uses 0 there; mrcstats refuses it)."""
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        if v in INSPECT_VALUES:
            return INSPECT_VALUES[v]
        low = v.strip().lower()
        if low in ("yes", "true"):
            return 1.0
        if low in ("no", "false"):
            return 0.0
        try:
            f = float(low)
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def _binary(v: Any) -> tuple[bool, Any]:
    """(is the value binary, its ``correct``): ``C``/``I``/``N``, booleans, 0/1."""
    if isinstance(v, bool):
        return True, v
    if isinstance(v, (int, float)):
        return (v in (0, 1)), (v == 1 if v in (0, 1) else None)
    if isinstance(v, str):
        key = v.strip().upper()
        if key in _BINARY:
            return True, _BINARY[key]
        f = value_to_float(v)
        return (f in (0.0, 1.0)), (f == 1.0 if f in (0.0, 1.0) else None)
    return False, None


#: Inspect's NOANSWER value (``inspect_ai.scorer.NOANSWER``)
NOANSWER = "N"


def inspect_outcome(value: Any, graded: bool) -> tuple[Any, float | None]:
    """``(correct, score)`` of one Inspect score value, the reader's one mapping: ``N`` (no answer) is
    invalid (``(None, None)``); otherwise ``score`` = :func:`value_to_float` and ``correct`` the binary value
    (``None`` in a ``graded`` log)."""
    if isinstance(value, str) and value.strip().upper() == NOANSWER:
        return None, None
    return (None if graded else _binary(value)[1]), value_to_float(value)


def _first_line(err: Any) -> str:
    """The first line of an Inspect sample error (its message is often a repr with an escaped newline)."""
    msg = err.get("message") if isinstance(err, dict) else err
    lines = str(msg or "").strip().replace("\\n", "\n").splitlines()
    return (lines[0][:120] + ("..." if len(lines[0]) > 120 else "")) if lines else "(no message)"


def _cancelled(err: Any) -> bool:
    msg = err.get("message") if isinstance(err, dict) else err
    return str(msg or "").lstrip().startswith("CancelledError")


# ------------------------------------------------------------------------------------------ the reader
def read_inspect(src: Source, model: str | None = None, scorer: str | None = None) -> pd.DataFrame:
    """Read one Inspect AI log (JSON, or a ``.eval`` archive) into rows with canonical field names.

    Args:
        src: the loaded file.
        model: the model name when the log names none.
        scorer: the scorer to read (default: the log's first scorer).

    Returns:
        One row per scored sample-epoch (see the module docstring), with ``attrs["skipped"]``
        (``{reason: sample-epochs}``), ``attrs["invalidated"]`` and ``attrs["notes"]``.
    """
    killed = False
    if src.binary:
        obj, killed = _eval_archive(src)
    else:
        obj = src.json()
    if not isinstance(obj, dict) or not isinstance(obj.get("samples"), list):
        raise InputError(f"{src.name}: not an Inspect AI log (no 'samples' list)")
    ev = obj.get("eval") if isinstance(obj.get("eval"), dict) else {}
    status = "killed" if killed else obj.get("status")
    task = str(ev.get("task") or src.stem)
    samples = obj["samples"]
    notes: list[str] = []
    skipped: dict[str, int] = {}
    errors: list[str] = []
    scored: list[tuple[int, dict[str, Any], Any]] = []
    name = scorer
    for i, s in enumerate(samples):
        scores = sample_scores(src, i, s)
        if not scores:
            err = s.get("error")
            reason = CANCELLED if err and _cancelled(err) else ERRORED
            skipped[reason] = skipped.get(reason, 0) + 1
            errors.append(f"sample {s.get('id')!r} epoch {s.get('epoch', 1)}: "
                          + (_first_line(err) if err else "no score and no error recorded"))
            continue
        if name is None:
            name = next(iter(scores))
        if name not in scores:
            if scorer is not None:
                raise InputError(f"{src.name}: sample {i + 1} (id {s.get('id')!r}) has no score from scorer "
                                 f"{scorer!r}; its scorers: {', '.join(scores)}")
            reason = f"no score from scorer {name!r}"
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        sc = scores[name]
        scored.append((i, s, sc.get("value") if isinstance(sc, dict) else sc))
    graded = any(not _binary(v)[0] for _, _, v in scored)
    reducers = ev["config"].get("epochs_reducer") if isinstance(ev.get("config"), dict) else None
    reducer = ",".join(str(r) for r in reducers) if isinstance(reducers, list) and reducers else "mean"
    rows = []
    for i, s, value in scored:
        if isinstance(value, (dict, list)):
            raise InputError(f"{src.name}: sample {i + 1} (id {s.get('id')!r}): scorer {name!r} gives several "
                             f"values ({', '.join(map(str, value))}); only single-value scorers are read "
                             f"(pass another scorer)")
        f = value_to_float(value) if value is not None else None
        if f is None or not math.isfinite(f):
            raise InputError(f"{src.name}: sample {i + 1} (id {s.get('id')!r}): scorer {name!r} gives "
                             f"{value!r}, not a score (C/I/P/N, a number, yes/no); pass another scorer")
        out = s.get("output") if isinstance(s.get("output"), dict) else {}
        choices = out.get("choices") if isinstance(out.get("choices"), list) else []
        msg = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
        resp = _content(msg.get("content")) if isinstance(msg, dict) else None
        epoch = s.get("epoch", 1)
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
            raise InputError(f"{src.name}: sample {i + 1} (id {s.get('id')!r}) has epoch {epoch!r}; Inspect "
                             f"epochs are whole numbers from 1")
        sc = s["scores"][name]
        sid = str(s.get("id", i + 1))
        correct, f = inspect_outcome(value, graded)
        rows.append({
            "item": f"{task}:{sid}",
            "trial": epoch - 1,
            "correct": correct,
            "score": f,
            "response": resp,
            "pred": sc.get("answer") if isinstance(sc, dict) else None,
            "gold": _text(s.get("target")),
            "question": _text(s.get("input")),
            "scorer": name,
            "value": str(value),
            "reducer": reducer,
            "invalidated": s.get("invalidation") is not None,
            "task": task,
            "sample_id": sid,
        })
    if not rows:
        raise InputError(f"{src.name}: the Inspect log holds no scored sample (status {status!r}, "
                         f"{plural(len(samples), 'sample')} in the log" + (f", {len(errors)} errored: {errors[0]}"
                                                                    if errors else "") + ")")
    df = pd.DataFrame(rows)
    df["score"] = df["score"].astype("Float64")
    df["invalidated"] = df["invalidated"].astype("boolean")
    df["model"] = ev.get("model") or model
    if df["model"].isna().all():
        raise InputError(f"{src.name}: the log names no model; pass --model NAME")
    expected = _expected_samples(ev)
    if status not in (None, "success") and expected is not None:
        missing = expected - len(samples)
        if missing > 0:
            skipped[KILLED if killed else f"not run: Inspect log status {status!r}"] = missing
    if errors:
        notes.append(f"{len(errors)} sample-epoch(s) have no score (errored or cancelled; left out, as Inspect "
                     f"leaves them out of its metrics): " + "; ".join(errors[:5])
                     + (f"; ... {len(errors) - 5} more" if len(errors) > 5 else ""))
    if status not in (None, "success"):
        how = "was killed (no header.json; read from _journal/start.json)" if killed else \
            f"ended with status {status!r}"
        never = skipped.get(KILLED if killed else f"not run: Inspect log status {status!r}", 0)
        notes.append(f"the Inspect run {how}: read {len(rows)}" + (f" of {expected}" if expected is not None else "")
                     + " sample-epoch(s) with a score" + (f", {never} never ran (counted as skipped)" if never else ""))
    n_inv = int(df["invalidated"].sum())
    if n_inv:
        notes.append(f"{n_inv} sample-epoch(s) invalidated with invalidate_samples (column 'invalidated'); "
                     f"Inspect's own results still count them")
    for reason, n in skipped.items():
        notes.append(f"skipped {n} sample-epoch(s): {reason}")
    df.attrs["skipped"] = skipped
    df.attrs["invalidated"] = n_inv
    df.attrs["notes"] = notes
    if notes:
        warnings.warn(f"{src.name}: " + "; ".join(n for n in notes if not n.startswith("skipped ")), stacklevel=2)
    n_none = int((df["value"].str.strip().str.upper() == NOANSWER).sum())
    if n_none:  # a count, not a warning: every output shows the invalid answers
        notes.append(f"{n_none} sample-epoch(s) scored {NOANSWER!r} (Inspect's no answer) by scorer {name!r}: invalid "
                     f"answers (scored 0 as Inspect's value_to_float does, or left out with --invalid exclude)")
    return df


def _expected_samples(ev: dict[str, Any]) -> int | None:
    """Samples x epochs the run was set up for (``eval.dataset`` and ``eval.config``), when the log says."""
    ds = ev.get("dataset") if isinstance(ev.get("dataset"), dict) else {}
    cfg = ev.get("config") if isinstance(ev.get("config"), dict) else {}
    n = len(ds["sample_ids"]) if isinstance(ds.get("sample_ids"), list) else ds.get("samples")
    if not isinstance(n, int) or isinstance(n, bool):
        return None
    limit = cfg.get("limit")
    if isinstance(limit, int) and not isinstance(limit, bool):
        n = min(n, limit)
    epochs = cfg.get("epochs") or 1
    return n * epochs if isinstance(epochs, int) and not isinstance(epochs, bool) else n
