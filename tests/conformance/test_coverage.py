"""Coverage per rule: which paths an answer took (harness.paths_in on non-stream answers written by
hand), which rules need which paths (catalog.RULE_PATHS), and the not-exercised verdict's words."""

from __future__ import annotations

import json

from harnesscheck.conformance import catalog
from harnesscheck.conformance.harness import paths_in
from harnesscheck.conformance.wire.transcript import Transcript


def _answer(api: str, body: dict) -> Transcript:
    path = {"anthropic": "/v1/messages", "chat": "/v1/chat/completions", "responses": "/v1/responses"}[api]
    return Transcript(api=api, method="POST", url="http://127.0.0.1:1" + path, status=200,
                      body=json.dumps(body).encode())


def _call(name: str) -> dict:
    return {"type": "tool_use", "id": "t", "name": name, "input": {}}


def test_paths_of_hand_written_answers() -> None:
    think = {"type": "thinking", "thinking": "r", "signature": "s"}
    interleaved = _answer("anthropic", {"content": [think, _call("a"), think, _call("b")],
                                        "usage": {"cache_read_input_tokens": 32}})
    assert paths_in(interleaved) == {"tool-use", "parallel-calls", "thinking", "agent-turn", "interleaving",
                                     "cache-hit"}
    flat = _answer("anthropic", {"content": [think, think, _call("a"), _call("b")]})
    assert paths_in(flat) == {"tool-use", "parallel-calls", "thinking", "agent-turn"}
    one_call = _answer("chat", {"choices": [{"message": {"content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "a", "arguments": "{}"}}]}}],
        "usage": {"prompt_tokens_details": {"cached_tokens": 0}}})
    assert paths_in(one_call) == {"tool-use"}
    call_then_reasoning = _answer("responses", {"output": [
        {"type": "function_call", "call_id": "c", "name": "a", "arguments": "{}"},
        {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "r"}]}]})
    assert paths_in(call_then_reasoning) == {"tool-use", "thinking"}  # reasoning after the call: no agent turn
    refused = _answer("chat", {"error": {"message": "no"}})
    refused.status = 400
    assert paths_in(refused) == set()


def test_a_rule_without_its_path_is_not_exercised() -> None:
    check = catalog.get("CH-STREAM-001")  # TOOL-FIRST, TOOL-REPEAT (a call), TOOL-INDEX (parallel calls)
    assert catalog.unexercised(check, frozenset()) == ["CH-GRAMMAR-TOOL-FIRST", "CH-GRAMMAR-TOOL-REPEAT",
                                                       "CH-GRAMMAR-TOOL-INDEX"]
    assert catalog.unexercised(check, frozenset({"tool-use"})) == ["CH-GRAMMAR-TOOL-INDEX"]
    assert catalog.unexercised(check, frozenset({"tool-use", "parallel-calls"})) == []
    reason = catalog.not_exercised_reason(check, frozenset({"tool-use"}))
    assert reason.startswith("not exercised: the model made one call")
    assert "CH-GRAMMAR-TOOL-INDEX needs parallel-calls" in reason
    assert catalog.coverage(catalog.get("CH-STREAM-005"), frozenset({"tool-use"})) == {}  # needs no path
    assert catalog.coverage(check, frozenset({"tool-use", "thinking"})) == {
        "CH-GRAMMAR-TOOL-FIRST": ["tool-use"], "CH-GRAMMAR-TOOL-REPEAT": ["tool-use"], "CH-GRAMMAR-TOOL-INDEX": []}


def test_every_path_rule_is_a_known_rule_of_a_check() -> None:
    owned = {r for c in catalog.CHECKS for r in c.own_rules}
    assert set(catalog.RULE_PATHS) <= owned, set(catalog.RULE_PATHS) - owned
    assert {p for paths in catalog.RULE_PATHS.values() for p in paths} <= set(catalog.PATHS)
    for check_id in ("CH-STREAM-001", "CH-STREAM-002", "AN-STREAM-006", "AN-STREAM-007", "RS-STREAM-003",
                     "RS-STREAM-005", "RS-STREAM-006"):  # the tool-call rules never pass without a call
        assert catalog.unexercised(catalog.get(check_id), frozenset()), check_id
