"""mrcstats.features: token counts, syntactic density and wh-words of items.

``features(source, parser="auto", jobs=1, cache=None)`` returns one row per item; see
:mod:`mrcstats.features.core` for the measures (seed ``003_17297ae0d00b444c``).
"""
from __future__ import annotations

import sys
import types

from mrcstats.features.core import FeatureResult, compute_features, feature_columns, features, scale
from mrcstats.features.items import Item, ItemSet, items_from_frame, items_from_race, load_items

__all__ = [
           "FeatureResult",
           "Item",
           "ItemSet",
           "compute_features",
           "feature_columns",
           "features",
           "items_from_frame",
           "items_from_race",
           "load_items",
           "scale",
]


class _CallableModule(types.ModuleType):
    """``mrcstats.features(...)`` works even when Python has bound the name to this subpackage.

    Importing ``mrcstats.features.<sub>`` sets the attribute ``mrcstats.features`` to this
    module, shadowing the lazily exported function; calling the module calls :func:`features`.
    """

    def __call__(self, *args, **kwargs):
        return features(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
