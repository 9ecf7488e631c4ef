"""Coverage per rule: which paths an answer took (harness.paths_in on non-stream answers written by
hand), which rules need which paths (catalog.RULE_PATHS), and the not-exercised verdict's words."""

from __future__ import annotations

import json

from harnesscheck.protocol import apis
from harnesscheck.conformance import catalog
from harnesscheck.conformance.session import paths_in
from harnesscheck.protocol.wire.transcript import Transcript


def _answer(api: str, body: dict) -> Transcript:
    return Transcript(api=api, method="POST", url="http://127.0.0.1:1" + apis.get(api).PATH, status=200,
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


# -- the rule -> check table --------------------------------------------------------------------

def test_every_rule_fails_exactly_one_existing_check() -> None:
    from harnesscheck.conformance.grammar import ALL_RULES

    assert set(catalog.RULE_CHECK) == set(catalog.RULES)
    assert set(catalog.RULE_CHECK.values()) <= set(catalog.BY_ID)
    grammar = {r for r, check_id in catalog.RULE_CHECK.items() if r not in catalog.BY_ID
               and r.split(":")[0] not in catalog.BY_ID}
    # every rule a validator can report fails a stream check, unless the references allow it (informational)
    # or another check judges what it speaks of on its own (UNJUDGED)
    assert grammar == set(ALL_RULES) - catalog.INFORMATIONAL - catalog.UNJUDGED
    assert catalog.UNJUDGED <= set(ALL_RULES) and not catalog.UNJUDGED & set(catalog.RULES)
    for rule_id, check_id in catalog.RULE_CHECK.items():
        check = catalog.get(check_id)
        assert rule_id.split("-")[0] == check_id.split("-")[0], (rule_id, check_id)  # AN- rules fail AN- checks
        if rule_id in grammar:
            assert rule_id in check.rules and check.contract == "STREAM", (rule_id, check_id)
        else:  # a contract rule is named after its check: ID, or ID:part
            assert rule_id.split(":")[0] == check_id, (rule_id, check_id)
    for check in catalog.CHECKS:
        assert set(check.own_rules) <= set(catalog.RULE_CHECK), check.id
        assert all(catalog.RULE_CHECK[r] == check.id for r in check.own_rules), check.id


def test_a_grammar_finding_fails_only_the_check_the_table_names() -> None:
    """What test_streams does with a stream's findings (verdict.no_findings over check.rules), for one
    finding of each grammar rule, over every stream check: exactly one check fails, the table's."""
    from harnesscheck.conformance.grammar.findings import Finding
    from harnesscheck.conformance.verdict import CheckFailed, no_findings

    transcript = Transcript(api="chat", method="POST", url="http://127.0.0.1:1/v1/chat/completions")
    stream_checks = [c for c in catalog.CHECKS if c.rules]
    assert len(stream_checks) == 20
    for rule_id in (r for r, check_id in catalog.RULE_CHECK.items() if r in catalog.get(check_id).rules):
        failed = []
        for check in stream_checks:
            try:
                no_findings([Finding(rule_id, 0, "planted")], transcript, check.rules, check.id)
            except CheckFailed as exc:
                failed.append((check.id, exc.rules))
        assert failed == [(catalog.RULE_CHECK[rule_id], [rule_id])], (rule_id, failed)


def test_every_planted_rule_fails_a_check_that_catches_its_fault() -> None:
    from harnesscheck.conformance.fault_matrix import coverage_problems

    assert coverage_problems() == []
    for fault, rules in catalog.PLANTED.items():
        caught = {c.id for c in catalog.checks_for_fault(fault)}
        assert {catalog.RULE_CHECK[r] for r in rules} <= caught, fault
    # one by hand: an-usage-missing plants the grammar rule and the check's own contract rule
    assert [catalog.RULE_CHECK[r] for r in catalog.PLANTED["an-usage-missing"]] == ["AN-STREAM-009", "AN-STREAM-009"]
