"""Analysis plug-ins of the report: one module per analysis type, listed in :mod:`.registry`.

Each plug-in owns its spec keys, its computation (plain imports of :mod:`mrcstats.stats` and
:mod:`mrcstats.models`) and its layout (tables, figures, text) — see :mod:`.base` for the interface.
The rest of :mod:`mrcstats.report` only lays out what the plug-ins return.
"""
