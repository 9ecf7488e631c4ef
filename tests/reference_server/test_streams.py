"""Raw SSE over HTTP: the calculator example's Anthropic event sequence, Chat include_usage, and
Dynamo's tool_call_dispatch frames (once per call, after its last argument delta, before [DONE])."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import httpx
import pytest

from harnesscheck.scenarios.loader import load_all

HTTP = httpx.Client(timeout=60)  # one client: a new httpx client per request costs ~50 ms (TLS context)
NEMOTRON = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"
DEEPSEEK = "deepseek-ai/DeepSeek-R1"
MODELS = [NEMOTRON, DEEPSEEK]


def sse_frames(body: str) -> list[tuple[str | None, str]]:
    """(event name, data) per frame; enough of the SSE grammar for our server's output."""
    frames = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        event, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data:
            frames.append((event, "\n".join(data)))
    return frames


def post_stream(url: str, path: str, body: dict[str, Any]) -> list[tuple[str | None, str]]:
    response = HTTP.post(url + path, json={**body, "stream": True}, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return sse_frames(response.text)


CALCULATOR_TOOLS = [
    {"name": "calculator", "description": "Evaluate an arithmetic expression.",
     "input_schema": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}},
    {"name": "weather", "description": "Current weather for a city.",
     "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
]
CALCULATOR_USER = "Think carefully about what 15 * 23 equals, then use the calculator to verify."


@pytest.mark.parametrize("model", MODELS)
def test_calculator_event_sequence(reference_server: str, model: str) -> None:
    frames = post_stream(reference_server, "/v1/messages", {
        "model": model, "max_tokens": 2048,
        "system": "You are a helpful assistant. Think step by step before you answer.",
        "tools": CALCULATOR_TOOLS, "messages": [{"role": "user", "content": CALCULATOR_USER}]})
    events = [json.loads(data) for _, data in frames]
    for (name, _), event in zip(frames, events):
        assert name == event["type"]
    # One letter per event, then the grammar as a regular expression.
    letters = []
    for e in events:
        t = e["type"]
        if t == "content_block_start":
            letters.append({"thinking": "T", "text": "X", "tool_use": "U"}[e["content_block"]["type"]])
        elif t == "content_block_delta":
            letters.append({"thinking_delta": "t", "signature_delta": "s", "text_delta": "x",
                            "input_json_delta": "j"}[e["delta"]["type"]])
        else:
            letters.append({"message_start": "<", "ping": "p", "content_block_stop": "|", "message_delta": "d",
                            "message_stop": ">"}[t])
    seq = "".join(letters).replace("p", "")
    assert re.fullmatch(r"<Tt+s\|(Xx+\|)?Uj+\|d>", seq), seq
    assert [e["index"] for e in events if "index" in e] == sorted(e["index"] for e in events if "index" in e)
    tool_start = next(e for e in events if e["type"] == "content_block_start"
                      and e["content_block"]["type"] == "tool_use")
    assert tool_start["content_block"]["name"] == "calculator" and tool_start["content_block"]["input"] == {}
    tool_index = tool_start["index"]
    joined = "".join(e["delta"]["partial_json"] for e in events
                     if e["type"] == "content_block_delta" and e["index"] == tool_index)
    assert json.loads(joined) == {"expression": "15 * 23"}
    delta = next(e for e in events if e["type"] == "message_delta")
    assert delta["delta"]["stop_reason"] == "tool_use"
    thinking = "".join(e["delta"].get("thinking", "") for e in events if e["type"] == "content_block_delta")
    assert "15 * 23" in thinking
    start_usage = events[0]["message"]["usage"]
    assert start_usage["input_tokens"] > 0 and "output_tokens" in start_usage


def chat_body(model: str, scenario_id: str, **extra: Any) -> dict[str, Any]:
    scenario = load_all()[scenario_id]
    return {"model": model, "max_tokens": 2048,
            "messages": [{"role": "system", "content": scenario.system}, {"role": "user", "content": scenario.trigger}],
            "tools": [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                                        "parameters": t["parameters"]}} for t in scenario.tools],
            **extra}


def test_chat_include_usage(reference_server: str) -> None:
    body = chat_body(NEMOTRON, "calculator", stream_options={"include_usage": True})
    frames = post_stream(reference_server, "/v1/chat/completions", body)
    assert frames[-1][1] == "[DONE]"
    chunks = [json.loads(d) for e, d in frames if e is None and d != "[DONE]"]
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["prompt_tokens"] > 0
    assert all(c.get("usage") is None for c in chunks[:-1])
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    # stream_options only with stream: true (OpenAI rejects it otherwise), so the plain request drops it
    plain_body = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    plain = HTTP.post(reference_server + "/v1/chat/completions", json=plain_body, timeout=30).json()
    assert plain["usage"]["prompt_tokens"] == usage_chunk["usage"]["prompt_tokens"]
    assert plain["usage"]["completion_tokens"] == usage_chunk["usage"]["completion_tokens"]
    assert usage_chunk["usage"]["total_tokens"] == usage_chunk["usage"]["prompt_tokens"] + \
        usage_chunk["usage"]["completion_tokens"]
    # Without include_usage: no usage chunk.
    frames = post_stream(reference_server, "/v1/chat/completions", chat_body(NEMOTRON, "calculator"))
    chunks = [json.loads(d) for e, d in frames if e is None and d != "[DONE]"]
    assert all(c["choices"] for c in chunks)


def dispatch_check(frames: list[tuple[str | None, str]], want_dispatch: bool) -> int:
    """Checks the frames; returns the number of tool calls."""
    assert frames[-1] == (None, "[DONE]")
    args: dict[int, str] = {}
    last_delta: dict[int, int] = {}
    first_delta: dict[int, int] = {}
    dispatched: dict[int, list[int]] = {}
    finish_at = None
    for n, (event, data) in enumerate(frames):
        if event == "tool_call_dispatch":
            payload = json.loads(data)
            assert payload["choice_index"] == 0
            call = payload["tool_call"]
            dispatched.setdefault(call["index"], []).append(n)
            assert call["type"] == "function" and call["id"] and call["function"]["name"]
            assert call["function"]["arguments"] == args[call["index"]], "dispatch before the last argument delta"
            continue
        assert event is None
        if data == "[DONE]":
            continue
        chunk = json.loads(data)
        for choice in chunk["choices"]:
            for tc in choice["delta"].get("tool_calls") or []:
                i = tc["index"]
                first_delta.setdefault(i, n)
                last_delta[i] = n
                args[i] = args.get(i, "") + (tc.get("function") or {}).get("arguments", "")
            if choice.get("finish_reason"):
                finish_at = n
    assert finish_at is not None
    for i, text in args.items():
        assert isinstance(json.loads(text), dict)
    if want_dispatch:
        assert sorted(dispatched) == sorted(args)
        for i, where in dispatched.items():
            assert len(where) == 1, f"call {i} dispatched {len(where)} times"
            assert where[0] > last_delta[i]
            if i + 1 in first_delta:  # as soon as the call is complete: before the next call starts
                assert where[0] < first_delta[i + 1]
            assert where[0] < len(frames) - 1
    else:
        assert not dispatched
    return len(args)


@pytest.mark.parametrize("scenario_id", ["parallel_tools", "interleaved", "calculator"])
@pytest.mark.parametrize("model", MODELS)
def test_tool_call_dispatch(reference_server: str, model: str, scenario_id: str) -> None:
    frames = post_stream(reference_server, "/v1/chat/completions", chat_body(model, scenario_id))
    calls = dispatch_check(frames, want_dispatch=True)
    assert calls == len(load_all()[scenario_id].turns[0].tool_calls)


@pytest.fixture(scope="module")
def no_dispatch_server(server_factory) -> str:
    return server_factory("--no-enable-streaming-tool-dispatch")


@pytest.mark.parametrize("model", MODELS)
def test_no_tool_call_dispatch(no_dispatch_server: str, model: str) -> None:
    frames = post_stream(no_dispatch_server, "/v1/chat/completions", chat_body(model, "parallel_tools"))
    # Tool calls are still streamed inline as soon as parsed.
    assert dispatch_check(frames, want_dispatch=False) == 2


@pytest.fixture(scope="module")
def slow_server(server_factory) -> str:
    return server_factory("--decode-ms", "20")


def test_client_disconnect_frees_the_slot(slow_server: str) -> None:
    bodies = {"/v1/messages": {"model": DEEPSEEK, "max_tokens": 1000, "messages": [
                  {"role": "user", "content": load_all()["plain_text"].trigger}]},
              "/v1/chat/completions": chat_body(DEEPSEEK, "plain_text"),
              "/v1/responses": {"model": DEEPSEEK, "input": load_all()["plain_text"].trigger}}
    for path, body in bodies.items():
        with HTTP.stream("POST", slow_server + path, json={**body, "stream": True}, timeout=30) as response:
            for n, _ in enumerate(response.iter_lines()):
                if n > 6:
                    break  # hang up mid-stream
        deadline = time.monotonic() + 5
        while HTTP.get(slow_server + "/health").json()["active_requests"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert HTTP.get(slow_server + "/health").json()["active_requests"] == 0, path
