"""Lazy module attributes (PEP 562), so ``import mrcstats`` and the CLI start fast."""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(module_name: str, exports: Mapping[str, str],
                 namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for a package whose names live in submodules.

    ``exports`` maps an exported name to the module defining it; the first access
    imports that module and caches the value in ``namespace`` (the package's globals).
    """
    def __getattr__(name: str) -> Any:
        try:
            source = exports[name]
        except KeyError:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace.get("__all__", ())) | set(exports))

    return __getattr__, __dir__
