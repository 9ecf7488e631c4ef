"""The server's cheap stream writing gives the same bytes as the plain form it replaced.

- Delta frames written from templates or f-strings equal the frames built as a dict and encoded
  with `sse` (any text: quotes, backslashes, control characters, non-ASCII), with and without the
  faults that bend those frames.
- `SSEResponse` writes one body chunk per step: the frames of all the step's events joined, in
  order, each still a whole SSE event; nothing is dropped, merged or reordered.
- `held_suffix` (with its first-character shortcut) agrees with the plain definition.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harnesscheck.reference_server.events import (Finish, ReasoningDelta, TextDelta, ToolCallArgsDelta, ToolCallEnd,
                                     ToolCallStart, Usage)
from harnesscheck.reference_server.faults import Faults
from harnesscheck.reference_server.frontends.anthropic import AnthropicStream
from harnesscheck.reference_server.frontends.chat import ChatStream
from harnesscheck.reference_server.frontends.common import SSETemplate, sse
from harnesscheck.reference_server.frontends.responses import ResponsesStream
from harnesscheck.reference_server.parsers.base import held_suffix

TEXTS = ["", "plain", 'say "hi"', "back\\slash", "new\nline\ttab\r", "\x00\x1f\x7f", "é 中文 🙂", "\u2028\u2029",
         "</think", "{\"a\": [1, 2]}", "<"]
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)


def _chat(*faults: str, model: str = "m/odel \"x\"") -> ChatStream:
    return ChatStream(completion_id="chatcmpl-1", model=model, include_usage=True, dispatch=True,
                      faults=Faults(faults))


@settings(max_examples=200, deadline=None)
@given(text=texts)
def test_chat_delta_frames_equal_the_dict_form(text: str) -> None:
    stream = _chat()
    stream.feed(ToolCallStart(index=2, id="call_1", name="f"))
    for text_ in [text, *TEXTS]:
        assert stream._delta("content", text_) == stream._chunk({"content": text_})
        assert stream._delta("reasoning_content", text_) == stream._chunk({"reasoning_content": text_})
        want = stream._chunk({"tool_calls": [{"index": 2, "function": {"arguments": text_}}]})
        assert stream.feed(ToolCallArgsDelta(index=2, text=text_)) == [want]


def test_chat_repeat_tool_id_fault_still_repeats() -> None:
    stream = _chat("chat-repeat-tool-id-name")
    stream.feed(ToolCallStart(index=0, id="call_1", name="f"))
    [frame] = stream.feed(ToolCallArgsDelta(index=0, text="{"))
    assert b'"id":"call_1"' in frame and b'"name":"f"' in frame


@settings(max_examples=200, deadline=None)
@given(text=texts)
def test_anthropic_delta_frames_equal_the_dict_form(text: str) -> None:
    for faults in ((), ("an-event-name-mismatch",)):
        stream = AnthropicStream(message_id="msg_1", model="m", prompt_tokens=3, cached_tokens=0, faults=Faults(faults))
        stream.index = 3
        for text_ in [text, *TEXTS]:
            for kind, key in (("thinking_delta", "thinking"), ("text_delta", "text"),
                              ("input_json_delta", "partial_json")):
                assert stream._text_delta(kind, key, text_) == stream._delta({"type": kind, key: text_})


@settings(max_examples=100, deadline=None)
@given(text=texts)
def test_responses_delta_frames_equal_the_dict_form(text: str) -> None:
    for faults in ((), ("rs-sequence-gap",)):
        fast = ResponsesStream(response_id="resp_abc", body={"model": "m"}, faults=Faults(faults))
        slow = ResponsesStream(response_id="resp_abc", body={"model": "m"}, faults=Faults(faults))
        item = {"id": 'msg_"x"_0', "type": "message", "content": [{"type": "output_text", "text": ""}]}
        for s in (fast, slow):
            s.output.append(item)
            s.open = item
        for text_ in [text, *TEXTS]:
            assert fast._delta("response.output_text.delta", text_, content=True, logprobs=True) == slow._event(
                "response.output_text.delta", content_index=0, delta=text_, logprobs=[], **slow._where())
            assert fast._delta("response.reasoning_text.delta", text_, content=True) == slow._event(
                "response.reasoning_text.delta", content_index=0, delta=text_, **slow._where())
            assert fast._delta("response.function_call_arguments.delta", text_) == slow._event(
                "response.function_call_arguments.delta", delta=text_, **slow._where())
        assert fast.seq == slow.seq


def test_sse_template_is_sse_with_the_text_in_its_slot() -> None:
    template = SSETemplate("e", lambda slot: {"a": [1, {"b": slot}], "c": None})
    for text in TEXTS:
        assert template.frame(text) == sse("e", {"a": [1, {"b": text}], "c": None})


async def _steps(steps: list[list[Any]]) -> AsyncIterator[list[Any]]:
    for step in steps:
        await asyncio.sleep(0)
        yield step


def test_sse_response_writes_one_chunk_per_step_with_every_frame_in_order() -> None:
    usage = Usage(prompt_tokens=5, cached_tokens=0, completion_tokens=4)
    steps: list[list[Any]] = [
        [ReasoningDelta("think")],
        [ReasoningDelta(" more"), TextDelta("answer")],  # closes a block, opens one, deltas: several frames
        [],
        [ToolCallStart(index=0, id="call_1", name="f"), ToolCallArgsDelta(index=0, text='{"a":')],
        [ToolCallArgsDelta(index=0, text="1}"), ToolCallEnd(index=0, arguments='{"a":1}')],
        [Finish(reason="tool_calls", usage=usage)],
    ]

    makers = [lambda: AnthropicStream(message_id="msg_1", model="m", prompt_tokens=5, cached_tokens=0,
                                      faults=Faults()),
              _chat, lambda: ResponsesStream(response_id="resp_abc", body={"model": "m"}, faults=Faults())]

    async def collect(adapter: Any) -> list[bytes]:
        from harnesscheck.reference_server.frontends.http import RAW_SEND, SSEResponse

        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        async def close() -> None:
            pass

        await SSEResponse(adapter, _steps(steps), close=close)({"type": "http", RAW_SEND: send}, _never_disconnect, send)
        return [m["body"] for m in sent[1:] if m["body"]]

    for make in makers:
        joined, plain = make(), make()
        for adapter in (joined, plain):
            adapter.created = adapter.created_at = 0
        chunks = asyncio.run(collect(joined))
        frames = [plain.start()] + [[f for event in step for f in plain.feed(event)] for step in steps]
        assert chunks == [b"".join(fs) for fs in frames if fs]
        assert len(chunks) == 1 + sum(1 for step in steps if step)
        assert sum(1 for fs in frames for _ in fs) > len(chunks)  # some steps wrote several frames at once
        for chunk, fs in zip(chunks, [fs for fs in frames if fs]):
            assert all(f.endswith(b"\n\n") and f.count(b"\n\n") == 1 for f in fs)  # each a whole SSE event


def _held_suffix_plain(text: str, tags: list[str]) -> int:
    longest = max((len(t) for t in tags), default=0)
    for k in range(min(len(text), longest - 1), 0, -1):
        if any(t.startswith(text[-k:]) for t in tags):
            return k
    return 0


@settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet="<>/thinkcal_ x", max_size=16),
       tags=st.sampled_from([["<think>"], ["</think>"], ["<tool_call>", "<function="], ["<<a", "<a<"], [], ["<"],
                             ["ab", "b"]]))
def test_held_suffix_agrees_with_its_definition(text: str, tags: list[str]) -> None:
    assert held_suffix(text, tags) == _held_suffix_plain(text, tags)


class _Adapter:
    def start(self) -> list[bytes]:
        return [b"data: a\n\n", b"data: b\n\n"]

    def feed(self, event: Any) -> list[bytes]:
        return [f"data: {event}\n\n".encode()] * (2 if event == "twice" else 1)


def _run_sse(steps: Any, receive: Any) -> tuple[list[dict[str, Any]], list[str]]:
    from harnesscheck.reference_server.frontends.http import RAW_SEND, SSEResponse

    sent: list[dict[str, Any]] = []
    log: list[str] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def close() -> None:
        log.append("close")

    async def main() -> None:
        response = SSEResponse(_Adapter(), steps(log), close=close, then=lambda: log.append("then"))
        await response({"type": "http", RAW_SEND: send}, receive, send)

    asyncio.run(main())
    return sent, log


async def _never_disconnect() -> dict[str, Any]:
    await asyncio.Event().wait()
    return {}


def test_sse_response_sends_one_chunk_per_step_then_ends() -> None:
    async def steps(log: list[str]) -> AsyncIterator[list[Any]]:
        try:
            for step in (["x"], [], ["twice", "y"]):
                await asyncio.sleep(0)
                yield step
        finally:
            log.append("steps closed")

    sent, log = _run_sse(steps, _never_disconnect)
    assert sent[0]["type"] == "http.response.start"
    bodies = [m["body"] for m in sent[1:]]
    assert bodies == [b"data: a\n\ndata: b\n\n", b"data: x\n\n", b"data: twice\n\ndata: twice\n\ndata: y\n\n", b""]
    assert [m["more_body"] for m in sent[1:]] == [True, True, True, False]
    assert log == ["steps closed", "then", "close"]


def test_sse_response_stops_and_closes_the_turn_when_the_client_goes_away() -> None:
    async def steps(log: list[str]) -> AsyncIterator[list[Any]]:
        try:
            yield ["x"]
            await asyncio.Event().wait()  # an engine that never yields again
            yield ["never"]
        finally:
            log.append("steps closed")

    async def disconnect_soon() -> dict[str, Any]:
        await asyncio.sleep(0.05)
        return {"type": "http.disconnect"}

    sent, log = _run_sse(steps, disconnect_soon)
    assert [m.get("body") for m in sent[1:]] == [b"data: a\n\ndata: b\n\n", b"data: x\n\n"]
    assert log == ["steps closed", "close"]  # no `then`, no end of body: the stream was cut


def test_sse_response_closes_the_turn_when_no_step_was_taken() -> None:
    async def steps(log: list[str]) -> AsyncIterator[list[Any]]:
        log.append("steps started")
        await asyncio.Event().wait()  # the engine's first token never comes
        yield ["x"]

    async def disconnect_now() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    sent, log = _run_sse(steps, disconnect_now)
    assert log[-1] == "close" and "then" not in log
    assert sent[-1].get("more_body", True)  # the body never ended


def test_sse_response_error_in_a_step_propagates() -> None:
    async def steps(log: list[str]) -> AsyncIterator[list[Any]]:
        yield ["x"]
        raise RuntimeError("engine broke")

    import pytest

    with pytest.raises(RuntimeError, match="engine broke"):
        _run_sse(steps, _never_disconnect)
