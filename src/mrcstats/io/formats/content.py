"""What a format's ``detect`` looks at: one loaded file's content, parsed lazily and once.

:class:`Content` wraps a :class:`~mrcstats.io.source.Source` and offers the views the
detectors of :mod:`mrcstats.io.formats` ask for -- the zip member names of an archive, the
column names of a Parquet file, the whole JSON document or (JSON lines) the first record,
the header of a delimited text file -- each computed on first use, so detection reads no
more of a file than the formats tried before a match need.

The text-table helpers the detectors and the readers share (:func:`first_line`, :func:`header_columns`,
:func:`is_mskqa_header`) live here too: this module imports only :mod:`mrcstats.io.source`, so a reader
that needs them imports no registry and the registry's lazy imports of the readers close no circle.
"""
from __future__ import annotations

import csv
import io
import json
import re
from functools import cached_property
from typing import Any

from mrcstats.errors import InputError
from mrcstats.io.source import ZIP_MAGIC, Source

PARQUET_MAGIC = b"PAR1"
#: a maskcode answer column: ``answer_<model>_<masking rate>``
MSKQA_ANSWER_RE = re.compile(r"^answer_(.+)_(\d+(?:\.\d+)?)$")


def first_line(data: bytes) -> str:
    """The first line of a text file; a line ends at CRLF, LF or a bare CR (as pandas reads it)."""
    head = data[: 1 << 20]
    ends = [i for i in (head.find(b"\n"), head.find(b"\r")) if i >= 0]
    line = head[: min(ends)] if ends else head
    return line.decode("utf-8", errors="replace")


def header_columns(src: Source, delimiter: str | None = None) -> list[str]:
    """Column names of a delimited text file (its first record; a quoted name may hold a line break)."""
    line = first_line(src.data)
    if delimiter is None:
        delimiter = "\t" if line.count("\t") > line.count(",") else ","
    text = src.data[: 1 << 20].decode("utf-8", errors="replace")
    try:
        return next(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True), [])
    except csv.Error as exc:
        raise InputError(f"{src.name}: cannot read the header line as {'TSV' if delimiter == chr(9) else 'CSV'} "
                         f"({exc}); the first line must name the columns") from None


def is_mskqa_header(cols: list[str]) -> bool:
    """True for maskcode outputs: ``answer_<model>_<MR>`` columns and no canonical ``model`` column."""
    return any(MSKQA_ANSWER_RE.match(c) for c in cols) and "model" not in cols


class Content:
    """Lazy views of one loaded file for format detection."""

    def __init__(self, src: Source) -> None:
        self.src = src

    @property
    def binary(self) -> bool:
        """A binary file (Parquet or zip); everything else is UTF-8 text."""
        return self.src.binary

    @property
    def is_zip(self) -> bool:
        return self.src.binary and self.src.data[:4] == ZIP_MAGIC

    @property
    def is_parquet(self) -> bool:
        return self.src.binary and not self.is_zip

    @cached_property
    def zip_names(self) -> list[str]:
        """Member names of a zip archive (a corrupt archive raises :class:`InputError`)."""
        import zipfile

        try:
            return zipfile.ZipFile(io.BytesIO(self.src.data)).namelist()
        except zipfile.BadZipFile as exc:
            raise InputError(f"{self.src.name}: corrupt zip archive ({exc})") from None

    @cached_property
    def parquet_columns(self) -> tuple[str, ...]:
        """Top-level column names of a Parquet file (``()`` when its footer cannot be read: the reader says why)."""
        try:
            import pyarrow.parquet as pq

            return tuple(pq.read_schema(io.BytesIO(self.src.data)).names)
        except Exception:  # noqa: BLE001 - any unreadable footer: not ours to judge here
            return ()

    @property
    def looks_json(self) -> bool:
        """Text whose first non-blank character opens a JSON object or array."""
        return not self.binary and self.src.data.lstrip()[:1] in (b"{", b"[")

    @cached_property
    def document(self) -> Any:
        """The whole file as one JSON document, or ``None`` when it does not parse as one (JSON lines)."""
        if not self.looks_json:
            return None
        try:
            return self.src.json()
        except InputError:
            return None

    @cached_property
    def record(self) -> Any:
        """The document, or for JSON lines the first line's value.

        Raises :class:`InputError` when the file looks like JSON but neither the whole file nor its
        first line parses.
        """
        if self.document is not None:
            return self.document
        first = self.src.data.lstrip().split(b"\n", 1)[0]
        try:
            return json.loads(first)
        except ValueError:  # JSONDecodeError, or bytes json guesses to be UTF-16/32 that do not decode
            raise InputError(f"{self.src.name}: looks like JSON but neither the file nor its first line "
                             f"parses; fix the JSON or pass --format") from None

    @property
    def is_json_lines(self) -> bool:
        """JSON lines: the file is not one document but its first line is a JSON value."""
        return self.looks_json and self.document is None and self.record is not None

    @property
    def is_text_table(self) -> bool:
        """Delimited text: neither binary nor JSON."""
        return not self.binary and not self.looks_json

    @cached_property
    def columns(self) -> list[str]:
        """Column names of a delimited text file (its first record)."""
        return header_columns(self.src)

    @cached_property
    def first_line(self) -> str:
        return first_line(self.src.data)
