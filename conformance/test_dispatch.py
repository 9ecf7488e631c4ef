"""Streaming tool dispatch: a tool call is usable the moment it is complete, not at the end of the
turn (article 2), and Dynamo's `tool_call_dispatch` side frames are well formed when offered.

Witness: in a turn where the model keeps generating after its first call (reasoning, then a
second call), that later output must stream after the first call's completion frame; a server
that holds tool calls back sends them after everything else.
"""

from __future__ import annotations

import json

import pytest

from conformance.harness import Harness
from conformance.verdict import fail, inconclusive, ok_response, skip
from conformance.wire.transcript import Transcript

SCENARIO = "long_reasoning"  # r0 t0 r1 t1 with ~700 reasoning tokens generated after t0 completes


def _value(arguments: object) -> object:
    try:
        return json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return arguments


def _is_content(api: str, data: dict) -> bool:
    """A frame that carries model output (text, reasoning or tool-call deltas)."""
    kind = data.get("type", "")
    if api == "anthropic":
        return kind == "content_block_delta"
    if api == "responses":
        return kind.endswith(".delta")
    return any((c.get("delta") or {}).get(k) for c in data.get("choices") or []
               for k in ("content", "reasoning_content", "reasoning", "tool_calls"))


def _first_call_complete(api: str, t: Transcript) -> int | None:
    """Position (among the stream's events) where the first tool call became complete."""
    tool_block = None
    last_args0 = None
    for n, f in enumerate(t.events):
        data = f.json if isinstance(f.json, dict) else {}
        if api == "anthropic":
            if data.get("type") == "content_block_start" and (data.get("content_block") or {}).get("type") == "tool_use":
                tool_block = data.get("index") if tool_block is None else tool_block
            if data.get("type") == "content_block_stop" and tool_block is not None and data.get("index") == tool_block:
                return n
        elif api == "responses":
            if data.get("type") == "response.function_call_arguments.done":
                return n
        else:
            for choice in data.get("choices") or []:
                for call in (choice.get("delta") or {}).get("tool_calls") or []:
                    if call.get("index") == 0:
                        last_args0 = n
    return last_args0


def _judge(hc: Harness, api: str) -> None:
    """Order, not clock: held-back tool calls arrive after everything the model generated later,
    so the model output streamed after the first call's completion shows whether it was held."""
    t = hc.stream(api, SCENARIO)
    ok_response(t, f"{SCENARIO} stream")
    complete = _first_call_complete(api, t)
    if complete is None:
        inconclusive("the model made no tool call in the interleaved scenario")
    content = [n for n, f in enumerate(t.events) if isinstance(f.json, dict) and _is_content(api, f.json)]
    after = [n for n in content if n > complete]
    if len(content) < 10:
        inconclusive(f"only {len(content)} content frames: too few to tell")
    if len(after) < max(3, len(content) // 10):
        fail(f"the first tool call became complete at event #{complete}, after {len(content) - len(after)} of "
             f"{len(content)} content frames, though the model generated more after it: tool calls are held back "
             "to the end of the turn", transcript=t)


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
