"""The kit's one home per API: each module (anthropic, chat, responses) holds the route and headers,
the request builders, the one pure stream fold `accumulate(event, snapshot)`, the rule for when a tool
call is complete, and what an answer holds (`base.Api` lists the members). `get(name)` picks one;
`register(module)` adds one (a fourth API is one module: nothing else in the kit names the APIs)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from harnesscheck.errors import HarnesscheckError

from harnesscheck.protocol.apis import anthropic, chat, responses
from harnesscheck.protocol.apis.base import Api, ToolCall

# The registry: every table or list the kit keeps per API is read from here (`APIS`, `NAMES`,
# `PREFIXES`, `get`, `for_path`, `by_prefix`), at call time, so a module added with `register` is seen
# everywhere without an edit elsewhere. `NAMES` and `PREFIXES` are computed when read (a module that
# copies them at its import would miss a later registration: tests/test_layers.py looks for such copies).
APIS: dict[str, ModuleType] = {m.NAME: m for m in (anthropic, chat, responses)}
T = TypeVar("T")


def names() -> tuple[str, ...]:
    """The registered APIs' names, in registration order."""
    return tuple(APIS)


def prefixes() -> tuple[str, ...]:
    """The registered APIs' check-id prefixes, in ``names()``' order."""
    return tuple(m.PREFIX for m in APIS.values())


def __getattr__(name: str) -> Any:
    if name == "NAMES":
        return names()
    if name == "PREFIXES":
        return prefixes()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:  # what mypy sees of the two computed attributes
    NAMES: tuple[str, ...]
    PREFIXES: tuple[str, ...]


class Table(Mapping[str, T]):
    """A read-only table keyed by API name whose values are read from the registry when looked up
    (``read(module)``): what a module keeps per API without copying the registry at its import."""

    def __init__(self, read: Callable[[ModuleType], T]) -> None:
        self._read = read

    def __getitem__(self, name: str) -> T:
        return self._read(APIS[name])

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(APIS))

    def __len__(self) -> int:
        return len(APIS)

    def __repr__(self) -> str:
        return f"Table({dict(self)!r})"


def members() -> frozenset[str]:
    """The members an API module must have: those of `base.Api` (its annotated attributes and methods)."""
    declared = set(Api.__annotations__) | {k for k, v in vars(Api).items()
                                            if callable(v) and not k.startswith("_")}
    return frozenset(declared)


def missing(module: ModuleType) -> list[str]:
    """The `base.Api` members ``module`` lacks, sorted (empty: a complete API module)."""
    return sorted(m for m in members() if not hasattr(module, m))


def get(name: str) -> ModuleType:
    """The API module for ``name`` (one of ``NAMES``); KeyError for any other."""
    try:
        return APIS[name]
    except KeyError:
        raise KeyError(f"unknown API {name!r} (one of {', '.join(names())})") from None


def by_prefix(prefix: str) -> ModuleType:
    """The API module whose check ids start with ``prefix`` ("AN-..."); KeyError for any other."""
    module = next((m for m in APIS.values() if m.PREFIX == prefix), None)
    if module is None:
        raise KeyError(f"no API with check prefix {prefix!r} (one of {', '.join(prefixes())})")
    return module


def for_path(path: str) -> ModuleType | None:
    """The API whose route ``path`` ends with ("/messages", "/responses", "/chat/completions", with or
    without the /v1 or any other prefix before it; a query ignored), or None."""
    p = path.split("?", 1)[0].rstrip("/")
    return next((m for m in APIS.values() if p.endswith(m.PATH.removeprefix("/v1"))), None)


class IncompleteApi(HarnesscheckError, TypeError):
    """`register` was given a module that lacks members of `base.Api` (named in the message)."""


def register(module: ModuleType) -> Callable[[], None]:
    """Add an API module to the registry after checking it has every member of `base.Api` (IncompleteApi
    names the missing ones; ValueError for a name or prefix registered already); returns the undo. The
    test suite's throwaway fourth API (tests/conformance/test_fourth_api.py) uses it to prove that an API is
    one module: nothing else in the kit names the APIs."""
    name = getattr(module, "NAME", None)
    lacks = missing(module)
    if lacks:
        raise IncompleteApi(f"API module {getattr(module, '__name__', module)!r} ({name!r}) lacks "
                            f"{len(lacks)} of the {len(members())} members of base.Api: {', '.join(lacks)}")
    if module.NAME in APIS or module.PREFIX in prefixes():
        raise ValueError(f"API {module.NAME!r} or prefix {module.PREFIX!r} is registered already")
    APIS[module.NAME] = module

    def undo() -> None:
        if APIS.get(module.NAME) is module:
            del APIS[module.NAME]

    return undo


__all__ = ["APIS", "NAMES", "PREFIXES", "Api", "IncompleteApi", "Table", "ToolCall", "anthropic", "by_prefix", "chat",
           "for_path", "get", "members", "missing", "names", "prefixes", "register", "responses"]
