"""The kit's one home per API: each module (anthropic, chat, responses) holds the route and headers,
the request builders, the one pure stream fold `accumulate(event, snapshot)`, the rule for when a tool
call is complete, and what an answer holds (`base.Api` lists the members). `get(name)` picks one;
`register(module)` adds one (a fourth API is one module: nothing else in the kit names the APIs)."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from harnesscheck.protocol.apis import anthropic, chat, responses
from harnesscheck.protocol.apis.base import Api, ToolCall

# The registry: every table or list the kit keeps per API is read from here (`APIS`, `NAMES`,
# `PREFIXES`, `get`, `for_path`, `by_prefix`), at call time, so a module added with `register` is seen
# everywhere without an edit elsewhere.
APIS: dict[str, ModuleType] = {m.NAME: m for m in (anthropic, chat, responses)}
NAMES: tuple[str, ...] = tuple(APIS)
PREFIXES: tuple[str, ...] = tuple(m.PREFIX for m in APIS.values())  # check id prefixes, in NAMES' order


def get(name: str) -> ModuleType:
    """The API module for ``name`` (one of ``NAMES``); KeyError for any other."""
    try:
        return APIS[name]
    except KeyError:
        raise KeyError(f"unknown API {name!r} (one of {', '.join(NAMES)})") from None


def by_prefix(prefix: str) -> ModuleType:
    """The API module whose check ids start with ``prefix`` ("AN-..."); KeyError for any other."""
    module = next((m for m in APIS.values() if m.PREFIX == prefix), None)
    if module is None:
        raise KeyError(f"no API with check prefix {prefix!r} (one of {', '.join(PREFIXES)})")
    return module


def for_path(path: str) -> ModuleType | None:
    """The API whose route ``path`` ends with ("/messages", "/responses", "/chat/completions", with or
    without the /v1 or any other prefix before it; a query ignored), or None."""
    p = path.split("?", 1)[0].rstrip("/")
    return next((m for m in APIS.values() if p.endswith(m.PATH.removeprefix("/v1"))), None)


def register(module: ModuleType) -> Callable[[], None]:
    """Add an API module (the members of `base.Api`) to the registry; returns the undo. The test suite's
    throwaway fourth API (tests/conformance/test_fourth_api.py) uses it to prove that an API is one module:
    nothing else in the kit names the APIs."""
    global NAMES, PREFIXES
    if module.NAME in APIS or module.PREFIX in PREFIXES:
        raise ValueError(f"API {module.NAME!r} or prefix {module.PREFIX!r} is registered already")
    APIS[module.NAME] = module
    NAMES, PREFIXES = tuple(APIS), (*PREFIXES, module.PREFIX)

    def undo() -> None:
        global NAMES, PREFIXES
        APIS.pop(module.NAME, None)
        NAMES, PREFIXES = tuple(APIS), tuple(m.PREFIX for m in APIS.values())

    return undo


__all__ = ["APIS", "NAMES", "PREFIXES", "Api", "ToolCall", "anthropic", "by_prefix", "chat", "for_path",
           "get", "register", "responses"]
