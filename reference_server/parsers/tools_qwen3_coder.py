"""Qwen3-Coder tool calls (also used by Nemotron models):

    <tool_call>
    <function=NAME>
    <parameter=KEY>
    VALUE
    </parameter>
    ...
    </function>
    </tool_call>

ToolCallStart when `<function=NAME>` is complete. A value runs to `</parameter>`; one leading and
one trailing newline are stripped, then it is converted with the tool's JSON schema from
`self.tools`: type string gives the raw string; integer, number, boolean, object, array, null give
json.loads of it, or the string if it does not parse (a type list that includes "string" takes the
parsed value only when it matches one of the other types); an unknown tool or parameter, or one
without a type, takes json.loads when it gives a non-string (numbers, true/false/null, objects,
arrays), else the string.

The arguments are emitted as canonical JSON built one parameter at a time: `{"key": value` for the
first, `, "key": value` for the next, `}` at `</function>` ("{}" for a call without parameters),
with json.dumps(..., ensure_ascii=False), so the joined deltas equal json.dumps(dict,
ensure_ascii=False) and ToolCallEnd.arguments equals them.

Broken calls: malformed before the name is known, or unterminated at finish before it: the block is
text, `<tool_call>` included. After ToolCallStart: malformed markup, `</tool_call>` without
`</function>`, or the end of the stream close the arguments object with the parameters complete so
far (a cut-off parameter is dropped), so arguments are always a whole JSON object; anything up to
`</tool_call>` is skipped. After `</function>`, text other than `</tool_call>` ends the call
implicitly and is read as text again.

`render` writes call.arguments (a JSON object text) back in this format, strings raw and other values
as json.dumps; it raises ValueError for arguments that are not a JSON object.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from harnesscheck.reference_server.conversation import ToolSpec
from harnesscheck.reference_server.events import ParsedEvent, ToolCall, ToolCallArgsDelta, ToolCallEnd
from harnesscheck.reference_server.parsers import register_tool_parser
from harnesscheck.reference_server.parsers.base import (DONE, MORE, NOT_A_CALL, CallScanner, TaggedToolParser,
                                                        is_prefix_at)

_WS = " \t\r\n"
FUNC = "<function="
END_FUNC = "</function>"
PARAM = "<parameter="
END_PARAM = "</parameter>"

_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def _schema_types(schema: Any) -> list[str] | None:
    if not isinstance(schema, Mapping):
        return None
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list) and all(isinstance(k, str) for k in kind):
        return list(kind)
    found: list[str] = []
    for key in ("anyOf", "oneOf"):
        for sub in schema.get(key) or []:
            found.extend(_schema_types(sub) or [])
    return found or None


def convert_value(raw: str, tool: ToolSpec | None, key: str) -> Any:
    """A parameter's raw text (newlines already stripped) as the JSON value the schema asks for."""
    props = tool.parameters.get("properties") if tool is not None else None
    types = _schema_types(props.get(key) if isinstance(props, Mapping) else None)
    try:
        parsed = json.loads(raw)
        parses = True
    except ValueError:
        parsed, parses = None, False
    if types is None:
        return parsed if parses and not isinstance(parsed, str) else raw
    others = [t for t in types if t != "string"]
    if not others:
        return raw
    if "string" in types:
        ok = parses and any(_TYPE_CHECKS.get(t, lambda v: False)(parsed) for t in others)
        return parsed if ok else raw
    return parsed if parses else raw


def _strip_one_newline(value: str) -> str:
    value = value.removeprefix("\n")
    value = value.removesuffix("\n")
    return value


class _Qwen3CoderCall(CallScanner):
    def __init__(self, start: Callable[[str], ParsedEvent], tools: Mapping[str, ToolSpec]) -> None:
        super().__init__(start)
        self.tools = tools
        self.p = 0
        self.phase = "func"  # func, params, value, tail, skip
        self.index = -1
        self.name = ""
        self.key = ""
        self.v0 = 0
        self.joined = ""
        self.ended = False

    def feed(self, text: str) -> tuple[list[ParsedEvent], tuple[str, str]]:
        self.raw += text
        out: list[ParsedEvent] = []
        return out, self._scan(out)

    def close(self) -> list[ParsedEvent]:
        out: list[ParsedEvent] = []
        if not self.ended:
            self._end(out)
        return out

    def _scan(self, out: list[ParsedEvent]) -> tuple[str, str]:
        raw, n = self.raw, len(self.raw)
        close = self.close_tag
        while self.p < n:
            p = self.p
            if self.phase == "value":
                i = raw.find(END_PARAM, max(self.v0, p))
                if i < 0:
                    self.p = max(self.v0, n - len(END_PARAM) + 1)
                    return MORE, ""
                self._param(out, raw[self.v0 : i])
                self.p = i + len(END_PARAM)
                self.phase = "params"
                continue
            if self.phase == "skip":
                i = raw.find(close, p)
                if i < 0:
                    self.p = max(p, n - len(close) + 1)
                    return MORE, ""
                return DONE, raw[i + len(close) :]
            if raw[p] in _WS:
                self.p += 1
                continue
            if self.phase == "tail":
                if raw.startswith(close, p):
                    return DONE, raw[p + len(close) :]
                if is_prefix_at(raw, p, close):
                    return MORE, ""
                return DONE, raw[p:]  # no `</tool_call>`: the call ended implicitly
            if self.phase == "func":
                if raw.startswith(FUNC, p):
                    name = self._tag_value(p + len(FUNC))
                    if name is None:
                        return MORE, ""
                    if not name:
                        return NOT_A_CALL, ""
                    self.name = name
                    start = self.start(name)
                    self.index = start.index  # type: ignore[union-attr]
                    out.append(start)
                    self.phase = "params"
                    continue
                if is_prefix_at(raw, p, FUNC) or is_prefix_at(raw, p, close):
                    return MORE, ""
                return NOT_A_CALL, ""  # `</tool_call>` too early, or not this format
            # phase "params"
            if raw.startswith(PARAM, p):
                key = self._tag_value(p + len(PARAM))
                if key is None:
                    return MORE, ""
                if key:
                    self.key = key
                    self.v0 = self.p
                    self.phase = "value"
                    continue
            elif raw.startswith(END_FUNC, p):
                self._end(out)
                self.p = p + len(END_FUNC)
                self.phase = "tail"
                continue
            elif raw.startswith(close, p):
                self._end(out)
                return DONE, raw[p + len(close) :]
            elif any(is_prefix_at(raw, p, tag) for tag in (PARAM, END_FUNC, close)):
                return MORE, ""
            self._end(out)  # malformed after the start
            self.phase = "skip"
        return MORE, ""

    def _tag_value(self, begin: int) -> str | None:
        """The NAME of `<function=NAME>` / `<parameter=NAME>` starting at `begin`; moves past `>`.

        None: not complete yet; "": malformed (empty, or a newline or `<` inside).
        """
        raw = self.raw
        j = raw.find(">", begin)
        inner = raw[begin : j if j >= 0 else len(raw)]
        if "<" in inner or "\n" in inner:
            return ""
        if j < 0:
            return None
        self.p = j + 1
        return inner.strip()

    def _param(self, out: list[ParsedEvent], raw_value: str) -> None:
        value = convert_value(_strip_one_newline(raw_value), self.tools.get(self.name), self.key)
        lead = ", " if self.joined else "{"
        piece = lead + json.dumps(self.key, ensure_ascii=False) + ": " + json.dumps(value, ensure_ascii=False)
        out.append(ToolCallArgsDelta(index=self.index, text=piece))
        self.joined += piece

    def _end(self, out: list[ParsedEvent]) -> None:
        piece = "}" if self.joined else "{}"
        out.append(ToolCallArgsDelta(index=self.index, text=piece))
        self.joined += piece
        out.append(ToolCallEnd(index=self.index, arguments=self.joined))
        self.ended = True


@register_tool_parser("qwen3_coder")
class Qwen3CoderToolParser(TaggedToolParser):
    def new_call(self, start: Callable[[str], ParsedEvent]) -> CallScanner:
        return _Qwen3CoderCall(start, self.tools)

    def render(self, call: ToolCall) -> str:
        try:
            args = json.loads(call.arguments or "{}")
        except ValueError as exc:
            raise ValueError(f"tool call {call.name!r}: arguments are not JSON: {exc}") from None
        if not isinstance(args, dict):
            raise ValueError(f"tool call {call.name!r}: arguments are not a JSON object")  # noqa: TRY004
        lines = ["<tool_call>", f"<function={call.name}>"]
        for key, value in args.items():
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            lines += [f"<parameter={key}>", text, END_PARAM]
        lines += [END_FUNC, "</tool_call>"]
        return "\n".join(lines) + "\n"
