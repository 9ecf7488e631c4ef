"""Routes and what real clients send: models (both shapes, ids with '/'), HEAD /, tokenize,
?beta=true, compressed bodies, unknown fields, Claude Code's and Codex's body shapes, nvext,
cache_control everywhere, and --no-enable-anthropic-api."""

from __future__ import annotations

import gzip
import json
from typing import Any

import anthropic
import httpx
import openai
import pytest
import zstandard

from harnesscheck.scenarios.loader import load_all

HTTP = httpx.Client(timeout=60)  # one client: a new httpx client per request costs ~50 ms (TLS context)
NEMOTRON = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"
DEEPSEEK = "deepseek-ai/DeepSeek-R1"
MODELS = [NEMOTRON, DEEPSEEK]
AV = {"anthropic-version": "2023-06-01"}
CALC = load_all()["calculator"]


def sse_events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ") and line != "data: [DONE]"]


# --- models ----------------------------------------------------------------------------------------

def test_models_openai_shape(reference_server: str) -> None:
    body = HTTP.get(reference_server + "/v1/models").json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == MODELS
    for m in body["data"]:
        assert m["object"] == "model" and isinstance(m["created"], int) and m["owned_by"]
    listed = openai.OpenAI(base_url=reference_server + "/v1", api_key="k").models.list()
    assert [m.id for m in listed] == MODELS


def test_models_anthropic_shape(reference_server: str) -> None:
    body = HTTP.get(reference_server + "/v1/models", headers=AV).json()
    assert body["has_more"] is False and body["first_id"] == MODELS[0] and body["last_id"] == MODELS[-1]
    for m in body["data"]:
        assert m["type"] == "model" and m["display_name"] and m["created_at"].endswith("Z")
    client = anthropic.Anthropic(base_url=reference_server, api_key="k")
    assert [m.id for m in client.models.list()] == MODELS


@pytest.mark.parametrize("model", MODELS)
def test_model_by_id_raw_and_encoded(reference_server: str, model: str) -> None:
    for path in (model, model.replace("/", "%2F"), model.replace("/", "%2f")):
        raw = HTTP.get(reference_server + "/v1/models/" + path)
        assert raw.status_code == 200, (path, raw.text)
        assert raw.json()["id"] == model and raw.json()["object"] == "model"
        shaped = HTTP.get(reference_server + "/v1/models/" + path, headers=AV)
        assert shaped.status_code == 200 and shaped.json()["type"] == "model" and shaped.json()["id"] == model
    # The SDKs percent-encode the id.
    assert openai.OpenAI(base_url=reference_server + "/v1", api_key="k").models.retrieve(model).id == model
    assert anthropic.Anthropic(base_url=reference_server, api_key="k").models.retrieve(model).id == model


def test_unknown_model_id_404_in_shape(reference_server: str) -> None:
    for path in ("nope", "nvidia/nope", "nvidia%2Fnope"):
        r = HTTP.get(reference_server + "/v1/models/" + path)
        assert r.status_code == 404 and set(r.json()["error"]) >= {"message", "type", "param", "code"}
        r = HTTP.get(reference_server + "/v1/models/" + path, headers=AV)
        assert r.status_code == 404
        assert r.json()["type"] == "error" and r.json()["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.NotFoundError):
        anthropic.Anthropic(base_url=reference_server, api_key="k", max_retries=0).models.retrieve("x/y")
    with pytest.raises(openai.NotFoundError):
        openai.OpenAI(base_url=reference_server + "/v1", api_key="k", max_retries=0).models.retrieve("x/y")


def test_head_root_and_unknown_route(reference_server: str) -> None:
    assert HTTP.head(reference_server + "/").status_code == 200
    assert HTTP.get(reference_server + "/").status_code == 200
    r = HTTP.get(reference_server + "/v1/nothing-here")
    assert r.status_code == 404 and "error" in r.json()
    r = HTTP.post(reference_server + "/v1/messages/nothing", json={})
    assert r.status_code == 404 and r.json()["type"] == "error"


# --- tokenize ------------------------------------------------------------------------------------

@pytest.mark.parametrize("prefix", ["", "/v1"])
def test_tokenize_prompt_and_chat_form(reference_server: str, prefix: str) -> None:
    text = "Hello, wörld! <think>x</think> 15 * 23"
    tok = HTTP.post(reference_server + prefix + "/tokenize",
                     json={"model": NEMOTRON, "prompt": text, "return_token_strs": True}).json()
    assert tok["count"] == len(tok["tokens"]) > 0 and tok["max_model_len"] > 0
    assert len(tok["token_strs"]) == tok["count"]
    ascii_strs = HTTP.post(reference_server + prefix + "/tokenize", json={"prompt": "plain ascii <think>",
                                                                         "return_token_strs": True}).json()
    assert "".join(ascii_strs["token_strs"]) == "plain ascii <think>"
    back = HTTP.post(reference_server + prefix + "/detokenize", json={"model": NEMOTRON, "tokens": tok["tokens"]})
    assert back.json() == {"prompt": text}
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    chat = HTTP.post(reference_server + prefix + "/tokenize",
                      json={"model": NEMOTRON, "messages": messages, "return_text": True}).json()
    assert chat["text"].endswith("<|im_start|>assistant\n") and "Be brief." in chat["text"]
    no_gen = HTTP.post(reference_server + prefix + "/tokenize",
                        json={"messages": messages, "add_generation_prompt": False, "return_text": True}).json()
    assert chat["text"].startswith(no_gen["text"]) and no_gen["count"] < chat["count"]
    # The count agrees with what a chat request is charged.
    usage = HTTP.post(reference_server + "/v1/chat/completions",
                       json={"model": NEMOTRON, "messages": messages}).json()["usage"]
    assert usage["prompt_tokens"] == chat["count"]
    ds = HTTP.post(reference_server + prefix + "/tokenize", json={"model": DEEPSEEK, "messages": messages,
                                                                  "return_text": True}).json()
    assert ds["text"].startswith("<|begin_of_sentence|>") and ds["text"].endswith("<|Assistant|><think>\n")


# --- what real clients send ------------------------------------------------------------------

def test_beta_query_and_compressed_bodies(reference_server: str) -> None:
    body = {"model": NEMOTRON, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    raw = json.dumps(body).encode()
    plain = HTTP.post(reference_server + "/v1/messages?beta=true", content=raw,
                       headers={**AV, "content-type": "application/json"})
    assert plain.status_code == 200 and plain.json()["type"] == "message"
    for encoding, data in (("gzip", gzip.compress(raw)), ("zstd", zstandard.ZstdCompressor().compress(raw))):
        for path in ("/v1/messages?beta=true", "/v1/chat/completions", "/v1/responses"):
            payload = data
            if path == "/v1/responses":
                rs = {"model": NEMOTRON, "input": "hi"}
                payload = gzip.compress(json.dumps(rs).encode()) if encoding == "gzip" else \
                    zstandard.ZstdCompressor().compress(json.dumps(rs).encode())
            r = HTTP.post(reference_server + path, content=payload,
                           headers={"content-type": "application/json", "content-encoding": encoding})
            assert r.status_code == 200, (encoding, path, r.text)
    # Streaming zstd, as Codex sends it (no content size in the frame header).
    compressor = zstandard.ZstdCompressor()
    chunked = compressor.compressobj()
    streamed = chunked.compress(raw) + chunked.flush()
    r = HTTP.post(reference_server + "/v1/chat/completions", content=streamed,
                   headers={"content-type": "application/json", "content-encoding": "zstd"})
    assert r.status_code == 200, r.text


CLAUDE_CODE_TOOLS = [
    {"name": "Bash", "description": "Run a command.", "input_schema": {
        "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
    {"name": "calculator", "description": "Evaluate an arithmetic expression.",
     "input_schema": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
     "cache_control": {"type": "ephemeral"}},
    {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
]


def claude_code_body(messages: list[Any]) -> dict[str, Any]:
    return {
        "model": NEMOTRON, "max_tokens": 32000, "stream": True,
        "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.197; cc_entrypoint=cli;"},
                   {"type": "text", "text": CALC.system, "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        "tools": CLAUDE_CODE_TOOLS, "messages": messages,
        "metadata": {"user_id": "user_abc_account_def_session_123"},
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "high"},
        "some_future_field": {"x": [1, 2]},
    }


def test_claude_code_body_shape(reference_server: str) -> None:
    headers = {**AV, "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,"
               "context-management-2025-06-27", "x-app": "cli", "x-api-key": "anything",
               "x-claude-code-session-id": "s1"}
    assert HTTP.head(reference_server + "/").status_code == 200
    messages: list[Any] = [
        {"role": "user", "content": [{"type": "text", "text": "<system-reminder>ctx</system-reminder>"}]},
        {"role": "user", "content": [{"type": "text", "text": CALC.trigger, "cache_control": {"type": "ephemeral"}}]},
        {"role": "system", "content": "Mid-conversation system note."},  # the last entry can be system
    ]
    r = HTTP.post(reference_server + "/v1/messages?beta=true", json=claude_code_body(messages), headers=headers)
    assert r.status_code == 200, r.text
    events = sse_events(r.text)
    tool = next(e["content_block"] for e in events if e["type"] == "content_block_start"
                and e["content_block"]["type"] == "tool_use")
    assert tool["name"] == "calculator"
    thinking = "".join(e["delta"].get("thinking", "") for e in events if e["type"] == "content_block_delta")
    signature = next(e["delta"]["signature"] for e in events if e["type"] == "content_block_delta"
                     and e["delta"]["type"] == "signature_delta")
    # Turn 2: history back with the signature, the tool result carrying cache_control, an OpenClaw-style
    # user context message after it: the whole history decides the turn, so the answer comes, not a new call.
    messages = messages + [
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": thinking, "signature": signature},
            {"type": "tool_use", "id": tool["id"], "name": "calculator", "input": {"expression": "15 * 23"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool["id"],
                                      "content": [{"type": "text", "text": "345"}],
                                      "cache_control": {"type": "ephemeral"}}]},
        {"role": "user", "content": "<internal context from the harness>"},
    ]
    r = HTTP.post(reference_server + "/v1/messages?beta=true", json=claude_code_body(messages), headers=headers)
    assert r.status_code == 200, r.text
    events = sse_events(r.text)
    text = "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
    assert text == CALC.turns[1].model[-1].text
    assert next(e for e in events if e["type"] == "message_delta")["delta"]["stop_reason"] == "end_turn"


def test_consecutive_user_messages_and_system_role(reference_server: str) -> None:
    body = {"model": DEEPSEEK, "max_tokens": 100, "system": [{"type": "text", "text": "A", "cache_control": {
        "type": "ephemeral"}}], "messages": [
        {"role": "user", "content": "one"}, {"role": "user", "content": "two"},
        {"role": "system", "content": [{"type": "text", "text": "note"}]}, {"role": "user", "content": "three"}]}
    r = HTTP.post(reference_server + "/v1/messages", json=body, headers=AV)
    assert r.status_code == 200, r.text
    tok = HTTP.post(reference_server + "/tokenize", json={**body, "return_text": True}).json()
    assert all(word in tok["text"] for word in ("one", "two", "note", "three"))
    count = HTTP.post(reference_server + "/v1/messages/count_tokens", json=body).json()["input_tokens"]
    usage = r.json()["usage"]
    assert count == usage["input_tokens"] + usage["cache_read_input_tokens"] == tok["count"]
    chat = {"model": NEMOTRON, "messages": [{"role": "user", "content": "one"}, {"role": "user", "content": "two"},
                                            {"role": "system", "content": "note"}]}
    assert HTTP.post(reference_server + "/v1/chat/completions", json=chat).status_code == 200


def test_codex_responses_body_shape(reference_server: str) -> None:
    tools = [{"type": "function", "name": t["name"], "description": t["description"], "strict": False,
              "parameters": t["parameters"]} for t in CALC.tools]
    tools += [{"type": "custom", "name": "apply_patch", "description": "patch", "format": {"type": "grammar"}},
              {"type": "local_shell"}, {"type": "web_search", "external_web_access": False}]
    body: dict[str, Any] = {
        "model": NEMOTRON, "stream": True, "tools": tools, "tool_choice": "auto", "parallel_tool_calls": False,
        "reasoning": {"effort": "medium", "summary": "auto"}, "store": False,
        "include": ["reasoning.encrypted_content"], "prompt_cache_key": "0199-session",
        "client_metadata": {"originator": "codex_exec"}, "text": {"verbosity": "low"},
        "input": [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": CALC.system}]},
                  {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<env>ctx</env>"}]},
                  {"type": "message", "role": "user", "content": [{"type": "input_text", "text": CALC.trigger}]}],
    }
    headers = {"content-type": "application/json", "content-encoding": "zstd", "originator": "codex_exec",
               "session_id": "0199", "authorization": "Bearer k"}
    r = HTTP.post(reference_server + "/v1/responses", headers=headers,
                   content=zstandard.ZstdCompressor().compress(json.dumps(body).encode()))
    assert r.status_code == 200, r.text
    events = sse_events(r.text)
    assert events[-1]["type"] == "response.completed"
    output = events[-1]["response"]["output"]
    assert [i["type"] for i in output] == ["reasoning", "function_call"]
    assert output[0]["encrypted_content"] and output[0]["summary"]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    summary = "".join(e["delta"] for e in events if e["type"] == "response.reasoning_summary_text.delta")
    assert summary == output[0]["summary"][0]["text"] == CALC.turns[0].model[0].text
    # The SDK folds the same stream (summary events included) to the non-streamed response.
    oa = openai.OpenAI(base_url=reference_server + "/v1", api_key="k", max_retries=0)
    sdk_body = {k: v for k, v in body.items() if k not in ("stream", "client_metadata")}
    with oa.responses.stream(**sdk_body, extra_body={"client_metadata": body["client_metadata"]}) as stream:
        folded = stream.get_final_response()
    plain = oa.responses.create(**sdk_body)
    strip = lambda r: [{k: v for k, v in i.model_dump().items() if k not in ("id", "parsed_arguments")}  # noqa: E731
                       for i in r.output]
    assert strip(folded) == strip(plain)
    call = output[1]
    assert call["call_id"] and json.loads(call["arguments"]) == {"expression": "15 * 23"}
    usage = events[-1]["response"]["usage"]
    assert usage["input_tokens"] > 0 and "cached_tokens" in usage["input_tokens_details"]
    # Turn 2: replayed items carry extra unknown fields; the reasoning comes back from encrypted_content only.
    replay = [{**output[0], "content": None, "x_extra": {"a": 1}}, {**call, "x_extra": True},
              {"type": "function_call_output", "call_id": call["call_id"], "output": "345", "x_extra": 1}]
    body["input"] = body["input"] + replay
    r = HTTP.post(reference_server + "/v1/responses", json=body)
    assert r.status_code == 200, r.text
    final = sse_events(r.text)[-1]["response"]
    texts = [c["text"] for i in final["output"] if i["type"] == "message" for c in i["content"]]
    assert texts == [CALC.turns[1].model[-1].text]
    # The reasoning was restored into the prompt: it is there in the chat-form witness.
    tok = HTTP.post(reference_server + "/tokenize", json={"model": NEMOTRON, "input": body["input"],
                                                           "tools": tools, "return_text": True}).json()
    assert CALC.turns[0].model[0].text in tok["text"]


def test_chat_nvext_and_unknown_fields(reference_server: str) -> None:
    body = {"model": NEMOTRON, "messages": [{"role": "developer", "content": "d"}, {"role": "user", "content": "hi"}],
            "nvext": {"agent_hints": {"priority": 5, "osl": 512, "speculative_prefill": True,
                                      "latency_sensitivity": 0.5}},
            "chat_template_kwargs": {"enable_thinking": True}, "some_unknown": [1], "seed": 3, "n": 1,
            "logprobs": False, "user": "u", "store": False, "metadata": {"k": "v"}}
    r = HTTP.post(reference_server + "/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "ok"


def test_thinking_disabled_and_tool_choice(reference_server: str) -> None:
    base = {"model": NEMOTRON, "max_tokens": 2048, "messages": [{"role": "user", "content": "hi"}]}
    r = HTTP.post(reference_server + "/v1/messages", json={**base, "thinking": {"type": "disabled"}}).json()
    assert [b["type"] for b in r["content"]] == ["text"]
    r = HTTP.post(reference_server + "/v1/messages", json={**base, "thinking": {"type": "enabled",
                                                                               "budget_tokens": 1024}}).json()
    assert [b["type"] for b in r["content"]] == ["thinking", "text"]
    forced = {**base, "tools": CLAUDE_CODE_TOOLS[:2], "tool_choice": {"type": "tool", "name": "calculator"}}
    r = HTTP.post(reference_server + "/v1/messages", json=forced).json()
    assert r["content"][-1]["type"] == "tool_use" and r["content"][-1]["name"] == "calculator"
    assert r["stop_reason"] == "tool_use"


@pytest.fixture(scope="module")
def no_anthropic_server(server_factory) -> str:
    return server_factory("--no-enable-anthropic-api")


def test_no_enable_anthropic_api(no_anthropic_server: str) -> None:
    body = {"model": NEMOTRON, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    for path in ("/v1/messages", "/v1/messages?beta=true", "/v1/messages/count_tokens"):
        r = HTTP.post(no_anthropic_server + path, json=body, headers=AV)
        assert r.status_code == 404 and r.json()["type"] == "error"
        assert r.json()["error"]["type"] == "not_found_error"
    chat = {"model": NEMOTRON, "messages": [{"role": "user", "content": "hi"}]}
    assert HTTP.post(no_anthropic_server + "/v1/chat/completions", json=chat).status_code == 200
