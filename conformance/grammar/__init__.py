"""Pure stream validators, one module per API: frames (or a Transcript) in, findings out.

Each module has ``RULES`` (rule id -> description), ``validate(source, request=None)``,
``accumulate(event, snapshot)`` and ``final_message(source)``. ``validate_for(api, ...)`` picks
the module by API name: the one the API module names (``apis.get(api).GRAMMAR``), so a fourth API's
validator can live anywhere, its own module included (ALL_RULES: the registered APIs' rules, read when asked).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from harnesscheck.protocol import apis
from harnesscheck.protocol.apis.base import Reading
from harnesscheck.protocol.wire.transcript import Transcript

from .findings import Finding, frames_and_request, rules_of

__all__ = [
    "ALL_RULES",
    "Finding",
    "all_rules",
    "frames_and_request",
    "module_for",
    "rules_of",
    "validate_for",
]

def module_for(api: str) -> ModuleType:
    """The grammar module of an API (its name or one of its ``ALIASES``): the module its API module names
    (``apis.get(api).GRAMMAR``), so a registered API brings its own; KeyError naming the known APIs otherwise."""
    return importlib.import_module(_api(api).GRAMMAR)


def _api(api: str) -> ModuleType:
    module = apis.APIS.get(api) or next((m for m in apis.APIS.values() if api in m.ALIASES), None)
    if module is None:
        raise KeyError(f"no grammar for API {api!r}; known: {sorted(apis.NAMES)}")
    return module


def all_rules() -> dict[str, str]:
    """Every registered API's grammar rules (rule id -> description), read from the registry now."""
    return {r: d for name in apis.NAMES for r, d in module_for(name).RULES.items()}


def __getattr__(name: str) -> Any:
    if name == "ALL_RULES":  # read at call time: an API registered later brings its rules
        return all_rules()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def validate_for(api: str, source: Any, request: Any = None) -> list[Finding]:
    """The findings of ``api``'s validator on a stream; on a Transcript with its own request, memoised on
    the transcript's `Reading` (the plugin's notes and the checks read the same findings)."""
    module = module_for(api)
    if isinstance(source, Transcript) and request is None:
        reading = Reading.of(_api(api), source)
        return list(reading.findings(module.validate, source))
    return module.validate(source, request)  # type: ignore[no-any-return]
