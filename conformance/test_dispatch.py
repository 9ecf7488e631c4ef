"""Streaming tool dispatch: a tool call is usable the moment it is complete, not at the end of the
turn (article 2), and Dynamo's `tool_call_dispatch` side frames are well formed when offered.

Timing witness: in a turn where the model keeps generating after its first call (reasoning, then
a second call), the first call's completion frame must arrive well before the end of the stream.
"""

from __future__ import annotations

import json

import pytest

from conformance.harness import Harness
from conformance.verdict import fail, inconclusive, ok_response, skip
from conformance.wire.transcript import Transcript

SCENARIO = "long_reasoning"  # r0 t0 r1 t1 with ~700 reasoning tokens generated after t0 completes
MIN_SPAN_NS = 5_000_000  # below this the stream is too fast for timing to tell anything


def _first_call_complete_ns(api: str, t: Transcript) -> int | None:
    tool_block: int | None = None
    last_args0: int | None = None
    for f in t.events:
        data = f.json if isinstance(f.json, dict) else {}
        if api == "anthropic":
            if data.get("type") == "content_block_start" and (data.get("content_block") or {}).get("type") == "tool_use":
                tool_block = data.get("index") if tool_block is None else tool_block
            if data.get("type") == "content_block_stop" and tool_block is not None and data.get("index") == tool_block:
                return f.t_ns
        elif api == "responses":
            if data.get("type") == "response.function_call_arguments.done":
                return f.t_ns
        else:
            for choice in data.get("choices") or []:
                for call in (choice.get("delta") or {}).get("tool_calls") or []:
                    if call.get("index") == 0:
                        last_args0 = f.t_ns
    return last_args0


def _value(arguments: object) -> object:
    try:
        return json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return arguments


def _judge(hc: Harness, api: str) -> None:
    t = hc.stream(api, SCENARIO)
    ok_response(t, f"{SCENARIO} stream")
    events = t.events
    if not events or events[0].t_ns is None:
        fail("no timed frames in the stream", transcript=t)
    complete = _first_call_complete_ns(api, t)
    if complete is None:
        inconclusive("the model made no tool call in the interleaved scenario")
    start, end = events[0].t_ns, events[-1].t_ns
    span, lead = end - start, end - complete
    if span < MIN_SPAN_NS:
        inconclusive(f"the whole answer streamed in {span / 1e6:.1f} ms: too fast for timing to tell")
    if lead < max(2_000_000, span // 10):
        fail(f"the first tool call completed {lead / 1e6:.1f} ms before the end of a {span / 1e6:.1f} ms stream: "
             "tool calls are held back to the end of the turn", transcript=t)


@pytest.mark.check("AN-DISPATCH-001")
def test_anthropic_tool_block_closes_early(hc: Harness) -> None:
    _judge(hc, "anthropic")


@pytest.mark.check("CH-DISPATCH-001")
def test_chat_tool_deltas_inline(hc: Harness) -> None:
    _judge(hc, "chat")


@pytest.mark.check("RS-DISPATCH-001")
def test_responses_arguments_done_early(hc: Harness) -> None:
    _judge(hc, "responses")


@pytest.mark.check("CH-DISPATCH-002")
def test_chat_tool_call_dispatch_frames(hc: Harness) -> None:
    t = hc.stream("chat", SCENARIO)
    ok_response(t, f"{SCENARIO} stream")
    frames = [f for f in t.events if f.event == "tool_call_dispatch"]
    if not frames:
        if "tool-dispatch" in hc.endpoint.expect:
            fail("no tool_call_dispatch frame, though the endpoint is declared to offer it", transcript=t)
        skip("the endpoint sends no tool_call_dispatch frames (declare --expect tool-dispatch to require them)")
    streamed: dict[int, dict] = {}
    last_args_frame: dict[int, int] = {}
    done_index = next((f.index for f in t.events if f.data == "[DONE]"), None)
    for f in t.events:
        for choice in (f.json or {}).get("choices") or [] if isinstance(f.json, dict) else []:
            for call in (choice.get("delta") or {}).get("tool_calls") or []:
                entry = streamed.setdefault(call.get("index"), {"id": "", "name": "", "arguments": ""})
                entry["id"] = entry["id"] or call.get("id") or ""
                entry["name"] = entry["name"] or (call.get("function") or {}).get("name") or ""
                entry["arguments"] += (call.get("function") or {}).get("arguments") or ""
                last_args_frame[call.get("index")] = f.index
    seen: set[int] = set()
    for f in frames:
        data = f.json if isinstance(f.json, dict) else None
        call = (data or {}).get("tool_call") or {}
        index = call.get("index")
        if data is None or not isinstance(index, int) or data.get("choice_index") != 0 or \
                call.get("type") != "function" or not isinstance(call.get("function"), dict):
            fail("a tool_call_dispatch frame is not {choice_index, tool_call: {index, id, type, function}}",
                 transcript=t)
        if index in seen:
            fail(f"tool_call_dispatch sent twice for call {index}", transcript=t)
        seen.add(index)
        want = streamed.get(index)
        fn = call["function"]
        if want is None or call.get("id") != want["id"] or fn.get("name") != want["name"] or \
                _value(fn.get("arguments")) != _value(want["arguments"]):
            fail(f"tool_call_dispatch for call {index} differs from the streamed call {want}", transcript=t)
        if f.index < last_args_frame.get(index, -1):
            fail(f"tool_call_dispatch for call {index} came before its arguments were complete", transcript=t)
        if done_index is not None and f.index > done_index:
            fail("tool_call_dispatch after data: [DONE]", transcript=t)
    if seen != set(streamed):
        fail(f"tool_call_dispatch frames for calls {sorted(seen)}, streamed calls {sorted(streamed)}", transcript=t)
