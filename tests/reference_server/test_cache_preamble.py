"""Prefix cache, usage accounting, Claude Code's billing-header preamble, and the history-rebuild
property (turn N's prompt + turn N's output is a token prefix of turn N+1's prompt), over HTTP."""

from __future__ import annotations

import hashlib
import json
import random
import time
import zlib
from typing import Any

import httpx
import pytest

from harnesscheck.scenarios.loader import Scenario, load_all

HTTP = httpx.Client(timeout=60)  # one client: a new httpx client per request costs ~50 ms (TLS context)
NEMOTRON = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4"
DEEPSEEK = "deepseek-ai/DeepSeek-R1"
MODELS = [NEMOTRON, DEEPSEEK]
BLOCK = 16  # the server's default --block-size


def big_text(seed: str, lines: int = 480) -> str:
    """About 8K tokens of deterministic text that starts with `seed` (so no other test shares it)."""
    rng = random.Random(seed)
    words = "cache block prefix token model server stream reason tool call history render template".split()
    return seed + "\n" + "\n".join(f"{i}. " + " ".join(rng.choice(words) for _ in range(12)) for i in range(lines))


def header(n: int) -> str:
    cch = hashlib.sha256(str(n).encode()).hexdigest()[:5]  # "random" per request, deterministic per run
    return f"x-anthropic-billing-header: cc_version=1.0; cc_entrypoint=cli; cch={cch};"


def post(url: str, path: str, body: dict[str, Any], **headers: str) -> dict[str, Any]:
    response = HTTP.post(url + path, json=body, headers=headers, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def an_total(usage: dict[str, Any]) -> int:
    return usage["input_tokens"] + usage.get("cache_read_input_tokens", 0) + usage.get("cache_creation_input_tokens", 0)


def an_stream_start_usage(url: str, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], float]:
    """(message_start usage, final message_delta usage, seconds to the first content delta)."""
    start_usage = final_usage = None
    first_content = None
    t0 = time.monotonic()
    with HTTP.stream("POST", url + "/v1/messages", json={**body, "stream": True}, timeout=60) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            if event["type"] == "message_start":
                start_usage = event["message"]["usage"]
            elif event["type"] == "content_block_delta" and first_content is None:
                first_content = time.monotonic() - t0
            elif event["type"] == "message_delta":
                final_usage = event["usage"]
    assert start_usage and final_usage and first_content is not None
    return start_usage, final_usage, first_content


# --- prefix cache and usage ----------------------------------------------------------------------

@pytest.mark.parametrize("model", MODELS)
def test_same_prompt_twice_anthropic(reference_server: str, model: str) -> None:
    body = {"model": model, "max_tokens": 256, "system": big_text(f"anthropic twice {model}"),
            "messages": [{"role": "user", "content": "Summarise the list."}]}
    count = post(reference_server, "/v1/messages/count_tokens", {k: v for k, v in body.items() if k != "max_tokens"})
    total = count["input_tokens"]
    assert 7000 < total < 10000
    start1, final1, _ = an_stream_start_usage(reference_server, body)
    assert start1["cache_read_input_tokens"] == 0 and start1["input_tokens"] == total
    assert an_total(start1) == an_total(final1) == total
    second = post(reference_server, "/v1/messages", body)["usage"]
    want = (total - 1) // BLOCK * BLOCK  # all but the last partial block (one token is always computed)
    assert second["cache_read_input_tokens"] == want
    assert second["input_tokens"] == total - want
    assert an_total(second) == total
    start3, final3, _ = an_stream_start_usage(reference_server, body)
    assert start3["cache_read_input_tokens"] == final3["cache_read_input_tokens"] == want
    assert start3["input_tokens"] == final3["input_tokens"] == total - want


@pytest.mark.parametrize("model", MODELS)
def test_same_prompt_twice_openai(reference_server: str, model: str) -> None:
    system = big_text(f"openai twice {model}")
    chat = {"model": model, "max_tokens": 256,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": "Summarise the list."}]}
    first = post(reference_server, "/v1/chat/completions", chat)["usage"]
    second = post(reference_server, "/v1/chat/completions", chat)["usage"]
    total = first["prompt_tokens"]
    assert first["prompt_tokens_details"]["cached_tokens"] == 0
    assert second["prompt_tokens"] == total
    assert second["prompt_tokens_details"]["cached_tokens"] == (total - 1) // BLOCK * BLOCK
    # Responses: the same prompt (instructions = system) reuses the Chat request's blocks.
    rs = {"model": model, "instructions": system, "input": "Summarise the list.", "max_output_tokens": 256}
    third = post(reference_server, "/v1/responses", rs)["usage"]
    assert third["input_tokens"] == total
    assert third["input_tokens_details"]["cached_tokens"] == (total - 1) // BLOCK * BLOCK
    assert third["total_tokens"] == third["input_tokens"] + third["output_tokens"]


# --- the billing-header preamble ----------------------------------------------------------------

@pytest.fixture(scope="module")
def no_strip_server(server_factory) -> str:
    return server_factory("--no-strip-anthropic-preamble")


def preamble_bodies(shape: str, seed: str) -> list[dict[str, Any]]:
    """Two requests that differ only in the header's cch, in one of the shapes Claude Code uses."""
    text = big_text(seed)
    bodies = []
    for n in range(2):
        h = header(n + zlib.crc32(seed.encode()) * 10)
        if shape == "own_block":  # Claude Code: the header as system[0], the prompt in later blocks
            system: Any = [{"type": "text", "text": h},
                           {"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]
            user = "Go on."
        elif shape == "only_block":  # the header is the only system block; the big text is the user's
            system = [{"type": "text", "text": h}]
            user = text
        else:  # "same_block": the header line, then "\n" and the text, in one block
            system = h + "\n" + text
            user = "Go on."
        bodies.append({"model": NEMOTRON, "max_tokens": 128, "system": system,
                       "messages": [{"role": "user", "content": user}]})
    return bodies


@pytest.mark.parametrize("shape", ["own_block", "only_block", "same_block"])
def test_preamble_stripped_keeps_reuse(reference_server: str, shape: str) -> None:
    first, second = preamble_bodies(shape, f"strip on {shape}")
    post(reference_server, "/v1/messages", first)
    usage = post(reference_server, "/v1/messages", second)["usage"]
    total = an_total(usage)
    assert usage["cache_read_input_tokens"] == (total - 1) // BLOCK * BLOCK, usage
    count = post(reference_server, "/v1/messages/count_tokens", {k: v for k, v in second.items() if k != "max_tokens"})
    assert count["input_tokens"] == total
    # The stripped prompt carries no trace of the header.
    tok = post(reference_server, "/tokenize", {"model": NEMOTRON, "system": second["system"],
                                               "messages": second["messages"], "return_text": True})
    assert "x-anthropic-billing-header" not in tok["text"]
    assert tok["count"] == total


@pytest.mark.parametrize("shape", ["own_block", "only_block", "same_block"])
def test_preamble_kept_defeats_reuse(no_strip_server: str, shape: str) -> None:
    first, second = preamble_bodies(shape, f"strip off {shape}")
    post(no_strip_server, "/v1/messages", first)
    usage = post(no_strip_server, "/v1/messages", second)["usage"]
    assert usage["cache_read_input_tokens"] < 4 * BLOCK, usage  # only what precedes cch= can match
    assert usage["input_tokens"] > 7000


@pytest.fixture(scope="module")
def timed_servers(server_factory) -> dict[str, str]:
    timing = ("--prefill-us-per-token", "100", "--ttft-base-ms", "5", "--decode-ms", "0")
    return {"strip": server_factory(*timing, fast=False),
            "no_strip": server_factory("--no-strip-anthropic-preamble", *timing, fast=False)}


def test_preamble_modelled_ttft(timed_servers: dict[str, str]) -> None:
    """The second request of a session: ~8K uncached tokens (0.8 s modelled) when the header is kept,
    almost nothing when it is stripped."""
    ttft = {}
    for arm, url in timed_servers.items():
        first, second = preamble_bodies("own_block", "ttft")
        post(url, "/v1/messages", first)
        start, _, ttft[arm] = an_stream_start_usage(url, second)
        assert an_total(start) > 7000
    assert ttft["no_strip"] > 0.6, ttft
    assert ttft["no_strip"] > ttft["strip"] + 0.5, ttft


# --- history rebuild: turn N's prompt + output is a token prefix of turn N+1's prompt -----------

@pytest.fixture(scope="module")
def fresh_server(server_factory) -> str:
    """A server whose cache only this module's prefix tests fill (exact cache witnesses)."""
    return server_factory()


def tokenize(url: str, body: dict[str, Any]) -> dict[str, Any]:
    return post(url, "/v1/tokenize", {**body, "add_generation_prompt": True, "return_text": True})


def anthropic_turns(url: str, scenario: Scenario, model: str, system: str):
    """Yield (k, prompt request, response) per turn, building history as the SDK would."""
    tools = [{"name": t["name"], "description": t.get("description", ""), "input_schema": t["parameters"]}
             for t in scenario.tools]
    messages: list[Any] = []
    for k, turn in enumerate(scenario.turns):
        if turn.user is not None:
            messages.append({"role": "user", "content": turn.user})
        request = {"model": model, "max_tokens": 4096, "system": system, "messages": list(messages)}
        if tools:
            request["tools"] = tools
        response = post(url, "/v1/messages", request)
        yield k, request, response
        messages.append({"role": "assistant", "content": response["content"]})
        results = [{"type": "tool_result", "tool_use_id": b["id"],
                    "content": scenario.result_for(b["name"], json.dumps(b["input"], ensure_ascii=False))}
                   for b in response["content"] if b["type"] == "tool_use"]
        if results:
            messages.append({"role": "user", "content": results})
    request = {"model": model, "max_tokens": 4096, "system": system, "messages": list(messages)}
    if tools:
        request["tools"] = tools
    yield len(scenario.turns), request, post(url, "/v1/messages", request)


def chat_turns(url: str, scenario: Scenario, model: str, system: str):
    tools = [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                               "parameters": t["parameters"]}} for t in scenario.tools]
    messages: list[Any] = [{"role": "system", "content": system}]
    for k in range(len(scenario.turns) + 1):
        turn = scenario.turns[k] if k < len(scenario.turns) else None
        if turn is not None and turn.user is not None:
            messages.append({"role": "user", "content": turn.user})
        request = {"model": model, "max_tokens": 4096, "messages": list(messages)}
        if tools:
            request["tools"] = tools
        response = post(url, "/v1/chat/completions", request)
        yield k, request, response
        message = response["choices"][0]["message"]
        messages.append({key: message[key] for key in ("role", "content", "reasoning_content", "tool_calls")
                         if message.get(key) is not None})
        for call in message.get("tool_calls") or []:
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "content": scenario.result_for(call["function"]["name"], call["function"]["arguments"])})


def responses_turns(url: str, scenario: Scenario, model: str, system: str):
    """Stateless, as Codex runs: output items (reasoning with encrypted_content) go back as input."""
    tools = [{"type": "function", "name": t["name"], "description": t.get("description", ""),
              "parameters": t["parameters"]} for t in scenario.tools]
    items: list[Any] = []
    for k in range(len(scenario.turns) + 1):
        turn = scenario.turns[k] if k < len(scenario.turns) else None
        if turn is not None and turn.user is not None:
            items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": turn.user}]})
        request = {"model": model, "instructions": system, "input": list(items), "store": False,
                   "include": ["reasoning.encrypted_content"], "max_output_tokens": 4096}
        if tools:
            request["tools"] = tools
        response = post(url, "/v1/responses", request)
        yield k, request, response
        items += response["output"]
        items += [{"type": "function_call_output", "call_id": i["call_id"],
                   "output": scenario.result_for(i["name"], i["arguments"])}
                  for i in response["output"] if i["type"] == "function_call"]


def single_reasoning_segment(scenario: Scenario) -> bool:
    """Chat carries one reasoning string per turn: only turns with reasoning first survive it."""
    for turn in scenario.turns:
        kinds = [p.kind for p in turn.model]
        if "reasoning" in kinds[1:] or kinds.count("text") > 1 or \
                ("text" in kinds and "tool_call" in kinds and kinds.index("text") > kinds.index("tool_call")):
            return False
    return True


CASES = [(s, m, api) for s in sorted(load_all()) for m in MODELS for api in ("anthropic", "responses", "chat")
         if api != "chat" or single_reasoning_segment(load_all()[s])]
TURNS = {"anthropic": anthropic_turns, "chat": chat_turns, "responses": responses_turns}
FIELDS = ("model", "system", "messages", "tools", "instructions", "input")


@pytest.mark.parametrize(("scenario_id", "model", "api"), CASES)
def test_history_is_a_token_prefix(fresh_server: str, scenario_id: str, model: str, api: str) -> None:
    scenario = load_all()[scenario_id]
    system = f"{scenario.system}\n(prefix test via {api})"  # a prompt no other test in this module sends
    turns = list(TURNS[api](fresh_server, scenario, model, system))
    checked = 0
    for (k, request, response), (_, next_request, next_response) in zip(turns, turns[1:]):
        tok_body = {key: request[key] for key in FIELDS if key in request}
        next_tok_body = {key: next_request[key] for key in FIELDS if key in next_request}
        prompt, next_prompt = tokenize(fresh_server, tok_body), tokenize(fresh_server, next_tok_body)
        usage, next_usage = response["usage"], next_response["usage"]
        if api == "anthropic":
            out_tokens, total, next_cached = usage["output_tokens"], an_total(usage), \
                next_usage["cache_read_input_tokens"]
        elif api == "responses":
            out_tokens, total = usage["output_tokens"], usage["input_tokens"]
            next_cached = next_usage["input_tokens_details"]["cached_tokens"]
        else:
            out_tokens, total = usage["completion_tokens"], usage["prompt_tokens"]
            next_cached = next_usage["prompt_tokens_details"]["cached_tokens"]
        assert prompt["count"] == total  # /tokenize renders what the request was served with
        agent_turn = bool(scenario.turns[k].tool_calls)
        if not agent_turn and model == DEEPSEEK:
            continue  # this family drops plain-turn reasoning by policy
        assert next_prompt["text"].startswith(prompt["text"]), f"turn {k}: prompt text is not a prefix"
        assert next_prompt["tokens"][: prompt["count"]] == prompt["tokens"], f"turn {k}: prompt tokens not a prefix"
        # The output's tokens: the engine cached prompt + output; the next prompt reuses all full blocks of
        # it exactly when it repeats the output token for token.
        assert next_cached == (prompt["count"] + out_tokens) // BLOCK * BLOCK, f"turn {k}"
        checked += 1
    assert checked >= 1 or (model == DEEPSEEK and not any(t.tool_calls for t in scenario.turns))
