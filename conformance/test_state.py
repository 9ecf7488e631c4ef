"""Responses state and fields: previous_response_id continues the conversation, encrypted
reasoning comes back when asked, and the fields that make a request a Responses request survive."""

from __future__ import annotations

import pytest

from harnesscheck.protocol import apis
from harnesscheck.conformance import catalog
from harnesscheck.conformance.session import Session
from harnesscheck.conformance.verdict import fail, inconclusive, ok_response
from harnesscheck.protocol.wire.transcript import Transcript


@pytest.mark.check("RS-STATE-001")
def test_previous_response_id_continues(hc: Session) -> None:
    scenario = hc.scenario("calculator")
    body = hc.body("responses", "calculator", stream=False)
    def turn1() -> Transcript:
        first = hc.post("responses", apis.responses.PATH, {**body, "store": True}, label="turn 1 (store: true)")
        ok_response(first, "turn 1")
        return first

    first, taken = hc.until_taken((catalog.TOOL_USE,), turn1)
    answer = first.json_body() or {}
    calls = apis.responses.tool_calls(answer)
    if not taken or not calls:
        inconclusive(f"not exercised: the model made no tool call in turn 1 in {hc.endpoint.tries} tries")
    call_id, name, args = calls[0].id, calls[0].name, calls[0].arguments
    # Instructions are not carried over by previous_response_id, so send them again, as clients do.
    second_body = {"model": hc.endpoint.model, "previous_response_id": answer.get("id"), "tools": body.get("tools"),
                   "instructions": body.get("instructions"),
                   "input": [{"type": "function_call_output", "call_id": call_id,
                              "output": scenario.result_for(name, args)}]}
    limit = apis.responses.MAX_TOKENS_FIELD
    if body.get(limit) is not None:  # the kit bounds its own answers: turn 2 as turn 1 (a model may never end)
        second_body[limit] = body[limit]
    second = hc.post("responses", apis.responses.PATH, second_body, label="turn 2 (previous_response_id)")
    ok_response(second, "turn 2 with previous_response_id")
    u1 = answer.get("usage") or {}
    u2 = (second.json_body() or {}).get("usage") or {}
    floor = int(u1.get("input_tokens") or 0) + 1
    if int(u2.get("input_tokens") or 0) < floor:
        fail(f"turn 2's prompt has {u2.get('input_tokens')} tokens, fewer than turn 1's prompt "
             f"({u1.get('input_tokens')}) plus anything: the stored conversation was not prepended", transcript=second)


@pytest.mark.check("RS-STATE-002")
def test_encrypted_reasoning_when_included(hc: Session) -> None:
    body = hc.body("responses", "calculator", stream=False)
    def ask() -> Transcript:
        t = hc.post("responses", apis.responses.PATH, {**body, "store": False}, label="include reasoning.encrypted_content")
        ok_response(t, "request with include")
        return t

    t, _ = hc.until_taken((catalog.THINKING,), ask)
    reasoning = [i for i in (t.json_body() or {}).get("output", []) if i.get("type") == "reasoning"]
    if not reasoning:
        inconclusive(f"not exercised: the model returned no reasoning item in {hc.endpoint.tries} tries")
    if not all(isinstance(i.get("encrypted_content"), str) and i["encrypted_content"] for i in reasoning):
        fail("a reasoning item has no encrypted_content though include asked for it", transcript=t)


@pytest.mark.check("RS-REQ-002")
def test_responses_fields_echoed(hc: Session) -> None:
    body = hc.body("responses", "plain_text", stream=False)
    body.update({"store": False, "parallel_tool_calls": False, "text": {"verbosity": "low"},
                 "metadata": {"harnesscheck": "1"}})
    t = hc.post("responses", apis.responses.PATH, body, label="fields to echo")
    ok_response(t, "request")
    got = t.json_body() or {}
    wrong = {k: got.get(k) for k, v in (("store", False), ("parallel_tool_calls", False)) if got.get(k) is not v}
    if (got.get("text") or {}).get("verbosity") != "low":
        wrong["text.verbosity"] = (got.get("text") or {}).get("verbosity")
    if wrong:
        fail(f"fields not echoed as sent: {wrong}", transcript=t)
