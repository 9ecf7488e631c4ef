"""The usage split (AN-USAGE-004), the OpenAI usage sums (CH/RS-USAGE-001) and the non-streamed
answer shapes (AN/CH/RS-SHAPE-001) judged on answers written by hand: the reference's own examples
and vLLM 0.32's measured deviations. The checks against a live server (clean and each fault) run
in the fault matrix (test_self_conformance.py)."""

from __future__ import annotations

import pytest

from harnesscheck.conformance import catalog
from harnesscheck.conformance.test_shape import (
    anthropic_required,
    anthropic_stop,
    chat_required,
    responses_required,
    responses_status,
)
from harnesscheck.conformance.test_usage import split_differences, usage_problems

# The Messages API reference's own example message.
AN_EXAMPLE = {"content": [{"text": "Hi! My name is Claude.", "type": "text"}],
              "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF", "model": "claude-sonnet-4-20250514", "role": "assistant",
              "stop_reason": "end_turn",
              "stop_sequence": None, "type": "message", "usage": {"input_tokens": 2095, "output_tokens": 503}}
CH_EXAMPLE = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1741569952, "model": "m",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi", "refusal": None},
                           "logprobs": None, "finish_reason": "stop"}],
              "usage": {"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29}}
RS_EXAMPLE = {"id": "resp_1", "object": "response", "created_at": 1741476542, "status": "completed",
              "model": "m",
              "output": [{"type": "reasoning", "id": "rs_1", "summary": []},
                         {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "add",
                          "arguments": "", "status": "completed"},
                         {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                          "content": [{"type": "output_text", "text": "Hi", "annotations": []}]}],
              "usage": {"input_tokens": 36, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 87,
                        "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 123}}


def test_the_split_of_vllm_is_found_field_by_field() -> None:
    start = {"input_tokens": 4027, "output_tokens": 1}  # vLLM 0.32: the whole prompt, no cache fields
    final = {"input_tokens": 59, "cache_read_input_tokens": 3968, "output_tokens": 9}
    differences = split_differences(start, final)
    assert [d.split()[0] for d in differences] == ["input_tokens", "cache_read_input_tokens"]
    assert "(absent) at message_start but 3968" in differences[1]
    same = {"input_tokens": 59, "cache_read_input_tokens": 3968, "cache_creation_input_tokens": 0,
            "output_tokens": 1}
    assert split_differences(same, final) == []  # an absent field counts 0; output_tokens grows, as it may


def test_openai_usage_sums() -> None:
    assert usage_problems(323, 10, 333, 320) == []
    leaked = usage_problems(3, 10, 333, 320)  # Anthropic's accounting in OpenAI's fields
    assert [p for p, _ in leaked] == ["cached", "total"]
    assert [p for p, _ in usage_problems(323, 10, 340, 0)] == ["total"]
    assert usage_problems(323, 10, None, 0) == []  # no total reported: nothing to add up


@pytest.mark.parametrize("judge, example", [(anthropic_required, AN_EXAMPLE), (anthropic_stop, AN_EXAMPLE),
                                            (chat_required, CH_EXAMPLE), (responses_required, RS_EXAMPLE),
                                            (responses_status, RS_EXAMPLE)])
def test_the_references_examples_pass(judge, example) -> None:
    assert judge(example) == []


def test_anthropic_message_shape() -> None:
    vllm = {k: v for k, v in AN_EXAMPLE.items() if v is not None}  # exclude_none drops stop_sequence
    assert anthropic_required(vllm) == []
    (missing,) = anthropic_stop(vllm)
    assert missing.startswith("stop_sequence is missing")
    assert anthropic_stop({**AN_EXAMPLE, "stop_reason": None, "stop_sequence": "END"})[0].startswith(
        "stop_reason is None")
    assert anthropic_required({**AN_EXAMPLE, "type": "completion", "usage": {"input_tokens": 1}}) == [
        "type is 'completion', not 'message'",
        "usage is {'input_tokens': 1}, not an object with integer input_tokens and output_tokens"]


def test_chat_completion_shape() -> None:
    broken = {**CH_EXAMPLE, "created": 1.5,
              "choices": [{"message": {"role": "user"}, "finish_reason": "eos"}]}
    del broken["object"]
    assert chat_required(broken) == [
        "object is '(missing)', not 'chat.completion'",
        "created is 1.5, not an integer (Unix seconds)",
        "choices[0].index is '(missing)', not an integer",
        "choices[0].message is {'role': 'user'}, not an assistant message",
        "choices[0].finish_reason is 'eos', not one of stop, length, tool_calls, content_filter, "
        + "function_call"]
    assert chat_required({**CH_EXAMPLE, "choices": []}) == ["choices is [], not a non-empty list"]


def test_response_shape() -> None:
    call = {k: v for k, v in RS_EXAMPLE["output"][1].items() if k != "call_id"}
    assert responses_required({**RS_EXAMPLE, "output": [call]}) == [
        "output[0].call_id is '(missing)', not a string"]
    assert responses_required({**RS_EXAMPLE, "object": "chat.completion"}) == [
        "object is 'chat.completion', not 'response'"]
    assert responses_status({**RS_EXAMPLE, "status": "in_progress", "usage": None}) == [
        "status is 'in_progress', not one of completed, incomplete, failed",
        "usage is None, not an object with integer input_tokens, output_tokens and total_tokens"]


def test_levels_follow_the_evidence() -> None:
    levels = {r: str(catalog.RULES[r].level) for r in ("AN-USAGE-004", "CH-USAGE-001", "CH-USAGE-001:cached",
                                                        "RS-USAGE-001", "RS-USAGE-001:cached", "AN-SHAPE-001",
                                                        "AN-SHAPE-001:stop", "CH-SHAPE-001", "RS-SHAPE-001",
                                                        "RS-SHAPE-001:status")}
    assert levels == {"AN-USAGE-004": "SHOULD", "CH-USAGE-001": "MUST", "CH-USAGE-001:cached": "MUST",
                      "RS-USAGE-001": "SHOULD", "RS-USAGE-001:cached": "MUST", "AN-SHAPE-001": "MUST",
                      "AN-SHAPE-001:stop": "SHOULD", "CH-SHAPE-001": "MUST", "RS-SHAPE-001": "MUST",
                      "RS-SHAPE-001:status": "SHOULD"}
    assert catalog.RULE_PATHS["AN-USAGE-004"] == (catalog.CACHE_HIT, catalog.CACHE_WRITE)
    reason = catalog.not_exercised_reason(catalog.get("AN-USAGE-004"), frozenset())
    assert "no prompt tokens came from the cache" in reason and "were written to the cache" in reason
