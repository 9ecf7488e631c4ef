"""Usage in message_start is real (Anthropic accounting): input_tokens + cache_read + cache_creation
is the prompt total, equal to count_tokens and to the final usage, never 0 or an estimate.

count_tokens is itself documented as an estimate, so AN-USAGE-001 never takes it as the truth:
on a mismatch it says both numbers and which of them the final usage (and, where offered, the
endpoint's own chat-form /tokenize) agrees with."""

from __future__ import annotations

import uuid

import pytest

from harnesscheck.conformance.grammar import anthropic as grammar
from harnesscheck.conformance import apis
from harnesscheck.conformance.session import Session
from harnesscheck.conformance.verdict import fail, ok_response, skip


def _total(usage: dict) -> int:
    return sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens",
                                                "cache_read_input_tokens"))


def _start_and_final(hc: Session, body: dict) -> tuple[dict, dict, object]:
    transcript = hc.post("anthropic", apis.anthropic.PATH, body, stream=True, label="usage stream")
    ok_response(transcript, "stream")
    start = next((f.json for f in transcript.events if isinstance(f.json, dict) and f.json.get("type") ==
                  "message_start"), None)
    if start is None:
        fail("no message_start in the stream", transcript=transcript)
    final = grammar.final_message(transcript) or {}
    return start["message"].get("usage") or {}, final.get("usage") or {}, transcript


def _fresh_body(hc: Session) -> dict:
    # A prompt no cache has seen: a random line up front.
    body = hc.body("anthropic", "calculator")
    body["system"] = f"session {uuid.uuid4().hex}\n" + body.get("system", "")
    return body


@pytest.mark.check("AN-USAGE-001")
def test_message_start_total_equals_count_tokens(hc: Session) -> None:
    body = _fresh_body(hc)
    counted = hc.post("anthropic", f"{apis.anthropic.PATH}/count_tokens",
                      {k: v for k, v in body.items() if k not in ("stream", "max_tokens")}, label="count_tokens")
    if counted.status == 404:
        skip("the endpoint has no /v1/messages/count_tokens")
    ok_response(counted, "count_tokens")
    expected = (counted.json_body() or {}).get("input_tokens")
    start, final, transcript = _start_and_final(hc, body)
    if _total(start) != expected:
        witnesses = [f"the final usage total is {_total(final)}"]
        tokenized = _tokenize_count(hc, body)
        if tokenized is not None:
            witnesses.append(f"the endpoint's chat-form /tokenize counts {tokenized}")
        agrees = [name for name, value in (("message_start", _total(start)), ("count_tokens", expected))
                  if value in (_total(final), tokenized)]
        fail(f"message_start prompt total {_total(start)} (input {start.get('input_tokens')} + cache read "
             f"{start.get('cache_read_input_tokens')} + cache creation {start.get('cache_creation_input_tokens')}) "
             f"differs from count_tokens {expected}; {', '.join(witnesses)}: "
             f"{' and '.join(agrees) + ' agrees' if agrees else 'neither agrees'} with it", transcript=transcript)


def _tokenize_count(hc: Session, body: dict) -> int | None:
    """The endpoint's own count of this prompt from its chat-form /tokenize (vLLM, Dynamo), if offered."""
    messages = [{"role": "system", "content": body["system"]}, *body["messages"]] if body.get("system") else \
        body["messages"]
    for path in ("/v1/tokenize", "/tokenize"):
        t = hc.post("anthropic", path, {"model": hc.endpoint.model, "messages": messages, "tools": body.get("tools"),
                                        "add_generation_prompt": True}, label=f"tokenize ({path})")
        count = (t.json_body() or {}).get("count") if t.ok else None
        if isinstance(count, int):
            return count
    return None


@pytest.mark.check("AN-USAGE-002")
def test_message_start_total_equals_final(hc: Session) -> None:
    start, final, transcript = _start_and_final(hc, _fresh_body(hc))
    if _total(start) != _total(final):
        fail(f"message_start prompt total {_total(start)} differs from the final usage total {_total(final)}",
             transcript=transcript)


@pytest.mark.check("AN-USAGE-003")
def test_uncached_input_tokens_not_zero(hc: Session) -> None:
    start, _, transcript = _start_and_final(hc, _fresh_body(hc))
    if not start.get("input_tokens"):
        fail(f"message_start usage.input_tokens is {start.get('input_tokens')!r} for a prompt no cache has seen",
             transcript=transcript)
