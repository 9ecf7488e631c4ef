"""Pure stream validators, one module per API: frames (or a Transcript) in, findings out.

Each module has ``RULES`` (rule id -> description), ``validate(source, request=None)``,
``accumulate(event, snapshot)`` and ``final_message(source)``. ``validate_for(api, ...)`` picks
the module by API name: the one the API module names (``apis.get(api).GRAMMAR``), so a fourth API's
validator can live anywhere, its own module included (ALL_RULES holds the registered APIs' rules at import).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from harnesscheck.protocol import apis

from .findings import Finding, frames_and_request, rules_of

__all__ = [
    "ALL_RULES",
    "Finding",
    "frames_and_request",
    "module_for",
    "rules_of",
    "validate_for",
]

def module_for(api: str) -> ModuleType:
    """The grammar module of an API (its name or one of its ``ALIASES``): the module its API module names
    (``apis.get(api).GRAMMAR``), so a registered API brings its own; KeyError naming the known APIs otherwise."""
    module = apis.APIS.get(api) or next((m for m in apis.APIS.values() if api in m.ALIASES), None)
    if module is None:
        raise KeyError(f"no grammar for API {api!r}; known: {sorted(apis.NAMES)}")
    return importlib.import_module(module.GRAMMAR)


ALL_RULES: dict[str, str] = {r: d for name in apis.NAMES for r, d in module_for(name).RULES.items()}


def validate_for(api: str, source: Any, request: Any = None) -> list[Finding]:
    return module_for(api).validate(source, request)  # type: ignore[no-any-return]
