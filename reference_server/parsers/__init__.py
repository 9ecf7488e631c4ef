"""Stream parsers by name (STYLE.md, rule 7; after vLLM's ReasoningParserManager/ToolParserManager).

    get_reasoning_parser("deepseek_r1")(start_in_reasoning=True)
    get_tool_parser("hermes")(tools=conv.tools, id_factory=lambda i: f"call_{i}")

Built-in parsers live one family per module and are imported lazily on first look-up, through the
`name -> module` tables below; `register_reasoning_parser(name)` / `register_tool_parser(name)`
add more (the decorator sets the class's `name`). An unknown name raises KeyError listing the known
ones. `harnesscheck.reference_server.parsers.stream` composes a reasoning and a tool parser into one stream.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TypeVar

from harnesscheck.reference_server.parsers.base import ReasoningParser, ToolParser, _TextSplitter

__all__ = [
    "ReasoningParser",
    "ToolParser",
    "get_reasoning_parser",
    "get_tool_parser",
    "reasoning_parser_names",
    "register_reasoning_parser",
    "register_tool_parser",
    "tool_parser_names",
]

# name -> module (in this package) that registers it on import
_BUILTIN_REASONING: dict[str, str] = {
    "deepseek_r1": "reasoning",
    "qwen3": "reasoning",
    "nemotron_deci": "reasoning",
}
_BUILTIN_TOOLS: dict[str, str] = {
    "hermes": "tools_hermes",
    "qwen3_coder": "tools_qwen3_coder",
}

_reasoning: dict[str, type[ReasoningParser]] = {}
_tools: dict[str, type[ToolParser]] = {}

R = TypeVar("R", bound=ReasoningParser)
T = TypeVar("T", bound=ToolParser)


def _register(table: dict, base: type, kind: str, name: str) -> Callable:
    def decorator(cls: type[_TextSplitter]) -> type[_TextSplitter]:
        if not (isinstance(cls, type) and issubclass(cls, base)):
            raise TypeError(f"{kind} parser {name!r} must subclass {base.__name__}, got {cls!r}")
        known = table.get(name)
        if known is not None and known.__qualname__ != cls.__qualname__:
            raise ValueError(f"{kind} parser {name!r} is already registered as {known.__qualname__}")
        cls.name = name
        table[name] = cls
        return cls

    return decorator


def register_reasoning_parser(name: str) -> Callable[[type[R]], type[R]]:
    """Class decorator: make a ReasoningParser subclass available as `name`."""
    return _register(_reasoning, ReasoningParser, "reasoning", name)


def register_tool_parser(name: str) -> Callable[[type[T]], type[T]]:
    """Class decorator: make a ToolParser subclass available as `name`."""
    return _register(_tools, ToolParser, "tool", name)


def _get(table: dict, builtin: dict[str, str], kind: str, name: str) -> type:
    if name not in table and name in builtin:
        importlib.import_module(f"{__name__}.{builtin[name]}")
    try:
        return table[name]
    except KeyError:
        known = ", ".join(sorted(set(table) | set(builtin)))
        raise KeyError(f"unknown {kind} parser {name!r}; known: {known}") from None


def get_reasoning_parser(name: str) -> type[ReasoningParser]:
    return _get(_reasoning, _BUILTIN_REASONING, "reasoning", name)


def get_tool_parser(name: str) -> type[ToolParser]:
    return _get(_tools, _BUILTIN_TOOLS, "tool", name)


def reasoning_parser_names() -> list[str]:
    return sorted(set(_reasoning) | set(_BUILTIN_REASONING))


def tool_parser_names() -> list[str]:
    return sorted(set(_tools) | set(_BUILTIN_TOOLS))
