"""The official SDKs as oracles: each one's stream helper consumes every scenario's turns without
error and folds them to the same answer as the non-streaming call (ids and signatures aside)."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest

from conformance import requests as reqs
from conformance.harness import Harness
from conformance.verdict import fail

SCENARIOS = ["plain_text", "calculator", "interleaved", "parallel_tools"]


def _anthropic_client(hc: Harness) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=hc.endpoint.url, api_key=hc.endpoint.api_key or "harnesscheck",
                               timeout=hc.endpoint.timeout, max_retries=0)


def _openai_client(hc: Harness) -> openai.OpenAI:
    return openai.OpenAI(base_url=hc.endpoint.url.rstrip("/") + "/v1", api_key=hc.endpoint.api_key or "harnesscheck",
                         timeout=hc.endpoint.timeout, max_retries=0)


def _canonical(arguments: Any) -> str:
    """Arguments compared by value when they are JSON, as text when they are not."""
    if not isinstance(arguments, str):
        return json.dumps(arguments, sort_keys=True)
    try:
        return json.dumps(json.loads(arguments or "{}"), sort_keys=True)
    except ValueError:
        return arguments


def _an_shape(content: list[Any]) -> list[tuple[Any, ...]]:
    out = []
    for b in content:
        b = b if isinstance(b, dict) else b.model_dump()
        if b["type"] == "text":
            out.append(("text", b["text"]))
        elif b["type"] == "thinking":
            out.append(("thinking", b["thinking"]))
        elif b["type"] == "tool_use":
            out.append(("tool_use", b["name"], _canonical(b["input"])))
    return out


def _oracle_failure(hc: Harness, api: str, scenario: str, turn: int, what: str) -> None:
    fail(f"{scenario} turn {turn}: {what}", transcript=hc.stream(api, scenario, turn=turn))


@pytest.mark.check("AN-SDK-001")
def test_anthropic_sdk_stream_matches_create(hc: Harness) -> None:
    client = _anthropic_client(hc)
    for scenario_id in SCENARIOS:
        scenario = hc.scenario(scenario_id)
        body = reqs.first("anthropic", scenario, hc.endpoint.model, stream=False)
        for turn in range(min(2, len(scenario.turns))):
            params = {k: v for k, v in body.items() if k != "stream"}
            try:
                with client.messages.stream(**params) as stream:
                    streamed = stream.get_final_message()
                created = client.messages.create(**params)
            except Exception as exc:  # the SDK's own complaint is the finding
                _oracle_failure(hc, "anthropic", scenario_id, turn, f"the anthropic SDK failed: "
                                f"{type(exc).__name__}: {exc}")
            if _an_shape(streamed.content) != _an_shape(created.content) or streamed.stop_reason != created.stop_reason:
                _oracle_failure(hc, "anthropic", scenario_id, turn,
                                f"streamed {_an_shape(streamed.content)} / {streamed.stop_reason} differs from "
                                f"non-streamed {_an_shape(created.content)} / {created.stop_reason}")
            body = reqs.follow("anthropic", body, created.model_dump(), scenario, turn + 1)


def _chat_shape(message: Any) -> tuple[Any, ...]:
    calls = tuple((c.function.name, _canonical(c.function.arguments))
                  for c in (message.tool_calls or []))
    return (message.content or "", calls)


@pytest.mark.check("CH-SDK-001")
def test_openai_chat_stream_matches_create(hc: Harness) -> None:
    client = _openai_client(hc)
    for scenario_id in SCENARIOS:
        scenario = hc.scenario(scenario_id)
        body = reqs.first("chat", scenario, hc.endpoint.model, stream=False)
        for turn in range(min(2, len(scenario.turns))):
            params = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
            try:
                with client.chat.completions.stream(**params) as stream:
                    streamed = stream.get_final_completion()
                created = client.chat.completions.create(**params)
            except Exception as exc:
                _oracle_failure(hc, "chat", scenario_id, turn, f"the openai SDK failed: {type(exc).__name__}: {exc}")
            s, c = streamed.choices[0], created.choices[0]
            if _chat_shape(s.message) != _chat_shape(c.message) or s.finish_reason != c.finish_reason:
                _oracle_failure(hc, "chat", scenario_id, turn,
                                f"streamed {_chat_shape(s.message)} / {s.finish_reason} differs from non-streamed "
                                f"{_chat_shape(c.message)} / {c.finish_reason}")
            body = reqs.follow("chat", body, created.model_dump(), scenario, turn + 1)


def _rs_shape(output: list[Any]) -> list[tuple[Any, ...]]:
    out = []
    for item in output:
        item = item if isinstance(item, dict) else item.model_dump()
        if item["type"] == "message":
            out.append(("message", "".join(p.get("text", "") for p in item.get("content", []))))
        elif item["type"] == "function_call":
            out.append(("function_call", item["name"], _canonical(item["arguments"])))
        elif item["type"] == "reasoning":
            out.append(("reasoning", "".join(p.get("text", "") for p in item.get("content") or [])))
    return out


@pytest.mark.check("RS-SDK-001")
def test_openai_responses_stream_matches_create(hc: Harness) -> None:
    client = _openai_client(hc)
    for scenario_id in SCENARIOS:
        scenario = hc.scenario(scenario_id)
        body = reqs.first("responses", scenario, hc.endpoint.model, stream=False)
        for turn in range(min(2, len(scenario.turns))):
            params = {k: v for k, v in body.items() if k != "stream"}
            try:
                with client.responses.stream(**params) as stream:
                    streamed = stream.get_final_response()
                created = client.responses.create(**params)
            except Exception as exc:
                _oracle_failure(hc, "responses", scenario_id, turn,
                                f"the openai SDK failed: {type(exc).__name__}: {exc}")
            if _rs_shape(streamed.output) != _rs_shape(created.output):
                _oracle_failure(hc, "responses", scenario_id, turn, f"streamed {_rs_shape(streamed.output)} differs "
                                f"from non-streamed {_rs_shape(created.output)}")
            body = reqs.follow("responses", body, created.model_dump(exclude_none=True), scenario, turn + 1)
