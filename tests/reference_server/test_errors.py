"""Bad input gets a 4xx in the API's own error shape, never a 5xx: a table per API, body-level
errors (413, Content-Encoding), --api-key, and random JSON posted to every route (hypothesis)."""

from __future__ import annotations

import gzip
import json
from typing import Any

import anthropic
import httpx
import openai
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

HTTP = httpx.Client(timeout=60)  # one client: a new httpx client per request costs ~50 ms (TLS context)
NEMOTRON = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"
DEEPSEEK = "deepseek-ai/DeepSeek-R1"
AN_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
            413: "request_too_large", 415: "invalid_request_error"}


def check_shape(response: httpx.Response, api: str, status: int) -> None:
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    if api == "anthropic":
        assert body["type"] == "error" and set(body["error"]) >= {"type", "message"}
        assert body["error"]["type"] == AN_TYPES[status] and body["error"]["message"]
    else:
        assert set(body["error"]) == {"message", "type", "param", "code"}
        assert isinstance(body["error"]["message"], str) and body["error"]["message"]


AN_OK: dict[str, Any] = {"model": NEMOTRON, "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}]}
CHAT_OK: dict[str, Any] = {"model": NEMOTRON, "messages": [{"role": "user", "content": "hi"}]}
RS_OK: dict[str, Any] = {"model": NEMOTRON, "input": "hi"}


def drop(body: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != key}


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


ANTHROPIC_BAD: list[tuple[str, Any, int]] = [
    ("not json", b"{not json", 400),
    ("empty body", b"", 400),
    ("json array", b"[]", 400),
    ("json string", b'"hi"', 400),
    ("missing model", drop(AN_OK, "model"), 400),
    ("model not a string", {**AN_OK, "model": 5}, 400),
    ("missing max_tokens", drop(AN_OK, "max_tokens"), 400),
    ("max_tokens a string", {**AN_OK, "max_tokens": "10"}, 400),
    ("max_tokens zero (cache pre-warming, not served here)", {**AN_OK, "max_tokens": 0}, 400),
    ("max_tokens negative", {**AN_OK, "max_tokens": -1}, 400),
    ("max_tokens boolean", {**AN_OK, "max_tokens": True}, 400),
    ("missing messages", drop(AN_OK, "messages"), 400),
    ("empty messages", {**AN_OK, "messages": []}, 400),
    ("messages a string", {**AN_OK, "messages": "hi"}, 400),
    ("message not an object", {**AN_OK, "messages": ["hi"]}, 400),
    ("bad role", {**AN_OK, "messages": [{"role": "robot", "content": "hi"}]}, 400),
    ("no content", {**AN_OK, "messages": [{"role": "user"}]}, 400),
    ("content a number", {**AN_OK, "messages": [user(5)]}, 400),
    ("block not an object", {**AN_OK, "messages": [user([1])]}, 400),
    ("text block without text", {**AN_OK, "messages": [user([{"type": "text"}])]}, 400),
    ("text block text a number", {**AN_OK, "messages": [user([{"type": "text", "text": 5}])]}, 400),
    ("tool_result without id", {**AN_OK, "messages": [user([{"type": "tool_result", "content": "x"}])]}, 400),
    ("tool_use without name", {**AN_OK, "messages": [user("a"), {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "input": {}}]}]}, 400),
    ("tool_use input a string", {**AN_OK, "messages": [user("a"), {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "x", "input": "{}"}]}]}, 400),
    ("thinking without text", {**AN_OK, "messages": [user("a"), {"role": "assistant", "content": [
        {"type": "thinking", "signature": "s"}]}]}, 400),
    ("system a number", {**AN_OK, "system": 5}, 400),
    ("system block without text", {**AN_OK, "system": [{"type": "text"}]}, 400),
    ("tools not an array", {**AN_OK, "tools": {"name": "x"}}, 400),
    ("tool without name", {**AN_OK, "tools": [{"input_schema": {"type": "object"}}]}, 400),
    ("tool schema not an object", {**AN_OK, "tools": [{"name": "x", "input_schema": "s"}]}, 400),
    ("tool_choice bad type", {**AN_OK, "tool_choice": {"type": "sometimes"}}, 400),
    ("tool_choice a string", {**AN_OK, "tool_choice": "auto"}, 400),
    ("tool_choice tool without name", {**AN_OK, "tool_choice": {"type": "tool"}}, 400),
    ("thinking bad type", {**AN_OK, "thinking": {"type": "maybe"}}, 400),
    ("stream a string", {**AN_OK, "stream": "yes"}, 400),
    ("temperature a string", {**AN_OK, "temperature": "hot"}, 400),
    ("stop_sequences a string", {**AN_OK, "stop_sequences": "x"}, 400),
    ("unknown model", {**AN_OK, "model": "nope/nope"}, 404),
]

CHAT_BAD: list[tuple[str, Any, int]] = [
    ("not json", b"{not json", 400),
    ("json array", b"[1, 2]", 400),
    ("missing model", drop(CHAT_OK, "model"), 400),
    ("missing messages", drop(CHAT_OK, "messages"), 400),
    ("empty messages", {**CHAT_OK, "messages": []}, 400),
    ("messages a string", {**CHAT_OK, "messages": "hi"}, 400),
    ("message not an object", {**CHAT_OK, "messages": [5]}, 400),
    ("bad role", {**CHAT_OK, "messages": [{"role": "robot", "content": "hi"}]}, 400),
    ("content a number", {**CHAT_OK, "messages": [user(5)]}, 400),
    ("content part not an object", {**CHAT_OK, "messages": [user(["hi"])]}, 400),
    ("tool message without id", {**CHAT_OK, "messages": [user("a"), {"role": "tool", "content": "x"}]}, 400),
    ("tool_calls not an array", {**CHAT_OK, "messages": [user("a"), {"role": "assistant", "tool_calls": "x"}]}, 400),
    ("tool call without name", {**CHAT_OK, "messages": [user("a"), {"role": "assistant", "tool_calls": [
        {"id": "c", "type": "function", "function": {"arguments": "{}"}}]}]}, 400),
    ("tools not an array", {**CHAT_OK, "tools": "x"}, 400),
    ("tool without function", {**CHAT_OK, "tools": [{"type": "function"}]}, 400),
    ("tool parameters not an object", {**CHAT_OK, "tools": [{"type": "function", "function": {
        "name": "f", "parameters": "x"}}]}, 400),
    ("tool_choice unknown string", {**CHAT_OK, "tool_choice": "sometimes"}, 400),
    ("tool_choice object without name", {**CHAT_OK, "tool_choice": {"type": "function"}}, 400),
    ("max_tokens negative", {**CHAT_OK, "max_tokens": -1}, 400),
    ("max_completion_tokens a string", {**CHAT_OK, "max_completion_tokens": "9"}, 400),
    ("stream a string", {**CHAT_OK, "stream": "yes"}, 400),
    ("stream_options a string", {**CHAT_OK, "stream": True, "stream_options": "x"}, 400),
    ("include_usage a string", {**CHAT_OK, "stream": True, "stream_options": {"include_usage": "yes"}}, 400),
    ("temperature a string", {**CHAT_OK, "temperature": "hot"}, 400),
    ("parallel_tool_calls a string", {**CHAT_OK, "parallel_tool_calls": "yes"}, 400),
    ("unknown model", {**CHAT_OK, "model": "nope"}, 404),
]

RESPONSES_BAD: list[tuple[str, Any, int]] = [
    ("not json", b"nope", 400),
    ("json array", b"[]", 400),
    ("missing model", drop(RS_OK, "model"), 400),
    ("input a number", {**RS_OK, "input": 5}, 400),
    ("item not an object", {**RS_OK, "input": [5]}, 400),
    ("item without type or role", {**RS_OK, "input": [{"content": "x"}]}, 400),
    ("bad role", {**RS_OK, "input": [{"type": "message", "role": "robot", "content": "x"}]}, 400),
    ("content a number", {**RS_OK, "input": [{"type": "message", "role": "user", "content": 5}]}, 400),
    ("function_call without call_id", {**RS_OK, "input": [{"type": "function_call", "name": "f",
                                                           "arguments": "{}"}]}, 400),
    ("function_call without name", {**RS_OK, "input": [{"type": "function_call", "call_id": "c",
                                                        "arguments": "{}"}]}, 400),
    ("function_call_output without call_id", {**RS_OK, "input": [{"type": "function_call_output",
                                                                  "output": "x"}]}, 400),
    ("tools not an array", {**RS_OK, "tools": "x"}, 400),
    ("tool not an object", {**RS_OK, "tools": [5]}, 400),
    ("function tool without name", {**RS_OK, "tools": [{"type": "function", "parameters": {}}]}, 400),
    ("function tool parameters a string", {**RS_OK, "tools": [{"type": "function", "name": "f",
                                                               "parameters": "x"}]}, 400),
    ("tool_choice unknown string", {**RS_OK, "tool_choice": "sometimes"}, 400),
    ("reasoning a string", {**RS_OK, "reasoning": "high"}, 400),
    ("include not strings", {**RS_OK, "include": [1]}, 400),
    ("include a string", {**RS_OK, "include": "reasoning.encrypted_content"}, 400),
    ("instructions a number", {**RS_OK, "instructions": 5}, 400),
    ("max_output_tokens zero", {**RS_OK, "max_output_tokens": 0}, 400),
    ("item of an unknown type", {**RS_OK, "input": [{"type": "bogus_item", "content": "x"}]}, 400),
    ("store a string", {**RS_OK, "store": "no"}, 400),
    ("unknown previous_response_id", {**RS_OK, "previous_response_id": "resp_nope"}, 400),
    ("unknown model", {**RS_OK, "model": "gpt-nope"}, 404),
]

# --- the request rules of the API references (docs/API_FACTS.md, "Request validation") -----------
# Rejected: 400 in the API's shape, with the OpenAI `param` the rule is about. Accepted: 200 and an answer.

THINKING = {"type": "enabled", "budget_tokens": 1024}
AN_THINKING: dict[str, Any] = {**AN_OK, "max_tokens": 2048, "thinking": THINKING}
AN_TOOLS = [{"name": "calculator",
             "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}}}]

ANTHROPIC_REJECTED: list[tuple[str, dict[str, Any]]] = [
    ("thinking enabled without budget_tokens", {**AN_THINKING, "thinking": {"type": "enabled"}}),
    ("thinking budget_tokens a string", {**AN_THINKING, "thinking": {**THINKING, "budget_tokens": "2k"}}),
    ("thinking budget_tokens below 1024", {**AN_THINKING, "thinking": {**THINKING, "budget_tokens": 1023}}),
    ("thinking budget_tokens equal to max_tokens", {**AN_THINKING, "max_tokens": 1024}),
    ("thinking budget_tokens above max_tokens", {**AN_THINKING, "max_tokens": 100}),
    ("temperature 5", {**AN_OK, "temperature": 5}),
    ("temperature above 1", {**AN_OK, "temperature": 1.5}),
    ("temperature negative", {**AN_OK, "temperature": -0.1}),
    ("top_p above 1", {**AN_OK, "top_p": 1.01}),
    ("top_p negative", {**AN_OK, "top_p": -1}),
    ("top_k negative", {**AN_OK, "top_k": -1}),
    ("top_k a number with a fraction", {**AN_OK, "top_k": 2.5}),
    ("temperature 0.5 with thinking enabled", {**AN_THINKING, "temperature": 0.5}),
    ("top_k with thinking enabled", {**AN_THINKING, "top_k": 5}),
    ("top_p 0.9 with thinking enabled", {**AN_THINKING, "top_p": 0.9}),
    ("tool_choice any with thinking enabled", {**AN_THINKING, "tools": AN_TOOLS,
                                               "tool_choice": {"type": "any"}}),
    ("tool_choice tool with thinking enabled", {**AN_THINKING, "tools": AN_TOOLS,
                                                "tool_choice": {"type": "tool", "name": "calculator"}}),
    ("stop_sequences with a number", {**AN_OK, "stop_sequences": ["x", 5]}),
]

ANTHROPIC_ACCEPTED: list[tuple[str, dict[str, Any]]] = [
    ("thinking enabled, budget 1024 below max_tokens", AN_THINKING),
    ("thinking adaptive (Claude Code)", {**AN_OK, "thinking": {"type": "adaptive"}}),
    ("thinking adaptive with display", {**AN_OK, "thinking": {"type": "adaptive", "display": "omitted"}}),
    ("thinking disabled", {**AN_OK, "thinking": {"type": "disabled"}}),
    ("Claude Code's fields", {**AN_OK, "max_tokens": 32000, "thinking": {"type": "adaptive"},
                              "context_management": {"edits": [{"type": "clear_thinking_20251015",
                                                                "keep": "all"}]},
                              "output_config": {"effort": "high"}, "metadata": {"user_id": "u"}}),
    ("temperature 0", {**AN_OK, "temperature": 0}),
    ("temperature 1", {**AN_OK, "temperature": 1.0}),
    ("top_p 0 and 1", {**AN_OK, "top_p": 0, "temperature": 1}),
    ("top_k 0", {**AN_OK, "top_k": 0}),
    ("temperature 1 with thinking enabled", {**AN_THINKING, "temperature": 1}),
    ("top_p 0.95 with thinking enabled", {**AN_THINKING, "top_p": 0.95}),
    ("tool_choice auto with thinking enabled", {**AN_THINKING, "tools": AN_TOOLS,
                                                "tool_choice": {"type": "auto"}}),
    ("temperature 0.2 with thinking disabled", {**AN_OK, "thinking": {"type": "disabled"},
                                                "temperature": 0.2}),
    ("max_tokens 1", {**AN_OK, "max_tokens": 1}),
    # "Consecutive user or assistant turns in your request will be combined into a single turn."
    ("consecutive user messages", {**AN_OK, "messages": [user("a"), user("b")]}),
    ("consecutive assistant messages", {**AN_OK, "messages": [
        user("a"), {"role": "assistant", "content": "b"}, {"role": "assistant", "content": "c"}, user("d")]}),
]

USAGE = {"include_usage": True}
TOOL_NO_CONTENT = {"role": "tool", "tool_call_id": "c"}
CHAT_REJECTED: list[tuple[str, dict[str, Any], str]] = [
    ("n 3 (one choice per request here)", {**CHAT_OK, "n": 3}, "n"),
    ("n 0", {**CHAT_OK, "n": 0}, "n"),
    ("n 129", {**CHAT_OK, "n": 129}, "n"),
    ("stream_options without stream", {**CHAT_OK, "stream_options": USAGE}, "stream_options"),
    ("stream_options with stream false", {**CHAT_OK, "stream": False, "stream_options": USAGE},
     "stream_options"),
    ("temperature 9", {**CHAT_OK, "temperature": 9}, "temperature"),
    ("temperature negative", {**CHAT_OK, "temperature": -0.5}, "temperature"),
    ("top_p above 1", {**CHAT_OK, "top_p": 1.5}, "top_p"),
    ("presence_penalty 3", {**CHAT_OK, "presence_penalty": 3}, "presence_penalty"),
    ("frequency_penalty -3", {**CHAT_OK, "frequency_penalty": -3}, "frequency_penalty"),
    ("top_logprobs 21", {**CHAT_OK, "logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ("top_logprobs without logprobs", {**CHAT_OK, "top_logprobs": 2}, "top_logprobs"),
    ("max_tokens zero", {**CHAT_OK, "max_tokens": 0}, "max_tokens"),
    ("max_completion_tokens zero", {**CHAT_OK, "max_completion_tokens": 0}, "max_completion_tokens"),
    ("five stop sequences", {**CHAT_OK, "stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ("stop with a number", {**CHAT_OK, "stop": ["a", 1]}, "stop"),
    ("user message without content", {**CHAT_OK, "messages": [{"role": "user"}]}, "messages[0].content"),
    ("tool message without content", {**CHAT_OK, "messages": [user("a"), TOOL_NO_CONTENT]},
     "messages[1].content"),
]

CHAT_ACCEPTED: list[tuple[str, dict[str, Any]]] = [
    ("n 1", {**CHAT_OK, "n": 1}),
    ("n null", {**CHAT_OK, "n": None}),
    ("temperature 0 and top_p 0", {**CHAT_OK, "temperature": 0, "top_p": 0}),
    ("temperature 2 and top_p 1", {**CHAT_OK, "temperature": 2, "top_p": 1}),
    ("penalties at -2 and 2", {**CHAT_OK, "presence_penalty": -2, "frequency_penalty": 2}),
    ("stream_options null without stream", {**CHAT_OK, "stream_options": None}),
    ("four stop sequences", {**CHAT_OK, "stop": ["a", "b", "c", "d"]}),
    ("max_completion_tokens 1", {**CHAT_OK, "max_completion_tokens": 1}),
    ("developer message", {**CHAT_OK, "messages": [{"role": "developer", "content": "brief"}, user("hi")]}),
    ("assistant message with tool_calls and no content", {**CHAT_OK, "messages": [
        user("a"), {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                         "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "done"}]}),
]

RESPONSES_REJECTED: list[tuple[str, dict[str, Any], str]] = [
    ("max_output_tokens 1", {**RS_OK, "max_output_tokens": 1}, "max_output_tokens"),
    ("max_output_tokens 15", {**RS_OK, "max_output_tokens": 15}, "max_output_tokens"),
    ("temperature 9", {**RS_OK, "temperature": 9}, "temperature"),
    ("top_p 2", {**RS_OK, "top_p": 2}, "top_p"),
    ("top_logprobs 21", {**RS_OK, "top_logprobs": 21}, "top_logprobs"),
    ("input item of an unknown type", {**RS_OK, "input": [{"type": "bogus_item"}]}, "input[0].type"),
]

RESPONSES_ACCEPTED: list[tuple[str, dict[str, Any]]] = [
    ("no input, only instructions", {"model": NEMOTRON, "instructions": "Say ok."}),
    ("no input, instructions, streamed", {"model": NEMOTRON, "instructions": "Say ok.", "stream": True}),
    ("input null with instructions", {"model": NEMOTRON, "input": None, "instructions": "Say ok."}),
    ("max_output_tokens 16", {**RS_OK, "max_output_tokens": 16}),
    ("temperature 0 and 2, top_p 0 and 1", {**RS_OK, "temperature": 2, "top_p": 0}),
    ("Codex's item types", {**RS_OK, "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "be brief"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "local_shell_call", "call_id": "c1", "status": "completed",
         "action": {"type": "exec", "command": ["ls"]}},
        {"type": "local_shell_call_output", "call_id": "c1", "output": "a.txt"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"}]}),
]


def check_param(response: httpx.Response, param: str) -> None:
    """OpenAI names the field a rule is about in `error.param`."""
    assert response.json()["error"]["param"] == param, response.text


@pytest.mark.parametrize(("name", "body"), ANTHROPIC_REJECTED, ids=[c[0] for c in ANTHROPIC_REJECTED])
def test_anthropic_rules_rejected(reference_server: str, name: str, body: dict[str, Any]) -> None:
    for stream in (False, True):
        response = send(reference_server, "/v1/messages?beta=true", {**body, "stream": stream})
        check_shape(response, "anthropic", 400)


@pytest.mark.parametrize(("name", "body"), ANTHROPIC_ACCEPTED, ids=[c[0] for c in ANTHROPIC_ACCEPTED])
def test_anthropic_rules_accepted(reference_server: str, name: str, body: dict[str, Any]) -> None:
    response = send(reference_server, "/v1/messages?beta=true", body)
    assert response.status_code == 200, response.text
    message = response.json()
    assert message["type"] == "message" and message["stop_reason"] in ("end_turn", "max_tokens", "tool_use")


def test_anthropic_count_tokens_takes_thinking_without_max_tokens(reference_server: str) -> None:
    body = {"model": NEMOTRON, "messages": [user("hi")], "thinking": THINKING}
    response = send(reference_server, "/v1/messages/count_tokens", body)
    assert response.status_code == 200, response.text
    assert response.json()["input_tokens"] > 0
    bad = send(reference_server, "/v1/messages/count_tokens", {**body, "thinking": {"type": "enabled"}})
    check_shape(bad, "anthropic", 400)


def test_interleaved_thinking_lifts_the_budget_rule() -> None:
    """With the interleaved-thinking beta the budget may reach max_tokens (extended-thinking docs);
    the frontend takes the request's anthropic-beta header as `betas`."""
    from harnesscheck.reference_server.faults import Faults
    from harnesscheck.reference_server.frontends import anthropic as frontend
    from harnesscheck.reference_server.frontends.common import ApiError

    body = {**AN_THINKING, "max_tokens": 1024, "thinking": {"type": "enabled", "budget_tokens": 4096}}
    with pytest.raises(ApiError) as info:
        frontend.to_conversation(body, Faults())
    assert info.value.status == 400 and "budget_tokens" in info.value.message
    betas = "claude-code-20250219,interleaved-thinking-2025-05-14"
    assert frontend.to_conversation(body, Faults(), betas=betas).thinking is True


OPENAI_REJECTED = ([("/v1/chat/completions", *c) for c in CHAT_REJECTED]
                   + [("/v1/responses", *c) for c in RESPONSES_REJECTED])


@pytest.mark.parametrize(("path", "name", "body", "param"), OPENAI_REJECTED,
                         ids=[f"{c[0].rsplit('/', 1)[-1]}-{c[1]}" for c in OPENAI_REJECTED])
def test_openai_rules_rejected(reference_server: str, path: str, name: str, body: dict[str, Any],
                               param: str) -> None:
    response = send(reference_server, path, body)
    check_shape(response, "openai", 400)
    check_param(response, param)
    assert response.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize(("name", "body"), CHAT_ACCEPTED, ids=[c[0] for c in CHAT_ACCEPTED])
def test_chat_rules_accepted(reference_server: str, name: str, body: dict[str, Any]) -> None:
    response = send(reference_server, "/v1/chat/completions", body)
    assert response.status_code == 200, response.text
    assert len(response.json()["choices"]) == 1


def test_chat_stream_options_with_stream(reference_server: str) -> None:
    response = send(reference_server, "/v1/chat/completions",
                    {**CHAT_OK, "stream": True, "stream_options": USAGE})
    assert response.status_code == 200, response.text
    chunks = [json.loads(line[6:]) for line in response.text.splitlines()
              if line.startswith("data: {")]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0


@pytest.mark.parametrize(("name", "body"), RESPONSES_ACCEPTED, ids=[c[0] for c in RESPONSES_ACCEPTED])
def test_responses_rules_accepted(reference_server: str, name: str, body: dict[str, Any]) -> None:
    response = send(reference_server, "/v1/responses", body)
    assert response.status_code == 200, response.text
    if body.get("stream"):
        assert '"type":"response.completed"' in response.text
    else:  # incomplete when the output limit cut the answer (max_output_tokens 16)
        assert response.json()["status"] in ("completed", "incomplete") and response.json()["output"]


def test_responses_previous_response_id_without_input(reference_server: str) -> None:
    """The SDK sends no `input` when none is given; a turn may continue from the stored response."""
    oa = openai.OpenAI(base_url=reference_server + "/v1", api_key="k", max_retries=0)
    first = oa.responses.create(model=NEMOTRON, input="hi")
    second = oa.responses.create(model=NEMOTRON, previous_response_id=first.id)
    assert second.status == "completed" and second.usage is not None
    assert second.usage.input_tokens > first.usage.input_tokens  # the stored turn came first
    only = oa.responses.create(model=NEMOTRON, instructions="Say ok.")
    assert only.status == "completed" and only.output_text


def test_sdks_raise_typed_errors_for_rules(reference_server: str) -> None:
    an = anthropic.Anthropic(base_url=reference_server, api_key="k", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as info:
        an.messages.create(model=NEMOTRON, max_tokens=2048, messages=[user("x")],
                           thinking={"type": "enabled"})  # type: ignore[typeddict-item]
    assert info.value.body["error"]["type"] == "invalid_request_error"
    oa = openai.OpenAI(base_url=reference_server + "/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.BadRequestError) as chat_info:
        oa.chat.completions.create(model=NEMOTRON, messages=[user("x")], n=3)
    assert chat_info.value.param == "n"
    with pytest.raises(openai.BadRequestError) as rs_info:
        oa.responses.create(model=NEMOTRON, input="x", max_output_tokens=1)
    assert rs_info.value.code == "integer_below_min_value"


OTHER_BAD: list[tuple[str, str, Any, int]] = [
    ("/v1/messages/count_tokens", "missing model", {"messages": [user("hi")]}, 400),
    ("/v1/messages/count_tokens", "missing messages", {"model": NEMOTRON}, 400),
    ("/v1/messages/count_tokens", "unknown model", {"model": "nope", "messages": [user("hi")]}, 404),
    ("/v1/tokenize", "neither prompt nor messages", {"model": NEMOTRON}, 400),
    ("/tokenize", "prompt a number", {"prompt": 5}, 400),
    ("/tokenize", "messages a string", {"messages": "hi"}, 400),
    ("/tokenize", "add_generation_prompt a string", {"messages": [user("hi")], "add_generation_prompt": "y"}, 400),
    ("/tokenize", "unknown model", {"model": "nope", "prompt": "hi"}, 404),
    ("/v1/detokenize", "missing tokens", {}, 400),
    ("/detokenize", "tokens not ints", {"tokens": ["a"]}, 400),
    ("/detokenize", "token out of range", {"tokens": [10 ** 9]}, 400),
    ("/detokenize", "json array", b"[]", 400),
]


def send(url: str, path: str, body: Any, **headers: str) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return HTTP.post(url + path, content=content, headers={"content-type": "application/json", **headers},
                      timeout=30)


@pytest.mark.parametrize(("name", "body", "status"), ANTHROPIC_BAD, ids=[c[0] for c in ANTHROPIC_BAD])
def test_anthropic_bad_requests(reference_server: str, name: str, body: Any, status: int) -> None:
    for path in ("/v1/messages", "/v1/messages?beta=true"):
        check_shape(send(reference_server, path, body), "anthropic", status)
    if isinstance(body, dict) and "max_tokens" not in name:
        check_shape(send(reference_server, "/v1/messages", {**body, "stream": True} if "stream" not in name
                         else body), "anthropic", status)


@pytest.mark.parametrize(("name", "body", "status"), CHAT_BAD, ids=[c[0] for c in CHAT_BAD])
def test_chat_bad_requests(reference_server: str, name: str, body: Any, status: int) -> None:
    check_shape(send(reference_server, "/v1/chat/completions", body), "openai", status)


@pytest.mark.parametrize(("name", "body", "status"), RESPONSES_BAD, ids=[c[0] for c in RESPONSES_BAD])
def test_responses_bad_requests(reference_server: str, name: str, body: Any, status: int) -> None:
    check_shape(send(reference_server, "/v1/responses", body), "openai", status)


@pytest.mark.parametrize(("path", "name", "body", "status"), OTHER_BAD, ids=[f"{c[0]} {c[1]}" for c in OTHER_BAD])
def test_other_bad_requests(reference_server: str, path: str, name: str, body: Any, status: int) -> None:
    check_shape(send(reference_server, path, body), "anthropic" if "/messages" in path else "openai", status)


def test_sdks_raise_typed_errors(reference_server: str) -> None:
    an = anthropic.Anthropic(base_url=reference_server, api_key="k", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as info:
        an.messages.create(model=NEMOTRON, max_tokens=10, messages=[{"role": "robot", "content": "x"}])  # type: ignore
    assert info.value.body["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.NotFoundError):
        an.messages.create(model="nope", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    oa = openai.OpenAI(base_url=reference_server + "/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.BadRequestError):
        oa.chat.completions.create(model=NEMOTRON, messages=[])
    with pytest.raises(openai.NotFoundError):
        oa.responses.create(model="nope", input="x")


# --- body-level errors --------------------------------------------------------------------------

ROUTES = {"/v1/messages": "anthropic", "/v1/chat/completions": "openai", "/v1/responses": "openai"}
OK_BODIES = {"/v1/messages": AN_OK, "/v1/chat/completions": CHAT_OK, "/v1/responses": RS_OK}


@pytest.mark.parametrize("path", sorted(ROUTES))
def test_content_encoding_errors(reference_server: str, path: str) -> None:
    raw = json.dumps(OK_BODIES[path]).encode()
    check_shape(send(reference_server, path, raw, **{"content-encoding": "br"}), ROUTES[path], 415)
    check_shape(send(reference_server, path, b"\x1f\x8b\x08\x00garbage", **{"content-encoding": "gzip"}),
                ROUTES[path], 400)
    check_shape(send(reference_server, path, gzip.compress(raw)[:-9], **{"content-encoding": "gzip"}),
                ROUTES[path], 400)
    check_shape(send(reference_server, path, b"\x28\xb5\x2f\xfdgarbage", **{"content-encoding": "zstd"}),
                ROUTES[path], 400)
    check_shape(send(reference_server, path, raw, **{"content-encoding": "gzip"}), ROUTES[path], 400)
    assert send(reference_server, path, gzip.compress(raw), **{"content-encoding": "gzip"}).status_code == 200


@pytest.fixture(scope="module")
def small_body_server(server_factory) -> str:
    return server_factory("--max-body-bytes", "65536")


@pytest.mark.parametrize("path", sorted(ROUTES))
def test_huge_body_413(small_body_server: str, path: str) -> None:
    big = dict(OK_BODIES[path], padding="x" * 100_000)
    check_shape(send(small_body_server, path, big), ROUTES[path], 413)
    bomb = zstandard.ZstdCompressor().compress(json.dumps(big).encode())
    assert len(bomb) < 65536
    check_shape(send(small_body_server, path, bomb, **{"content-encoding": "zstd"}), ROUTES[path], 413)
    check_shape(send(small_body_server, path, gzip.compress(json.dumps(big).encode()),
                     **{"content-encoding": "gzip"}), ROUTES[path], 413)
    # Chunked upload (no Content-Length) is counted too.
    def chunks():
        data = json.dumps(big).encode()
        for i in range(0, len(data), 8192):
            yield data[i:i + 8192]
    r = HTTP.post(small_body_server + path, content=chunks(), headers={"content-type": "application/json"})
    check_shape(r, ROUTES[path], 413)
    assert send(small_body_server, path, OK_BODIES[path]).status_code == 200


# --- --api-key ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def keyed_server(server_factory) -> str:
    return server_factory("--api-key", "K-secret")


def test_api_key(keyed_server: str) -> None:
    for path, api in ROUTES.items():
        body = OK_BODIES[path]
        check_shape(send(keyed_server, path, body), api, 401)
        check_shape(send(keyed_server, path, body, **{"x-api-key": "wrong"}), api, 401)
        check_shape(send(keyed_server, path, body, authorization="Bearer wrong"), api, 401)
        assert send(keyed_server, path, body, **{"x-api-key": "K-secret"}).status_code == 200
        assert send(keyed_server, path, body, authorization="Bearer K-secret").status_code == 200
    check_shape(HTTP.get(keyed_server + "/v1/models"), "openai", 401)
    check_shape(HTTP.get(keyed_server + "/v1/models", headers={"anthropic-version": "2023-06-01"}), "anthropic", 401)
    assert HTTP.head(keyed_server + "/").status_code == 200  # Claude Code's probe
    an = anthropic.Anthropic(base_url=keyed_server, api_key="K-secret", max_retries=0)
    assert an.messages.create(**AN_OK).type == "message"
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=keyed_server, api_key="bad", max_retries=0).messages.create(**AN_OK)
    oa = openai.OpenAI(base_url=keyed_server + "/v1", api_key="K-secret", max_retries=0)
    assert oa.chat.completions.create(**CHAT_OK).choices[0].message.content == "ok"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=keyed_server + "/v1", api_key="bad", max_retries=0).responses.create(**RS_OK)


# --- random JSON never gets a 5xx ---------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12)
models = st.sampled_from([NEMOTRON, DEEPSEEK]) | json_values
texts = st.text(max_size=30) | json_values


def blocks() -> st.SearchStrategy[Any]:
    block = st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "thinking", "redacted_thinking", "tool_use", "tool_result", "image",
                                  "input_text", "output_text", "bogus"]) | json_values},
        optional={"text": texts, "thinking": texts, "signature": texts, "id": texts, "name": texts,
                  "input": json_values, "tool_use_id": texts, "content": texts, "is_error": json_values,
                  "cache_control": json_values})
    return st.lists(block | json_values, max_size=4)


def messages(roles: list[str]) -> st.SearchStrategy[Any]:
    message = st.fixed_dictionaries(
        {"role": st.sampled_from(roles) | json_values},
        optional={"content": texts | blocks(), "tool_calls": st.lists(st.fixed_dictionaries(
            {"id": texts, "type": texts, "function": st.fixed_dictionaries(
                {}, optional={"name": texts, "arguments": texts | json_values}) | json_values}), max_size=3)
                  | json_values, "tool_call_id": texts, "reasoning_content": texts, "name": texts})
    return st.lists(message | json_values, max_size=5) | json_values


def tools() -> st.SearchStrategy[Any]:
    schema = st.just({"type": "object", "properties": {"x": {"type": "string"}}}) | json_values
    tool = st.fixed_dictionaries({}, optional={
        "name": texts, "type": st.sampled_from(["function", "custom", "local_shell"]) | json_values,
        "input_schema": schema, "parameters": schema, "description": texts,
        "function": st.fixed_dictionaries({}, optional={"name": texts, "parameters": schema})})
    return st.lists(tool | json_values, max_size=3) | json_values


common = {"stream": st.booleans() | json_values, "temperature": json_values, "metadata": json_values,
          "tools": tools(), "tool_choice": st.sampled_from(["auto", "none", "required"]) | json_values |
          st.fixed_dictionaries({"type": st.sampled_from(["auto", "any", "tool", "none", "function"])},
                                optional={"name": texts, "function": json_values})}
BODIES: dict[str, st.SearchStrategy[Any]] = {
    "/v1/messages": st.fixed_dictionaries(
        {"model": models, "messages": messages(["user", "assistant", "system"])},
        optional={"max_tokens": st.integers(-1, 50) | json_values, "system": texts | blocks(),
                  "thinking": st.fixed_dictionaries({"type": st.sampled_from(["enabled", "adaptive", "disabled"])})
                  | json_values, "stop_sequences": json_values, **common}),
    "/v1/chat/completions": st.fixed_dictionaries(
        {"model": models, "messages": messages(["user", "assistant", "system", "developer", "tool"])},
        optional={"max_tokens": st.integers(-1, 50) | json_values, "stream_options": json_values,
                  "chat_template_kwargs": json_values, "nvext": json_values, "stop": json_values, **common}),
    "/v1/responses": st.fixed_dictionaries(
        {"model": models, "input": texts | st.lists(st.fixed_dictionaries(
            {"type": st.sampled_from(["message", "reasoning", "function_call", "function_call_output",
                                      "custom_tool_call", "item_reference"]) | json_values},
            optional={"role": st.sampled_from(["user", "assistant", "developer", "system"]) | json_values,
                      "content": texts | blocks(), "name": texts, "call_id": texts, "arguments": texts,
                      "output": texts | blocks(), "encrypted_content": texts, "summary": blocks()})
            | json_values, max_size=5)},
        optional={"instructions": texts, "max_output_tokens": st.integers(-1, 50) | json_values,
                  "reasoning": json_values, "include": json_values, "previous_response_id": texts,
                  "store": json_values, "text": json_values, **common}),
}
BODIES["/v1/messages/count_tokens"] = BODIES["/v1/messages"]
BODIES["/v1/tokenize"] = st.fixed_dictionaries({}, optional={
    "model": models, "prompt": texts, "messages": messages(["user", "assistant", "system", "tool"]),
    "input": json_values, "system": texts | blocks(), "tools": tools(), "add_generation_prompt": json_values,
    "chat_template_kwargs": json_values, "return_token_strs": json_values, "return_text": json_values})
BODIES["/v1/detokenize"] = st.fixed_dictionaries({}, optional={
    "tokens": st.lists(st.integers(-5, 10000), max_size=10) | json_values, "model": models})


@pytest.mark.parametrize("path", sorted(BODIES))
def test_random_json_never_5xx(reference_server: str, path: str) -> None:
    client = httpx.Client(base_url=reference_server, timeout=30)

    @settings(max_examples=100, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(body=BODIES[path] | json_values)
    def post(body: Any) -> None:
        response = client.post(path, content=json.dumps(body).encode(), headers={"content-type": "application/json"})
        assert response.status_code < 500, (body, response.status_code, response.text[:500])
        if response.status_code >= 400:
            check_shape(response, "anthropic" if path.startswith("/v1/messages") else "openai",
                        response.status_code)

    try:
        post()
    finally:
        client.close()
