"""The kit's one home per API: each module (anthropic, chat, responses) holds the route and headers,
the request builders, the one pure stream fold `accumulate(event, snapshot)`, the rule for when a tool
call is complete, and what an answer holds (`base.Api` lists the members). `get(name)` picks one."""

from __future__ import annotations

from types import ModuleType

from harnesscheck.conformance.apis import anthropic, chat, responses
from harnesscheck.conformance.apis.base import Api, ToolCall

APIS: dict[str, ModuleType] = {m.NAME: m for m in (anthropic, chat, responses)}
NAMES: tuple[str, ...] = tuple(APIS)


def get(name: str) -> ModuleType:
    """The API module for ``name`` ("anthropic", "chat", "responses"); KeyError for any other."""
    try:
        return APIS[name]
    except KeyError:
        raise KeyError(f"unknown API {name!r} (one of {', '.join(NAMES)})") from None


__all__ = ["APIS", "NAMES", "Api", "ToolCall", "anthropic", "chat", "get", "responses"]
