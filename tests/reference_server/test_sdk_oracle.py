"""The official SDKs as oracles: every built-in scenario, every turn, all three APIs, both families.

Each turn is asked twice, streamed (folded by the SDK's own helper) and not streamed; the two must
give the same message (text, thinking, tool calls with parsed input, stop reason; ids ignored),
and that message must be the scenario's turn, which proves that the history the SDK handed back
(Anthropic thinking blocks with signatures and tool_use; Chat reasoning_content and tool_calls;
Responses reasoning items with encrypted_content, function_call and function_call_output, or
previous_response_id) reached the server intact.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from harnesscheck.scenarios.loader import Scenario, load_all

MODELS = {"nemotron": "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", "deepseek_r1": "deepseek-ai/DeepSeek-R1"}
SCENARIOS = sorted(load_all())


@pytest.fixture(scope="module")
def an(reference_server: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=reference_server, api_key="test", max_retries=0, timeout=30)


@pytest.fixture(scope="module")
def oa(reference_server: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=reference_server + "/v1", api_key="test", max_retries=0, timeout=30)


def expected(scenario: Scenario, k: int) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for part in scenario.turns[k].model:
        if part.kind == "tool_call":
            out.append(("tool_call", part.name, json.loads(part.arguments)))
        else:
            out.append((part.kind, part.text))
    return out


def expected_stop(scenario: Scenario, k: int) -> str:
    return "tool_use" if scenario.turns[k].tool_calls else "end_turn"


# --- Anthropic Messages ------------------------------------------------------------------------

def an_parts(message: Any) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for block in message.content:
        if block.type == "thinking":
            out.append(("reasoning", block.thinking))
        elif block.type == "text":
            out.append(("text", block.text))
        elif block.type == "tool_use":
            out.append(("tool_call", block.name, block.input))
        else:
            raise AssertionError(f"unexpected block {block.type}")
    return out


def an_total(usage: Any) -> int:
    return usage.input_tokens + (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0)


@pytest.mark.parametrize("family", sorted(MODELS))
@pytest.mark.parametrize("scenario_id", SCENARIOS)
def test_anthropic(an: anthropic.Anthropic, scenario_id: str, family: str) -> None:
    scenario = load_all()[scenario_id]
    tools = [{"name": t["name"], "description": t.get("description", ""), "input_schema": t["parameters"]}
             for t in scenario.tools]
    messages: list[Any] = []
    for k, turn in enumerate(scenario.turns):
        if turn.user is not None:
            messages.append({"role": "user", "content": turn.user})
        request: dict[str, Any] = dict(model=MODELS[family], max_tokens=4096, system=scenario.system,
                                       messages=messages, **({"tools": tools} if tools else {}))
        count = an.messages.count_tokens(**{k_: v for k_, v in request.items() if k_ != "max_tokens"}).input_tokens
        with an.messages.stream(**request) as stream:
            start_total = None
            for event in stream:
                if event.type == "message_start":
                    start_total = an_total(event.message.usage)
            streamed = stream.get_final_message()
        plain = an.messages.create(**request)
        assert an_parts(streamed) == an_parts(plain) == expected(scenario, k), f"turn {k}"
        assert streamed.stop_reason == plain.stop_reason == expected_stop(scenario, k)
        # Thinking signatures: present, and the same for the same thinking.
        sigs = [b.signature for b in streamed.content if b.type == "thinking"]
        assert all(sigs) and sigs == [b.signature for b in plain.content if b.type == "thinking"]
        # Usage: the total prompt agrees between message_start, the final usage and count_tokens.
        assert start_total == an_total(streamed.usage) == an_total(plain.usage) == count
        assert streamed.usage.output_tokens == plain.usage.output_tokens > 0
        # History goes back as the SDK hands it out, then the tool results.
        messages.append({"role": "assistant", "content": streamed.content})
        results = [{"type": "tool_result", "tool_use_id": b.id,
                    "content": scenario.result_for(b.name, json.dumps(b.input, ensure_ascii=False))}
                   for b in streamed.content if b.type == "tool_use"]
        if results:
            messages.append({"role": "user", "content": results})


# --- OpenAI Chat Completions -------------------------------------------------------------------

def chat_parts(message: Any) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    reasoning = getattr(message, "reasoning_content", None) or (message.model_extra or {}).get("reasoning_content")
    if reasoning:
        out.append(("reasoning", reasoning))
    if message.content:
        out.append(("text", message.content))
    for call in message.tool_calls or []:
        out.append(("tool_call", call.function.name, json.loads(call.function.arguments)))
    return out


def chat_expected(scenario: Scenario, k: int) -> list[tuple[Any, ...]]:
    """Chat has one reasoning string and one content string: the parts, joined by kind."""
    parts = expected(scenario, k)
    reasoning = "".join(p[1] for p in parts if p[0] == "reasoning")
    text = "".join(p[1] for p in parts if p[0] == "text")
    return ([("reasoning", reasoning)] if reasoning else []) + ([("text", text)] if text else []) + \
        [p for p in parts if p[0] == "tool_call"]


def fold_chat_by_hand(chunks: list[Any]) -> tuple[dict[str, Any], str | None]:
    reasoning, content, calls, finish = "", "", {}, None
    for chunk in chunks:
        # The SDK hands out Dynamo's `event: tool_call_dispatch` side frames as chunks without
        # choices (it ignores the event name); a fold skips them, as the SDK's own helper does.
        for choice in chunk.choices or []:
            delta = choice.delta
            reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
            content += delta.content or ""
            for tc in delta.tool_calls or []:
                call = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                call["id"] += tc.id or ""
                call["name"] += (tc.function.name if tc.function else None) or ""
                call["arguments"] += (tc.function.arguments if tc.function else None) or ""
            finish = choice.finish_reason or finish
    return {"reasoning": reasoning, "content": content, "calls": [calls[i] for i in sorted(calls)]}, finish


@pytest.mark.parametrize("family", sorted(MODELS))
@pytest.mark.parametrize("scenario_id", SCENARIOS)
def test_chat(oa: openai.OpenAI, scenario_id: str, family: str) -> None:
    scenario = load_all()[scenario_id]
    tools = [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                               "parameters": t["parameters"]}} for t in scenario.tools]
    messages: list[Any] = [{"role": "system", "content": scenario.system}]
    for k, turn in enumerate(scenario.turns):
        if turn.user is not None:
            messages.append({"role": "user", "content": turn.user})
        request: dict[str, Any] = dict(model=MODELS[family], messages=messages, max_tokens=4096,
                                       **({"tools": tools} if tools else {}))
        with oa.chat.completions.stream(**request) as stream:
            chunks = [event.chunk for event in stream if event.type == "chunk"]  # the raw chunks, for a hand fold
            streamed = stream.get_final_completion()
        by_hand, hand_finish = fold_chat_by_hand(chunks)
        plain = oa.chat.completions.create(**request)
        want = chat_expected(scenario, k)
        s_msg, p_msg = streamed.choices[0].message, plain.choices[0].message
        assert chat_parts(s_msg) == chat_parts(p_msg) == want, f"turn {k}"
        finish = "tool_calls" if scenario.turns[k].tool_calls else "stop"
        assert streamed.choices[0].finish_reason == plain.choices[0].finish_reason == hand_finish == finish
        assert by_hand["reasoning"] == (p_msg.model_extra or {}).get("reasoning_content", "")
        assert by_hand["content"] == (p_msg.content or "")
        assert [(c["id"], c["name"], json.loads(c["arguments"])) for c in by_hand["calls"]] == \
            [(c.id, c.function.name, json.loads(c.function.arguments)) for c in p_msg.tool_calls or []]
        assert plain.usage.prompt_tokens == chunks[0].usage.prompt_tokens if chunks[0].usage else True
        # History as the SDK hands it out: content, reasoning_content, tool_calls.
        assistant: dict[str, Any] = {"role": "assistant", "content": s_msg.content}
        if (s_msg.model_extra or {}).get("reasoning_content"):
            assistant["reasoning_content"] = s_msg.model_extra["reasoning_content"]
        if s_msg.tool_calls:
            assistant["tool_calls"] = [c.model_dump(exclude_none=True) for c in s_msg.tool_calls]
        messages.append(assistant)
        for call in s_msg.tool_calls or []:
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": scenario.result_for(call.function.name, call.function.arguments)})


# --- OpenAI Responses ----------------------------------------------------------------------------

def rs_parts(response: Any) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for item in response.output:
        if item.type == "reasoning":
            text = "".join(c.text for c in (item.content or [])) or "".join(s.text for s in item.summary)
            out.append(("reasoning", text))
        elif item.type == "message":
            out.append(("text", "".join(c.text for c in item.content if c.type == "output_text")))
        elif item.type == "function_call":
            out.append(("tool_call", item.name, json.loads(item.arguments)))
        else:
            raise AssertionError(f"unexpected item {item.type}")
    return out


def fold_responses_by_hand(events: list[Any]) -> list[tuple[Any, ...]]:
    items: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for event in events:
        if event.type == "response.output_item.added":
            items[event.item.id] = {"type": event.item.type, "text": "", "name": getattr(event.item, "name", None)}
            order.append(event.item.id)
        elif event.type in ("response.output_text.delta", "response.reasoning_text.delta",
                            "response.function_call_arguments.delta"):
            items[event.item_id]["text"] += event.delta
    out: list[tuple[Any, ...]] = []
    for item_id in order:
        item = items[item_id]
        if item["type"] == "function_call":
            out.append(("tool_call", item["name"], json.loads(item["text"])))
        else:
            out.append(("reasoning" if item["type"] == "reasoning" else "text", item["text"]))
    return out


@pytest.mark.parametrize("mode", ["stateless", "previous_response_id"])
@pytest.mark.parametrize("family", sorted(MODELS))
@pytest.mark.parametrize("scenario_id", SCENARIOS)
def test_responses(oa: openai.OpenAI, scenario_id: str, family: str, mode: str) -> None:
    scenario = load_all()[scenario_id]
    tools = [{"type": "function", "name": t["name"], "description": t.get("description", ""),
              "parameters": t["parameters"], "strict": False} for t in scenario.tools]
    stateless = mode == "stateless"
    history: list[Any] = []  # stateless: the whole input; else only the new items
    previous: str | None = None
    for k, turn in enumerate(scenario.turns):
        if turn.user is not None:
            history.append({"type": "message", "role": "user", "content": turn.user})
        request: dict[str, Any] = dict(model=MODELS[family], instructions=scenario.system, input=history,
                                       max_output_tokens=4096, **({"tools": tools} if tools else {}))
        if stateless:
            request.update(store=False, include=["reasoning.encrypted_content"])
        elif previous:
            request["previous_response_id"] = previous
        with oa.responses.stream(**request) as stream:
            events = list(stream)
            streamed = stream.get_final_response()
        plain = oa.responses.create(**request)
        assert rs_parts(streamed) == rs_parts(plain) == fold_responses_by_hand(events) == expected(scenario, k), \
            f"turn {k}"
        assert streamed.status == plain.status == "completed"
        assert [e.sequence_number for e in events] == list(range(len(events)))
        assert streamed.usage.input_tokens == plain.usage.input_tokens
        assert streamed.usage.output_tokens == plain.usage.output_tokens
        if stateless:
            reasoning = [i for i in streamed.output if i.type == "reasoning"]
            assert all(i.encrypted_content for i in reasoning)
            history = history + [item.model_dump(exclude_none=True) for item in streamed.output]
        else:
            history = []
            previous = streamed.id
        for item in streamed.output:
            if item.type == "function_call":
                history.append({"type": "function_call_output", "call_id": item.call_id,
                                "output": scenario.result_for(item.name, item.arguments)})
