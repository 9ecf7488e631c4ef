"""Hermes tool calls (Qwen2.5/Qwen3, DeepSeek-R1 distills, NousResearch Hermes):

    <tool_call>
    {"name": "NAME", "arguments": {...}}
    </tool_call>

Streaming: ToolCallStart as soon as the name string is complete; then ToolCallArgsDelta with the
raw text of the arguments value as it arrives (JSON strings, escapes and bracket depth are tracked
to know where it ends); ToolCallEnd(arguments=<the joined raw text>) when it closes. `"parameters"`
is a synonym of `"arguments"`; arguments written before the name are held back until the name is
known. A call with no arguments key gets "{}". Other keys are skipped.

Broken calls:
- malformed before the name is known (not an object, a non-string name, an object without a name,
  `</tool_call>` too early): the block is text, `<tool_call>` included;
- malformed after ToolCallStart, `</tool_call>` inside the object, or the stream ends inside the
  call: the call is ended with the arguments text joined so far (possibly an incomplete JSON
  object; "{}" if none came yet), and anything up to `</tool_call>` is skipped;
- unterminated at finish before the name was known: the raw block is text.
After the object, `</tool_call>` is expected; other text there ends the call implicitly and is read
as text again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from harnesscheck.reference_server.events import ParsedEvent, ToolCall, ToolCallArgsDelta, ToolCallEnd
from harnesscheck.reference_server.parsers import register_tool_parser
from harnesscheck.reference_server.parsers.base import (DONE, MORE, NOT_A_CALL, CallScanner, TaggedToolParser,
                                                        is_prefix_at)

_WS = " \t\r\n"
_ARG_KEYS = ("arguments", "parameters")
_STRING_STOP = re.compile(r'["\\]')
_COMPOUND_STOP = re.compile(r'["\\{}\[\]<]')
_SCALAR_STOP = re.compile(r"[\s,}\]<]")


class _HermesCall(CallScanner):
    def __init__(self, start: Callable[[str], ParsedEvent]) -> None:
        super().__init__(start)
        self.index = -1
        self.p = 0
        self.phase = "open"  # open, key, colon, value, comma, tail, skip
        self.kind = ""  # while scanning a key or value: string, compound or scalar
        self.target = ""  # key or value
        self.v0 = 0
        self.depth = 0
        self.in_str = False
        self.esc = False
        self.key = ""
        self.name: str | None = None
        self.args: str | None = None
        self.args_open = False
        self.joined = ""
        self.ended = False

    # -- scanning ------------------------------------------------------------------------------------

    def feed(self, text: str) -> tuple[list[ParsedEvent], tuple[str, str]]:
        self.raw += text
        out: list[ParsedEvent] = []
        outcome = self._scan(out)
        if self.args_open and self.started and not self.ended:
            self._stream_args(out, self.raw[self.v0 : self.p])
        return out, outcome

    def close(self) -> list[ParsedEvent]:
        out: list[ParsedEvent] = []
        self._end_here(out)
        return out

    def _scan(self, out: list[ParsedEvent]) -> tuple[str, str]:
        raw, n = self.raw, len(self.raw)
        close = self.close_tag
        while self.p < n:
            if self.kind:
                status = self._scan_value()
                if status == MORE:
                    return MORE, ""
                if status == DONE:
                    if not self._complete(out) and (r := self._malformed(out)) is not None:
                        return r
                    continue
                # a `<` outside strings inside an object or array: `</tool_call>` or malformed
                if raw.startswith(close, self.p):
                    return self._cut(out)
                if is_prefix_at(raw, self.p, close):
                    return MORE, ""
                if (r := self._malformed(out)) is not None:
                    return r
                continue
            if self.phase == "skip":
                i = raw.find(close, self.p)
                if i < 0:
                    self.p = max(self.p, n - len(close) + 1)
                    return MORE, ""
                return DONE, raw[i + len(close) :]
            c = raw[self.p]
            if c in _WS:
                self.p += 1
                continue
            if c == "<":
                if raw.startswith(close, self.p):
                    return self._cut(out)
                if is_prefix_at(raw, self.p, close):
                    return MORE, ""
            if self.phase == "tail":
                return DONE, raw[self.p :]  # no `</tool_call>`: the call ended implicitly
            if not self._step(c, out) and (r := self._malformed(out)) is not None:
                return r
        return MORE, ""

    def _cut(self, out: list[ParsedEvent]) -> tuple[str, str]:
        """`</tool_call>` at self.p: the normal end, or a premature one."""
        rest = self.raw[self.p + len(self.close_tag) :]
        if self.phase == "tail":
            return DONE, rest
        if not self._end_here(out):
            return NOT_A_CALL, ""
        return DONE, rest

    def _step(self, c: str, out: list[ParsedEvent]) -> bool:
        """One structural character outside keys and values. False: malformed."""
        phase = self.phase
        if phase == "open" and c == "{":
            self.phase = "key"
        elif phase == "key" and c == '"':
            self._begin("key", "string")
            return True
        elif phase in ("key", "comma") and c == "}":
            self.p += 1
            self.phase = "tail"
            if not self.started:
                return False
            if not self.ended:
                self._end(out)
            return True
        elif phase == "colon" and c == ":":
            self.phase = "value"
        elif phase == "value":
            kind = "compound" if c in "{[" else "string" if c == '"' else "scalar"
            self._begin("value", kind)
            self.args_open = self.key in _ARG_KEYS and self.args is None
            return True
        elif phase == "comma" and c == ",":
            self.phase = "key"
        else:
            return False
        self.p += 1
        return True

    def _begin(self, target: str, kind: str) -> None:
        self.target, self.kind = target, kind
        self.v0 = self.p
        self.depth = 0
        self.in_str = self.esc = False
        if kind == "string":
            self.in_str = True
            self.p += 1  # past the opening quote

    def _scan_value(self) -> str:
        """Advance through the current key or value: DONE, MORE, or "<" (a possible tag)."""
        raw, n = self.raw, len(self.raw)
        if self.kind == "scalar":
            m = _SCALAR_STOP.search(raw, self.p)
            if m is None:
                self.p = n
                return MORE
            self.p = m.start()
            return DONE
        while self.p < n:
            if self.in_str:
                if self.esc:
                    self.esc = False
                    self.p += 1
                    continue
                m = _STRING_STOP.search(raw, self.p)
                if m is None:
                    self.p = n
                    return MORE
                self.p = m.start() + 1
                if m.group() == "\\":
                    self.esc = True
                else:
                    self.in_str = False
                    if self.kind == "string":
                        return DONE
                continue
            m = _COMPOUND_STOP.search(raw, self.p)
            if m is None:
                self.p = n
                return MORE
            self.p = m.start()
            ch = m.group()
            if ch == "<":
                return "<"
            self.p += 1
            if ch == '"':
                self.in_str = True
            elif ch in "{[":
                self.depth += 1
            elif ch in "}]":
                self.depth -= 1
                if self.depth == 0:
                    return DONE
        return MORE

    def _complete(self, out: list[ParsedEvent]) -> bool:
        """A key or value is complete at self.p. False: malformed."""
        text = self.raw[self.v0 : self.p]
        target, kind, self.kind = self.target, self.kind, ""
        try:
            value: Any  # a JSON value
            value = json.loads(text) if target == "key" or kind == "scalar" or self.key == "name" else None
        except ValueError:
            return False
        if target == "key":
            self.key = value
            self.phase = "colon"
            return True
        self.phase = "comma"
        if self.key == "name" and self.name is None:
            if not isinstance(value, str):
                return False
            self.name = value
            start = self.start(value)
            self.index = start.index  # type: ignore[union-attr]
            out.append(start)
            if self.args is not None:
                self._stream_args(out, self.args)
                self._end(out)
        elif self.args_open:
            self.args_open = False
            self.args = text
            if self.started:
                self._stream_args(out, text)
                self._end(out)
        return True

    def _malformed(self, out: list[ParsedEvent]) -> tuple[str, str] | None:
        if not self._end_here(out):
            return NOT_A_CALL, ""
        self.kind = ""
        self.phase = "skip"
        return None

    def _end_here(self, out: list[ParsedEvent]) -> bool:
        """End a started call at self.p with the arguments streamed so far (a premature `</tool_call>`
        or a malformed body); False when the call had not started, so its body is text after all."""
        if not self.started:
            return False
        if not self.ended:
            if self.args_open:
                self._stream_args(out, self.raw[self.v0 : self.p])
            self._end(out)
        return True

    # -- events ----------------------------------------------------------------------------------------

    def _stream_args(self, out: list[ParsedEvent], text_so_far: str) -> None:
        piece = text_so_far[len(self.joined) :]
        if piece:
            out.append(ToolCallArgsDelta(index=self.index, text=piece))
            self.joined += piece

    def _end(self, out: list[ParsedEvent]) -> None:
        self.args_open = False
        if not self.joined:
            self._stream_args(out, "{}")
        out.append(ToolCallEnd(index=self.index, arguments=self.joined))
        self.ended = True


@register_tool_parser("hermes")
class HermesToolParser(TaggedToolParser):
    def new_call(self, start: Callable[[str], ParsedEvent]) -> CallScanner:
        return _HermesCall(start)

    def render(self, call: ToolCall) -> str:
        name = json.dumps(call.name, ensure_ascii=False)
        return f'<tool_call>\n{{"name": {name}, "arguments": {call.arguments or "{}"}}}\n</tool_call>\n'
