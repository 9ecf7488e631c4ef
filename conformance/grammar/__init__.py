"""Pure stream validators, one module per API: frames (or a Transcript) in, findings out.

Each module has ``RULES`` (rule id -> description), ``validate(source, request=None)``,
``accumulate(event, snapshot)`` and ``final_message(source)``. ``validate_for(api, ...)`` picks
the module by API name ("anthropic", "chat", "responses").
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from . import anthropic, chat, responses
from .findings import Finding, frames_and_request, rules_of

__all__ = [
    "ALL_RULES",
    "Finding",
    "anthropic",
    "chat",
    "frames_and_request",
    "module_for",
    "responses",
    "rules_of",
    "validate_for",
]

_MODULES: dict[str, ModuleType] = {"anthropic": anthropic, "chat": chat, "responses": responses}
_ALIASES = {"messages": "anthropic", "chat_completions": "chat", "openai-chat": "chat", "openai-responses": "responses"}

ALL_RULES: dict[str, str] = {**anthropic.RULES, **chat.RULES, **responses.RULES}


def module_for(api: str) -> ModuleType:
    """The grammar module of an API; KeyError naming the known APIs otherwise."""
    name = _ALIASES.get(api, api)
    try:
        return _MODULES[name]
    except KeyError:
        raise KeyError(f"no grammar for API {api!r}; known: {sorted(_MODULES)}") from None


def validate_for(api: str, source: Any, request: Any = None) -> list[Finding]:
    return module_for(api).validate(source, request)  # type: ignore[no-any-return]
