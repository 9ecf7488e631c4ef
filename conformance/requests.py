"""Request bodies for a scenario, per API, and how each API's client carries a turn forward.

`first(api, scenario, model)` builds turn 0; `follow(api, body, answer, scenario, turn)` appends
the model's answer as the client would send it back (Anthropic thinking blocks with signatures and
tool_use; Chat reasoning_content + tool_calls; Responses reasoning items with encrypted_content,
function_call and function_call_output), the tool results, and the next user text, if any.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from harnesscheck.scenarios.loader import Scenario

MAX_TOKENS = 4096  # the most any scenario asks for
MIN_BUDGET = 256
# The smallest output limit each API accepts: Anthropic and Chat take 1 (Messages `max_tokens`,
# `max_completion_tokens`); Responses' `max_output_tokens` has a minimum of 16 (openai-openapi
# CreateResponse), so the kit never asks for less there.
MIN_OUTPUT_TOKENS = {"anthropic": 1, "chat": 1, "responses": 16}


# What a user types to get a scenario's path (the scripted engine still finds the scenario: its first
# user text is kept, these words follow it). A model takes a path far more often when asked plainly.
PLAIN_ASKS = {
    "interleaved": "Do both steps in this one turn: think, then call read_file on src/math.py; think again, "
                   "then call run_tests on tests/test_math.py.",
    "long_reasoning": "Do both steps in this one turn: reason at length, then call bash to build; reason again, "
                      "then call bash to list src.",
    "parallel_tools": "Call Read twice in this one turn, once for package.json and once for tsconfig.json.",
    "long_agent_turn": "Reason step by step first, then call read_file on src/parser.py.",
}


def user_text(scenario: Scenario) -> str:
    """The first user message: the scenario's own words, then the plain ask for its path, if any."""
    user = scenario.turns[0].user or ""
    ask = PLAIN_ASKS.get(scenario.id)
    return f"{user} {ask}" if ask else user


def anthropic_tools(scenario: Scenario) -> list[dict[str, Any]]:
    return [{"name": t["name"], "description": t.get("description", ""), "input_schema": t["parameters"]}
            for t in scenario.tools]


def chat_tools(scenario: Scenario) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                              "parameters": t["parameters"]}} for t in scenario.tools]


def responses_tools(scenario: Scenario) -> list[dict[str, Any]]:
    return [{"type": "function", "name": t["name"], "description": t.get("description", ""),
             "parameters": t["parameters"]} for t in scenario.tools]


def output_budget(scenario: Scenario) -> int:
    """The output limit a scenario's answers need, plus a margin: its longest scripted turn counted at
    one token per character (no tokenizer packs text looser), at least MIN_BUDGET, at most MAX_TOKENS.
    A model that never emits its end token then stops after seconds, not after 4,096 tokens."""
    longest = 0
    for turn in scenario.turns:
        size = 0
        for part in turn.model:
            size += len(part.text) + len(part.arguments) + len(part.name) + 16
        longest = max(longest, size)
    return max(MIN_BUDGET, min(MAX_TOKENS, longest + 64))


def first(api: str, scenario: Scenario, model: str, *, stream: bool = True) -> dict[str, Any]:
    user = user_text(scenario)
    budget = output_budget(scenario)
    if api == "anthropic":
        body: dict[str, Any] = {"model": model, "max_tokens": budget, "stream": stream,
                                "messages": [{"role": "user", "content": user}]}
        if scenario.system:
            body["system"] = scenario.system
        if scenario.tools:
            body["tools"] = anthropic_tools(scenario)
        return body
    if api == "chat":
        messages = ([{"role": "system", "content": scenario.system}] if scenario.system else [])
        body = {"model": model, "stream": stream, "messages": messages + [{"role": "user", "content": user}],
                "max_tokens": budget}
        if stream:
            body["stream_options"] = {"include_usage": True}
        if scenario.tools:
            body["tools"] = chat_tools(scenario)
        return body
    body = {"model": model, "stream": stream, "max_output_tokens": budget,
            "input": [{"type": "message", "role": "user", "content": user}],
            "include": ["reasoning.encrypted_content"], "store": True}
    if scenario.system:
        body["instructions"] = scenario.system
    if scenario.tools:
        body["tools"] = responses_tools(scenario)
    return body


def tool_calls_of(api: str, answer: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(call id, name, arguments JSON) for each tool call in a folded answer."""
    if api == "anthropic":
        return [(b["id"], b["name"], json.dumps(b.get("input", {}), ensure_ascii=False))
                for b in answer.get("content", []) if b.get("type") == "tool_use"]
    if api == "chat":
        message = answer["choices"][0]["message"] if "choices" in answer else answer
        return [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or []]
    return [(i.get("call_id", ""), i["name"], i.get("arguments", "")) for i in answer.get("output", [])
            if i.get("type") == "function_call"]


def follow(api: str, body: dict[str, Any], answer: dict[str, Any], scenario: Scenario, turn: int) -> dict[str, Any]:
    """The request for `turn` (>= 1), given the request and folded answer of turn - 1."""
    body = copy.deepcopy(body)
    calls = tool_calls_of(api, answer)
    user = scenario.turns[turn].user if turn < len(scenario.turns) else None
    if api == "anthropic":
        content = [{k: v for k, v in b.items() if k != "citations" or v} for b in answer.get("content", [])]
        body["messages"].append({"role": "assistant", "content": content})
        blocks: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": cid,
                                         "content": scenario.result_for(name, args)} for cid, name, args in calls]
        if user:
            blocks.append({"type": "text", "text": user})
        if blocks:
            body["messages"].append({"role": "user", "content": blocks})
        return body
    if api == "chat":
        message = answer["choices"][0]["message"] if "choices" in answer else answer
        sent: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        for key in ("reasoning_content", "reasoning"):
            if message.get(key):
                sent[key] = message[key]
                break
        if message.get("tool_calls"):
            sent["tool_calls"] = [{"id": c["id"], "type": "function", "function": c["function"]}
                                  for c in message["tool_calls"]]
        body["messages"].append(sent)
        for cid, name, args in calls:
            body["messages"].append({"role": "tool", "tool_call_id": cid, "content": scenario.result_for(name, args)})
        if user:
            body["messages"].append({"role": "user", "content": user})
        return body
    # Responses: stateless replay of the output items (as Codex does with store: false)
    for item in answer.get("output", []):
        kept = {k: v for k, v in item.items() if k not in ("status",)}
        body["input"].append(kept)
    for cid, name, args in calls:
        body["input"].append({"type": "function_call_output", "call_id": cid, "output": scenario.result_for(name, args)})
    if user:
        body["input"].append({"type": "message", "role": "user", "content": user})
    return body
