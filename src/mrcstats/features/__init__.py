"""mrcstats.features: token counts, syntactic density and wh-words of items.

``features(source, parser="auto", jobs=1, cache=None)`` returns one row per item; see
:mod:`mrcstats.features.core` for the measures (seed ``003_17297ae0d00b444c``).
"""
from __future__ import annotations

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
