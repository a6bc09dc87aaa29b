"""The random-effect tables of a fit as plain records: what the fit produces, without pandas (issue 28).

:class:`VarCorrRow` is one row of lme4's ``as.data.frame(VarCorr(m))`` and :class:`RanefTable` one grouping
factor's ``ranef(m, condVar = TRUE)`` (level labels and one array per column). The optimizer
(:mod:`mrcstats.models.optimize`) builds them; :class:`~mrcstats.models.results.GlmerResult` keeps them and
turns them into pandas frames only when ``varcorr``/``ranef`` are read (:func:`varcorr_to_frame`,
:meth:`RanefTable.to_pandas`), so ``mrcstats glmer --json`` (``to_dict``, ``ranef_dict``, ``summary``) never
imports pandas. Frames handed in by callers that already have them (the lme4 engine, the crossed grid) are
turned into records by :func:`as_varcorr_rows` and :meth:`RanefTable.from_frame`, keeping their index dtype.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

VARCORR_COLUMNS = ("group", "name", "var2", "variance", "sd")


class VarCorrRow(NamedTuple):
    """A row of ``as.data.frame(VarCorr(m))``: an SD row (``var2`` None: ``variance``, ``sd`` of ``name``) or
    a correlation row (``variance`` the covariance, ``sd`` the correlation of ``name`` and ``var2``)."""

    group: str
    name: str
    var2: str | None
    variance: float
    sd: float


def as_varcorr_rows(vc: Any) -> tuple[VarCorrRow, ...]:
    """``vc`` as rows: a DataFrame with columns ``group, name, [var2,] variance, sd`` (``var2`` missing, None or
    NaN on SD rows) or an iterable of such rows (tuples or records)."""
    if hasattr(vc, "itertuples"):
        vc = vc.itertuples(index=False)
    out = []
    for r in vc:
        if not hasattr(r, "group"):
            r = VarCorrRow(*r)
        v2 = getattr(r, "var2", None)
        out.append(VarCorrRow(r.group, r.name, v2 if isinstance(v2, str) else None, float(r.variance), float(r.sd)))
    return tuple(out)


def named_series(values: np.ndarray, names: Sequence[str], name: str) -> pd.Series:
    """``values`` as a pandas Series indexed by ``names`` (a result's coefficient column, built when read)."""
    import pandas as pd

    return pd.Series(values, index=list(names), name=name)


def named_square(values: np.ndarray, names: Sequence[str]) -> pd.DataFrame:
    """A square matrix as a pandas frame with ``names`` as index and columns (a result's vcov, built when read)."""
    import pandas as pd

    names = list(names)
    return pd.DataFrame(values, index=names, columns=names)


def varcorr_to_frame(rows: Iterable[VarCorrRow]) -> pd.DataFrame:
    """The rows as lme4's ``as.data.frame(VarCorr(m))`` (columns ``group, name, var2, variance, sd``)."""
    import pandas as pd

    return pd.DataFrame([tuple(r) for r in rows], columns=list(VARCORR_COLUMNS))


@dataclass(frozen=True, eq=False)
class RanefTable:
    """One grouping factor's ``ranef(m, condVar = TRUE)``: ``columns[j]`` holds ``values[j]`` (one value per
    level of ``levels``); a random intercept alone has columns ``mode``/``condvar``, otherwise one per
    random-effect column then ``condvar:<column>``. ``index_dtype`` is that of the frame's index (object for
    the native fit's level labels)."""

    group: str
    levels: Sequence[Any]
    columns: tuple[str, ...]
    values: tuple[np.ndarray, ...]
    index_dtype: Any = object

    @classmethod
    def from_frame(cls, df: pd.DataFrame) -> RanefTable:
        """A table from a frame indexed by level (its index name is the group)."""
        return cls(group=df.index.name, levels=df.index, columns=tuple(df.columns),
                   values=tuple(df[c].to_numpy() for c in df.columns), index_dtype=df.index.dtype)

    def to_pandas(self) -> pd.DataFrame:
        """The frame indexed by level (index named by the group), one column per ``columns``."""
        import pandas as pd

        idx = pd.Index(self.levels, name=self.group, dtype=self.index_dtype)
        return pd.DataFrame(dict(zip(self.columns, self.values)), index=idx)

    def to_dict(self) -> dict[str, dict[str, float]]:
        """``{level: {column: value}}`` (JSON's ``ranef``), levels and columns as text."""
        cols = [str(c) for c in self.columns]
        vals = [np.asarray(v, dtype=float).tolist() for v in self.values]
        return {str(k): {c: float(v[i]) for c, v in zip(cols, vals)} for i, k in enumerate(self.levels)}


__all__ = ["VARCORR_COLUMNS", "RanefTable", "VarCorrRow", "as_varcorr_rows", "varcorr_to_frame"]
