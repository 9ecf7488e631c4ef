"""Request shapes the real clients send must be accepted (API_FACTS: what the real clients send):
cache_control everywhere, role: system inside messages, Claude Code's betas and fields, Codex's
Responses body (and, a separate SHOULD rule, its zstd-compressed form), Dynamo's nvext.agent_hints.
Arbitrary unknown fields are not asked for: OpenAI's own API rejects unknown top-level fields."""

from __future__ import annotations

import json

import pytest
import zstandard

from harnesscheck.conformance import apis
from harnesscheck.conformance.session import Session
from harnesscheck.conformance.verdict import CheckFailed, ok_response


@pytest.mark.check("AN-REQ-001")
def test_cache_control_accepted(hc: Session) -> None:
    body = hc.body("anthropic", "calculator", stream=False)
    ephemeral = {"type": "ephemeral"}
    body["system"] = [{"type": "text", "text": body["system"], "cache_control": {**ephemeral, "ttl": "1h"}}]
    body["tools"][-1]["cache_control"] = ephemeral
    body["messages"][0]["content"] = [{"type": "text", "text": body["messages"][0]["content"],
                                       "cache_control": ephemeral}]
    ok_response(hc.post("anthropic", apis.anthropic.PATH, body, label="cache_control on tools, system, messages"),
                "request with cache_control")


@pytest.mark.check("AN-REQ-002")
def test_system_role_inside_messages(hc: Session) -> None:
    body = hc.body("anthropic", "plain_text", stream=False)
    body["messages"].append({"role": "system", "content": "Mid-conversation system reminder."})
    ok_response(hc.post("anthropic", apis.anthropic.PATH, body, label="role system inside messages"),
                "request with role: system in messages")


@pytest.mark.check("AN-REQ-003")
def test_claude_code_request_shape(hc: Session) -> None:
    body = hc.body("anthropic", "calculator", stream=True)
    body["system"] = [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.197; cc_entrypoint=cli;"},
                      {"type": "text", "text": body["system"], "cache_control": {"type": "ephemeral"}}]
    body.update({"metadata": {"user_id": "user_harnesscheck"}, "thinking": {"type": "adaptive"},
                 "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
                 "output_config": {"effort": "high"}, "max_tokens": 32000})
    body["messages"].append({"role": "user", "content": "Second user message in a row."})
    headers = {"anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27",
               "x-app": "cli"}
    t = hc.post("anthropic", f"{apis.anthropic.PATH}?beta=true", body, stream=True, headers=headers,
                label="Claude Code request shape")
    ok_response(t, "Claude Code's request")


@pytest.mark.check("CH-REQ-001")
def test_chat_agent_hints(hc: Session) -> None:
    body = hc.body("chat", "plain_text", stream=False)
    body["nvext"] = {"agent_hints": {"priority": 1, "osl": 256, "speculative_prefill": True,
                                     "latency_sensitivity": 0.5}}
    ok_response(hc.post("chat", apis.chat.PATH, body, label="nvext.agent_hints"),
                "Chat request with nvext.agent_hints")


@pytest.mark.check("RS-REQ-001")
def test_codex_request_shape(hc: Session) -> None:
    scenario = hc.scenario("calculator")
    body = hc.body("responses", "calculator", stream=True)
    instructions = body.pop("instructions", "")
    body["input"].insert(0, {"type": "message", "role": "developer",
                             "content": [{"type": "input_text", "text": instructions}]})
    body["input"][1]["content"] = [{"type": "input_text", "text": scenario.trigger}]
    body.update({"tool_choice": "auto", "parallel_tool_calls": False, "reasoning": {"effort": "medium"},
                 "store": False, "prompt_cache_key": "harnesscheck-session", "client_metadata": {"x": "y"}})
    body["input"][1]["x_unknown_item_field"] = True
    ok_response(hc.post("responses", apis.responses.PATH, body, stream=True, label="Codex request shape"),
                "Codex's request")
    payload = zstandard.ZstdCompressor().compress(json.dumps(body).encode())
    t = hc.post("responses", apis.responses.PATH, stream=True, content=payload,
                headers={"content-encoding": "zstd"}, label="Codex request shape (zstd body)")
    try:
        ok_response(t, "Codex's zstd-compressed request (Codex compresses only with ChatGPT auth on the OpenAI "
                       "provider, openai/codex#18677)")
    except CheckFailed as failed:
        raise CheckFailed(failed.summary, transcript=t, rule="RS-REQ-001:zstd") from None
