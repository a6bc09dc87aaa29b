"""Project error types.

Every user-facing failure raises :class:`MrcstatsError` (or a subclass) with one
clear sentence: what went wrong, where (file, row, column) and how to fix it.
The CLI turns it into a single line on stderr and exit code 2, no traceback.
Never use ``assert`` for input validation.
"""
from __future__ import annotations


class MrcstatsError(Exception):
    """Base class of all errors mrcstats reports to the user (CLI exit code 2)."""

    exit_code = 2


class InputError(MrcstatsError, ValueError):
    """Bad input data or arguments: a missing column, an unreadable file, a bad value."""


class SchemaError(InputError):
    """A table does not follow the canonical response-log schema."""


class DependencyError(MrcstatsError, ImportError):
    """An optional dependency (R, lme4, rpy2, stanza, link-grammar, ...) is missing."""


class ModelError(MrcstatsError):
    """A model cannot be fitted as asked (e.g. a rank-deficient design, a one-level factor)."""
