"""What a format's ``detect`` looks at: one loaded file's content, parsed lazily and once.

:class:`Content` wraps a :class:`~mrcstats.io.source.Source` and offers the views the
detectors of :mod:`mrcstats.io.formats` ask for -- the zip member names of an archive, the
column names of a Parquet file, the whole JSON document or (JSON lines) the first record,
the header of a delimited text file -- each computed on first use, so detection reads no
more of a file than the formats tried before a match need.
"""
from __future__ import annotations

import io
import json
from functools import cached_property
from typing import Any

from mrcstats.errors import InputError
from mrcstats.io.source import ZIP_MAGIC, Source

PARQUET_MAGIC = b"PAR1"


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
        from mrcstats.io.detect import header_columns

        return header_columns(self.src)

    @cached_property
    def first_line(self) -> str:
        from mrcstats.io.detect import first_line

        return first_line(self.src.data)
