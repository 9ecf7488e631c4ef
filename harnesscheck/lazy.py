"""Names a package exports but imports only on first use (PEP 562), so that importing a light part of
the kit does not load numpy, scipy or matplotlib. A leaf module: it imports nothing of the kit.

    __getattr__, __dir__ = lazy_exports(__name__, {"bootstrap_ci": "harnesscheck.stats.bootstrap", ...})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, table: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module's ``__getattr__`` and ``__dir__`` for ``table`` (public name -> the absolute module that
    defines it); a name once loaded is kept in the package's namespace."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *table})

    return __getattr__, __dir__
