"""The reference server's side of the tool kinds: the incremental decoding of a custom tool's text
(`InputText`), the tools each kind becomes, and the streamed custom_tool_call items (every split of the
model's output gives the same deltas joined, the same .done and the same item)."""

from __future__ import annotations

import json

import pytest

from harnesscheck.reference_server.conversation import ToolSpec
from harnesscheck.reference_server.events import Finish, ToolCallArgsDelta, ToolCallEnd, ToolCallStart, Usage
from harnesscheck.reference_server.faults import Faults
from harnesscheck.reference_server.frontends.common import ApiError
from harnesscheck.reference_server.frontends.responses import InputText, ResponsesStream, items_to_messages, tools_of

TEXTS = ["*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch\n",
         'quotes " and \\ backslash, tab\t, é, 😀 and \u2028',
         ""]


@pytest.mark.parametrize("text", TEXTS)
def test_every_split_decodes_to_the_text(text: str) -> None:
    """The JSON the model writes, cut at every point into two fragments (escapes and surrogate pairs cut in
    the middle too): the decoded parts join to the text, and `final` is the text."""
    raw = json.dumps({"input": text})  # ensure_ascii: é and the emoji as \\u escapes (a surrogate pair)
    for cut in range(len(raw) + 1):
        decoder = InputText()
        parts = [decoder.feed(raw[:cut]), decoder.feed(raw[cut:])]
        assert "".join(parts) == text, cut
        assert decoder.final() == text


def test_one_character_at_a_time() -> None:
    raw = json.dumps({"input": TEXTS[1]}, ensure_ascii=False)
    decoder = InputText()
    assert "".join(decoder.feed(c) for c in raw) == TEXTS[1] == decoder.final()


def test_a_call_that_is_not_input_text() -> None:
    decoder = InputText()
    assert decoder.feed('{"patch": "x"}') == ""
    assert decoder.final() == '{"patch": "x"}'  # the raw text: what the model wrote


def _frames(stream: ResponsesStream, events: list) -> list[dict]:
    out = []
    for event in events:
        for frame in stream.feed(event):
            out.append(json.loads(frame.decode().split("data: ", 1)[1]))
    return out


def test_a_custom_call_streams_as_custom_tool_call_items() -> None:
    tools = [ToolSpec(name="apply_patch", kind="custom"), ToolSpec(name="search", namespace="mcp__docs")]
    stream = ResponsesStream(response_id="resp_abc", body={"model": "m", "stream": True}, faults=Faults(), tools=tools)
    raw = json.dumps({"input": TEXTS[0]})
    events = [ToolCallStart(index=0, id="call_1", name="apply_patch"),
              *(ToolCallArgsDelta(index=0, text=raw[i:i + 7]) for i in range(0, len(raw), 7)),
              ToolCallEnd(index=0, arguments=raw), ToolCallStart(index=1, id="call_2", name="search"),
              ToolCallArgsDelta(index=1, text='{"q": "x"}'), ToolCallEnd(index=1, arguments='{"q": "x"}'),
              Finish(reason="tool_calls", usage=Usage(prompt_tokens=5, cached_tokens=0, completion_tokens=9))]
    frames = _frames(stream, events)
    deltas = "".join(f["delta"] for f in frames if f["type"] == "response.custom_tool_call_input.delta")
    (done,) = [f for f in frames if f["type"] == "response.custom_tool_call_input.done"]
    items = [f["item"] for f in frames if f["type"] == "response.output_item.done"]
    assert deltas == done["input"] == items[0]["input"] == TEXTS[0]
    assert items[0]["type"] == "custom_tool_call" and items[0]["call_id"] == "call_1"
    assert (items[1]["type"], items[1]["namespace"], items[1]["arguments"]) == ("function_call", "mcp__docs",
                                                                                '{"q": "x"}')
    assert stream.parts[0].call.arguments == raw  # the store keeps what the model wrote


def test_each_kind_becomes_what_the_model_is_offered() -> None:
    raw = [{"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}, "strict": False},
           {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark",
                                                                 "definition": "start: /.+/"}},
           {"type": "custom", "name": "free"},
           {"type": "namespace", "name": "mcp__x", "description": "x", "tools": [
               {"type": "function", "name": "g", "parameters": {"type": "object", "properties": {}}}]},
           {"type": "web_search"}, {"type": "local_shell"}, {"type": "tool_search", "execution": "client"},
           {"type": "image_generation"}, {"type": "mcp", "server_label": "s"}]
    specs = tools_of(raw)
    assert [(s.name, s.kind, s.namespace) for s in specs] == [
        ("f", "function", None), ("apply_patch", "custom", None), ("free", "custom", None), ("g", "function", "mcp__x")]
    assert "lark grammar" in specs[1].description and "start: /.+/" in specs[1].description
    assert [s.name for s in tools_of(raw, Faults(["rs-custom-tool-dropped"]))] == ["f", "g"]
    with pytest.raises(ApiError, match="Only function tools are supported"):
        tools_of(raw, Faults(["rs-function-tools-only"]))
    odd = tools_of([{"type": "custom", "name": "c", "format": {"type": "grammar"}}])  # taken as free text
    assert [(s.name, s.kind, s.description) for s in odd] == [("c", "custom", "")]
    with pytest.raises(ApiError, match="format: expected an object"):
        tools_of([{"type": "custom", "name": "c", "format": "lark"}])


def test_custom_items_come_back_as_the_model_wrote_them() -> None:
    _, messages = items_to_messages([
        {"type": "message", "role": "user", "content": "patch it"},
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin Patch\n"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "done"},
        {"type": "tool_search_call", "arguments": {"query": "q"}, "execution": "client"}])
    (call,) = messages[1].tool_calls
    assert json.loads(call.arguments) == {"input": "*** Begin Patch\n"}
    assert messages[2].results[0].content == "done"
    with pytest.raises(ApiError, match="tool_search_call"):
        items_to_messages([{"type": "tool_search_call", "arguments": {}}], Faults(["rs-narrow-request-schema"]))
