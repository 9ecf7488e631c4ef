"""Request shapes the real clients send must be accepted (API_FACTS: what the real clients send):
cache_control everywhere, role: system inside messages, Claude Code's betas and fields, Codex's
Responses body (and, a separate SHOULD rule, its zstd-compressed form), Dynamo's nvext.agent_hints.
Arbitrary unknown fields are not asked for: OpenAI's own API rejects unknown top-level fields.

Acceptance is decided at the status line and the first frames: every request here streams, and the
kit stops reading after FIRST_FRAMES event frames (none of them an error), so a slow model or an
endless answer cannot hide an acceptance behind the deadline."""

from __future__ import annotations

import json
from typing import Any

import pytest
import zstandard

from harnesscheck.protocol import apis
from harnesscheck.conformance.session import Session
from harnesscheck.conformance.verdict import CheckFailed, fail, ok_response
from harnesscheck.protocol.wire.transcript import Transcript

FIRST_FRAMES = 2  # Anthropic: message_start and the first block; Responses: created, in_progress


def _accepted(hc: Session, api: str, body: Any, what: str, *, path: str = "", headers: dict[str, str] | None = None,
              content: bytes | None = None, label: str = "") -> Transcript:
    """Post a streamed request and read it up to its first frames: accepted when the status is 2xx and
    no frame so far is an error (a deadline before the first frame is inconclusive, never a refusal)."""
    module = apis.get(api)
    t = hc.post(api, path or module.PATH, body, stream=True, headers=headers, content=content,
                label=label or what, first_frames=FIRST_FRAMES)
    ok_response(t, what)
    error = next((e for f in t.events if (e := module.error_of(f.json)) is not None), None)
    if error is not None:
        fail(f"{what}: HTTP {t.status}, then the stream's first frames carry an error: {error}", transcript=t)
    return t


@pytest.mark.check("AN-REQ-001")
def test_cache_control_accepted(hc: Session) -> None:
    body = hc.body("anthropic", "calculator", stream=True)
    ephemeral = {"type": "ephemeral"}
    body["system"] = [{"type": "text", "text": body["system"], "cache_control": {**ephemeral, "ttl": "1h"}}]
    body["tools"][-1]["cache_control"] = ephemeral
    body["messages"][0]["content"] = [{"type": "text", "text": body["messages"][0]["content"],
                                       "cache_control": ephemeral}]
    _accepted(hc, "anthropic", body, "request with cache_control", label="cache_control on tools, system, messages")


@pytest.mark.check("AN-REQ-002")
def test_system_role_inside_messages(hc: Session) -> None:
    body = hc.body("anthropic", "plain_text", stream=True)
    body["messages"].append({"role": "system", "content": "Mid-conversation system reminder."})
    _accepted(hc, "anthropic", body, "request with role: system in messages", label="role system inside messages")


@pytest.mark.check("AN-REQ-003")
def test_claude_code_request_shape(hc: Session) -> None:
    body = hc.body("anthropic", "calculator", stream=True)
    body["system"] = [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.197.fa0; "
                                               "cc_entrypoint=sdk-cli;"},
                      {"type": "text", "text": body["system"], "cache_control": {"type": "ephemeral"}}]
    body.update({"metadata": {"user_id": "user_harnesscheck"}, "thinking": {"type": "adaptive"},
                 "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
                 "output_config": {"effort": "high"}, "max_tokens": 32000})
    body["messages"].append({"role": "user", "content": "Second user message in a row."})
    headers = {"anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27",
               "x-app": "cli"}
    _accepted(hc, "anthropic", body, "Claude Code's request", path=f"{apis.anthropic.PATH}?beta=true",
              headers=headers, label="Claude Code request shape")


@pytest.mark.check("CH-REQ-001")
def test_chat_agent_hints(hc: Session) -> None:
    body = hc.body("chat", "plain_text", stream=True)
    body["nvext"] = {"agent_hints": {"priority": 1, "osl": 256, "speculative_prefill": True,
                                     "latency_sensitivity": 0.5}}
    _accepted(hc, "chat", body, "Chat request with nvext.agent_hints", label="nvext.agent_hints")


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
    _accepted(hc, "responses", body, "Codex's request", label="Codex request shape")
    payload = zstandard.ZstdCompressor().compress(json.dumps(body).encode())
    try:
        _accepted(hc, "responses", None, "Codex's zstd-compressed request (Codex compresses only with ChatGPT auth "
                  "on the OpenAI provider, openai/codex#18677)", content=payload,
                  headers={"content-encoding": "zstd"}, label="Codex request shape (zstd body)")
    except CheckFailed as failed:
        raise CheckFailed(failed.summary, transcript=failed.transcript, rule="RS-REQ-001:zstd") from None
