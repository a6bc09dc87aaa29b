"""Helpers shared by the CLI command modules."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from mrcstats._jsonout import emit_json
from mrcstats._words import plural
from mrcstats.errors import InputError

#: ``action.mrcstats_path``: "input" for an argument naming files or folders that are read, "output" for one
#: that is written (:func:`add_input`, :func:`add_output`); tests/cli/test_output_rule.py requires it of every
#: argument that looks like a path
PATH_ROLE = "mrcstats_path"


def add_input(p: Any, *names: str, **kw: Any) -> argparse.Action:
    """``p.add_argument(*names, **kw)`` for files or folders the command reads: an output may not be one of
    them nor lie inside one (:func:`check_outputs`). ``p``: a parser or an argument group."""
    act = p.add_argument(*names, **kw)
    setattr(act, PATH_ROLE, "input")
    p.set_defaults(_inputs=(*(p.get_default("_inputs") or ()), act.dest))
    return act


def add_output(p: Any, *names: str, kind: str = "file", suffixes: tuple[str, ...] | None = None,
               **kw: Any) -> argparse.Action:
    """``p.add_argument(*names, **kw)`` for a path the command writes; the one output rule of every writer.

    Before the handler runs, :func:`check_outputs` replaces the value by a checked
    :class:`mrcstats._files.OutputPath` (or stops with exit 2 and one line): not one of the command's inputs
    (:func:`add_input`) nor inside an input folder, the folder above it exists, not a folder (``kind="file"``)
    or a file (``kind="folder"``), writable, and -- with ``suffixes`` -- one of those endings. ``kind="auto"``:
    a folder when the value ends in ``/``, else a file (``ingest --out``). Write through the value's methods
    (``args.out.write_table(df)``, ``with args.out.atomic() as tmp``) or give it to an API that writes
    atomically. ``p``: a parser or an argument group.
    """
    act = p.add_argument(*names, **kw)
    setattr(act, PATH_ROLE, "output")
    flag = next((n for n in names if n.startswith("--")), act.dest)
    p.set_defaults(_outputs=(*(p.get_default("_outputs") or ()), (act.dest, flag, kind, suffixes)))
    return act


def check_outputs(args: argparse.Namespace) -> None:
    """Check every declared output of the parsed command (:func:`add_output`) against its inputs
    (:func:`add_input`); the value becomes a :class:`mrcstats._files.OutputPath`. Called by
    :func:`mrcstats.cli.main` before the handler."""
    from mrcstats._files import OutputPath

    inputs: list[Any] = []
    for dest in getattr(args, "_inputs", ()) or ():
        v = getattr(args, dest, None)
        inputs += [x for x in (v if isinstance(v, (list, tuple)) else [v]) if isinstance(x, str) and x]
    for dest, flag, kind, suffixes in getattr(args, "_outputs", ()) or ():
        value = getattr(args, dest, None)
        if value is None:
            continue
        value = os.path.expanduser(value)     # (a quoted ~/...: the home folder, as the shell would)
        if kind == "auto":
            kind = "folder" if value.endswith(("/", "\\")) else "file"
        setattr(args, dest, OutputPath(value, inputs=inputs, what=flag, kind=kind,
                                       suffixes=suffixes if kind == "file" else None))


def add_json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true",
                   help="print exactly one JSON object on stdout (messages go to stderr)")


def info(msg: str) -> None:
    """A human-readable message on stderr (never stdout)."""
    print(msg, file=sys.stderr)


def output(args: argparse.Namespace, obj: Any, text: str | None = None) -> int:
    """Print ``obj`` as JSON with ``--json``, else ``text`` on stdout; return exit code 0."""
    if getattr(args, "json", False):
        emit_json(obj)
    else:
        print(text if text is not None else obj)
    return 0


def parse_kv(items: list[str] | None, flag: str) -> dict[str, str]:
    """Parse repeated ``NAME=VALUE`` flags into a dict (later ones win)."""
    out: dict[str, str] = {}
    for it in items or []:
        if "=" not in it:
            raise InputError(f"{flag} expects NAME=VALUE, got {it!r}")
        k, v = it.split("=", 1)
        if not k:
            raise InputError(f"{flag} expects NAME=VALUE, got {it!r}")
        out[k.strip()] = v.strip()
    return out


def add_model_args(p: argparse.ArgumentParser, example: str) -> None:
    """DATA, --formula, --contrasts and --levels of the mixed-model commands (glmer, lmer)."""
    add_input(p, "data", nargs="+", metavar="DATA", help="a table or log: file(s) or folder(s) of one format")
    p.add_argument("--formula", required=True, help=f"R/lme4 formula, e.g. '{example}'")
    p.add_argument("--contrasts", action="append", default=[], metavar="NAME=sum|treatment",
                   help="contrasts of a factor (default treatment; repeatable)")
    p.add_argument("--levels", action="append", default=[], metavar="NAME=a,b,c",
                   help="level order of a factor (default: sorted by code point; repeatable)")


def parse_levels(items: list[str] | None) -> dict[str, list[str]]:
    """``--levels NAME=a,b,c`` (repeatable) as ``{NAME: [a, b, c]}``; an empty list is an InputError."""
    from mrcstats.errors import InputError

    levels = {k: [x.strip() for x in v.split(",") if x.strip()] for k, v in parse_kv(items, "--levels").items()}
    for k, v in levels.items():
        if not v:
            raise InputError(f"--levels {k}=...: give the levels separated by commas")
    return levels


def parse_list(text: str | None, flag: str, cast=str) -> list:
    """Parse a comma-separated list flag (``--cutoffs 0,5,10``)."""
    if text is None:
        return []
    try:
        return [cast(x.strip()) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise InputError(f"{flag}: cannot read {text!r} as a comma-separated list ({exc})") from None


class Once(argparse.Action):
    """A single-valued option that refuses to be given twice (a repeated grouping flag would otherwise keep
    only the last value, silently)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest, None) is not None:  # (these options default to None)
            parser.error(f"{option_string} given twice ({getattr(namespace, self.dest)!r} and {values!r}); "
                         f"it takes one column")
        setattr(namespace, self.dest, values)


def add_by_option(p: argparse.ArgumentParser, default: str) -> None:
    """``--by COL[,COL...]``, repeatable: ``--by A --by B`` is ``--by A,B`` (never only the last one)."""
    p.add_argument("--by", action="append", metavar="COL[,COL...]", default=None,
                   help=f"grouping columns, comma-separated or repeated (default: {default})")
    p.set_defaults(by_default=default)


def by_columns(args: argparse.Namespace) -> list[str]:
    """The ``--by`` columns: every repeated flag's list joined in order (checked later, with the log's
    columns, by :func:`mrcstats.io.schema.check_grouping`)."""
    given = args.by if args.by is not None else [args.by_default]
    return [c for text in given for c in parse_list(text, "--by")]


def add_format_option(p: argparse.ArgumentParser) -> None:
    """``--format FMT``: the input formats of the registry (:data:`mrcstats.io.formats.FORMATS`)."""
    from mrcstats.io.formats import FORMATS

    p.add_argument("--format", dest="fmt", choices=FORMATS, metavar="FMT",
                   help=f"source format (default: detected by content): {', '.join(FORMATS)}")


def add_log_options(p: argparse.ArgumentParser, on_duplicate: bool = True) -> None:
    """The options every command that reads a log takes, with one meaning everywhere (as ``ingest``)."""
    add_format_option(p)
    add_map_option(p)
    add_model_option(p)
    add_threshold_option(p)
    if on_duplicate:
        p.add_argument("--on-duplicate", choices=("error", "first", "last"), default="error",
                       help="repeated (model, item, trial, condition) keys: error (default) or keep first/last")


def add_map_option(p: argparse.ArgumentParser, legacy_cols: bool = False) -> None:
    """``--map FIELD=COLUMN`` (repeatable), as ``ingest`` takes it. ``legacy_cols``: also accept the old
    ``--model-col COL`` / ``--item-col COL`` of ``irt``/``subset``/``subset-eval``, deprecated aliases of
    ``--map model=COL`` / ``--map item=COL`` (:func:`map_arg` warns on stderr)."""
    p.add_argument("--map", action="append", metavar="FIELD=COLUMN", default=[],
                   help="name the source column for a log field, e.g. --map item=question_id (repeatable)")
    if legacy_cols:
        for fld in ("model", "item"):
            p.add_argument(f"--{fld}-col", dest=f"legacy_{fld}_col", metavar="COL", action=Once,
                           help=f"deprecated: use --map {fld}=COL")


def map_arg(args: argparse.Namespace, cmd: str) -> dict[str, str]:
    """The ``--map`` of a call as ``{field: column}``, with the deprecated ``--model-col``/``--item-col``
    folded in (one stderr warning each; a clash with ``--map`` for the same field is an error)."""
    mapping = parse_kv(getattr(args, "map", None), "--map")
    for fld in ("model", "item"):
        col = getattr(args, f"legacy_{fld}_col", None)
        if col is None:
            continue
        info(f"mrcstats {cmd}: --{fld}-col is deprecated; use --map {fld}={col}")
        if fld in mapping and mapping[fld] != col:
            raise InputError(f"--{fld}-col {col!r} and --map {fld}={mapping[fld]} name different columns; "
                             f"give only --map {fld}=COLUMN")
        if col != fld:
            mapping[fld] = col
    return mapping


def add_model_option(p: argparse.ArgumentParser, dest: str = "model") -> None:
    """``--model NAME`` (every file of the call) or ``--model PATH=NAME`` (the files under PATH), repeatable."""
    p.add_argument("--model", dest=dest, action="append", metavar="NAME|PATH=NAME",
                   help="model name for sources that do not name one; PATH=NAME names the files under PATH "
                        "(repeat it to name several runs in one call)")


def add_threshold_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threshold", type=float, default=None, metavar="T",
                   help="graded scores (partial credit, f1, judge ratings): correct = score >= T, so analyses "
                        "that need a binary outcome can run (default: correct stays empty for graded rows)")


def model_arg(values: list[str] | str | None) -> str | dict[str, str] | None:
    """``--model`` values as :func:`mrcstats.io.read_log` takes them: one name, or ``{PATH: NAME}`` when
    they are ``PATH=NAME`` (PATH an existing file or folder); a single plain name may stand beside them
    for the other files."""
    import os

    if values is None or isinstance(values, str):
        return values
    named: dict[str, str] = {}
    plain: list[str] = []
    for v in values:
        k, sep, name = v.rpartition("=")
        if sep and k and os.path.exists(k):
            if not name.strip():
                raise InputError(f"--model {v!r}: give a name after {k}=")
            named[k] = name.strip()
        else:
            plain.append(v)
    if len(plain) > 1:
        raise InputError(f"--model given {len(plain)} plain names ({', '.join(map(repr, plain))}); one name names "
                         f"every file: name runs by path with --model PATH=NAME (PATH an existing file or folder)")
    if not named:
        return plain[0] if plain else None
    if plain:
        named["*"] = plain[0]
    return named


def read_log_args(args: argparse.Namespace, paths: Any, cmd: str, what: str = "", report: bool = True,
                  lazy: bool = False):
    """Read a log the way ``ingest`` does (``--format``, ``--map``, ``--model``, ``--on-duplicate``) through
    :func:`mrcstats.io.open_log` (``lazy``: a single dataset folder is opened lazily, as it decides), and
    report every skipped row on stderr."""
    from mrcstats.io import open_log

    mapping = map_arg(args, cmd)
    log = open_log(paths, format=getattr(args, "fmt", None), mapping=mapping or None,
                   model=model_arg(getattr(args, "model", None)), on_duplicate=getattr(args, "on_duplicate", "error"),
                   threshold=getattr(args, "threshold", None), lazy=lazy)
    if report:
        report_skipped(log, cmd, what)
    return log


def parse_model_args(args: argparse.Namespace, kind: str) -> tuple[Any, dict[str, str], dict[str, list[str]]]:
    """The parsed ``--formula`` (a :class:`~mrcstats.models.formula.ModelSpec`, parsed here once and handed to
    the fit), ``--contrasts`` and ``--levels`` of a model command (``glmer``, ``lmer``, ``clmm``), its
    ``--emmeans`` options checked against the formula, and what its options ask of a fit of ``kind``
    (``--confint METHOD``, ``--emmeans``, ``--drop1``, ...) checked against the capability table
    (:func:`mrcstats.models.family_table.require_options`), before any data is read."""
    from mrcstats.models.family_table import require_options
    from mrcstats.models.formula import parse_formula

    require_options(args, kind)
    contrasts = parse_kv(args.contrasts, "--contrasts")
    levels = parse_levels(args.levels)
    spec = parse_formula(args.formula)
    check_emmeans_args(args, spec)
    return spec, contrasts, levels


def read_data_args(args: argparse.Namespace, who: str, columns: Any = None, lazy: bool = False) -> Any:
    """The data table of a model command (``glmer``, ``lmer``): ``args.data`` read with the shared log
    options (``--format``, ``--map``, ``--model``, ``--on-duplicate``) through :func:`mrcstats.io.open_log`
    (``table=True``; ``columns``: the columns used when no pandas frame is needed; ``lazy``: a dataset folder
    opened lazily), skipped rows reported for ``who``."""
    from mrcstats.io import open_log

    data = open_log(args.data, format=args.fmt, mapping=parse_kv(args.map, "--map") or None,
                    model=model_arg(args.model), on_duplicate=args.on_duplicate, table=True, columns=columns,
                    lazy=lazy)
    report_skipped(data, who)
    return data


def model_output(args: argparse.Namespace, m: Any, cmd: str) -> tuple[dict[str, Any], list[str]]:
    """The JSON object and the text of a fitted mixed model (``glmer``, ``lmer``, ``clmm``): ``m.to_dict()`` and
    ``m.summary()``; with ``--json`` the fit's messages go to stderr (the text summary lists them once);
    ``--ranef`` adds the conditional modes and variances to both."""
    if getattr(args, "json", False):
        for msg in m.messages:
            info(f"mrcstats {cmd}: {msg}")
    obj = m.to_dict()
    as_json = getattr(args, "json", False)
    # with --json the text is never printed: not built; --correlation (glmer) forces the fixed-effect correlations
    text = [] if as_json else [m.summary(correlation=True) if getattr(args, "correlation", False) else m.summary()]
    if getattr(args, "ranef", False):
        obj["ranef"] = m.ranef_dict()
        for g, df in ({} if as_json else m.ranef).items():
            text.append(f"\nRandom effects ({g}): conditional modes and variances\n{df.to_string()}")
    return obj, text


def add_emmeans_args(p: argparse.ArgumentParser, types: str | None = None) -> None:
    """``--emmeans SPEC``, ``--by VAR``, ``--pairs``, ``--adjust`` (and ``--type`` when the model has a response
    scale; ``types`` is its help) of the mixed-model commands."""
    p.add_argument("--emmeans", metavar="SPEC",
                   help="estimated marginal means of SPEC (a factor, or 'A:B'), as R's emmeans(m, SPEC)")
    p.add_argument("--by", metavar="VAR", action=Once, help="with --emmeans: means (and pairs) within each level of VAR")
    if types:
        p.add_argument("--type", choices=("link", "response"), default="link", help=f"with --emmeans: {types}")
    p.add_argument("--pairs", action="store_true", help="with --emmeans: pairwise contrasts (pairs(em))")
    p.add_argument("--adjust", choices=("tukey", "holm", "bonferroni", "sidak", "none"), default="tukey",
                   help="with --pairs: p-value adjustment (default tukey, as emmeans)")


def check_emmeans_args(args: argparse.Namespace, spec: Any) -> None:
    """The ``--emmeans`` options make sense together, and SPEC/VAR name variables of the formula ``spec`` (the
    parsed ``--formula``; before the fit)."""
    if not args.emmeans:
        if args.pairs or args.by or getattr(args, "type", "link") != "link" or args.adjust != "tukey":
            raise InputError("--by, --type, --pairs and --adjust need --emmeans SPEC (e.g. --emmeans LLM)")
        return
    from mrcstats.models.emmeans import resolve_specs

    resolve_specs(spec, args.emmeans, args.by)  # bad names fail before the fit


def emmeans_block(args: argparse.Namespace, m: Any, obj: dict[str, Any], text: list[str]) -> None:
    """``--emmeans/--by/--type/--pairs/--adjust``: adds ``"emmeans"`` and ``"pairs"`` record lists."""
    if not args.emmeans:
        return
    from mrcstats.models.emmeans import emmeans, pairs

    em = emmeans(m, args.emmeans, by=args.by, type=getattr(args, "type", "link"),
                 lmer_df=getattr(args, "ddf", "satterthwaite"))   # lmer: --ddf
    obj["emmeans"] = em.records()
    text.append("\n" + em.summary())
    if args.pairs:
        pr = pairs(em, adjust=args.adjust)
        obj["pairs"] = pr.records()
        text.append("\n" + pr.summary())


def report_skipped(log: Any, cmd: str, what: str = "") -> None:
    """One stderr line per reason rows were left out while reading (``log.attrs["skipped"]``), and one per review
    applied to the log (``log.attrs["relabel"]``, :func:`mrcstats.io.relabel.relabel_notes`)."""
    attrs = getattr(log, "attrs", {}) or {}
    for why, n in (attrs.get("skipped") or {}).items():
        if n:
            info(f"mrcstats {cmd}: {what + ': ' if what else ''}{plural(n, 'row')} skipped while reading: {why}")
    if attrs.get("relabel"):     # io.relabel imports pandas: only for a log that has been relabelled
        from mrcstats.io.relabel import relabel_notes

        for line in relabel_notes(attrs):
            info(f"mrcstats {cmd}: {what + ': ' if what else ''}{line}")
