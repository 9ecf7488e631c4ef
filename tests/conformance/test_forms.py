"""The form of a violation (conformance/forms.py): a failing rule is matched with a client measurement
only when the fault measured planted the same thing (issue 39)."""

from __future__ import annotations

import pytest

from harnesscheck.conformance import catalog, forms


@pytest.mark.parametrize(("rule", "words", "status", "form"), [
    # a 400 refusal is not malformed JSON, though both fail the forced-call check
    ("AN-TOOLS-006", "a forced call of a strict tool, streamed: HTTP 400: tool_choice.type ...", 400, forms.REFUSED),
    ("AN-TOOLS-006", "the streamed arguments of calculator do not follow its schema: not JSON (Expecting ...)", 200,
     forms.ARGS_NOT_JSON),
    ("AN-TOOLS-006", "the streamed arguments of calculator do not follow its schema: 'expression' is a required "
                     "property; arguments '{}'", 200, forms.ARGS_SCHEMA),
    # an ignored forced choice is not a dropped call
    ("RS-TOOLS-006", "the forced streamed answer has no tool call (stop: 'completed'): it answered with text "
                     "('15 * 23 = 345'): the forced choice was not followed", 200, forms.CHOICE_IGNORED),
    ("CH-TOOLS-006", "the forced streamed answer has no tool call (stop: 'stop'): the call was lost from the stream",
     200, forms.CALL_DROPPED),
    # a wrong output_index is not a missing output_item.done; a missing number is not a skipped one
    ("RS-GRAMMAR-ITEM-ORDER", "response.output_text.delta for output_index 1, which was never added", 200,
     forms.UNKNOWN_ITEM),
    ("RS-GRAMMAR-ITEM-ORDER", "item 1 added while item 0 is open", 200, forms.ITEM_NOT_DONE),
    ("RS-GRAMMAR-SEQUENCE", "response.created without an integer sequence_number", 200, forms.FIELD_MISSING),
    ("RS-GRAMMAR-SEQUENCE", "sequence_number 5 after 3", 200, forms.NUMBER_GAP),
    # a missing field is not a missing event
    ("RS-GRAMMAR-FUNCTION-CALL", "function_call item added without call_id", 200, forms.FIELD_MISSING),
    ("RS-GRAMMAR-COMPLETED", "the stream ended without response.completed / .failed / .incomplete", 200,
     forms.EVENT_MISSING),
    ("RS-GRAMMAR-COMPLETED", "response.output_text.delta after the terminal response.completed (frame #9)", 200,
     forms.AFTER_END),
    ("RS-GRAMMAR-ITEM-ORDER", "something no fault plants", 200, forms.NO_MATCH),
    ("AN-GRAMMAR-TOOL-JSON", "tool input of block 1 does not join to a JSON object", 200, forms.ANSWERED),
    ("AN-ERR-001", "HTTP 500", 500, forms.SERVER_ERROR),
    # an over-long prompt refused after the 200, inside the stream, is not a prompt taken (both a 200)
    ("AN-CTX-001", "a prompt with 9 characters of filler: refused inside a 200 stream with an error event "
                   "(type 'api_error') ...", 200, forms.STREAM_ERROR),
    ("CH-CTX-003:marker", "turn 30: the error inside a 200 stream: error.code is 500, not ...", 200,
     forms.STREAM_ERROR),
    ("RS-CTX-001", "the over-long prompt was answered (HTTP 200): the endpoint took it", 200, forms.ANSWERED),
    ("RS-CTX-003", "long_session turn 4: the usage counts 9 prompt tokens", 200, forms.ANSWERED),
    ("AN-STREAM-001", "connection reset", None, forms.NO_ANSWER),
])
def test_the_form_is_read_from_what_was_seen(rule: str, words: str, status: int | None, form: str) -> None:
    assert forms.form_of(rule, words, status) == form


def test_every_fault_plants_known_forms() -> None:
    from harnesscheck.conformance.fault_matrix import coverage_problems

    assert [p for p in coverage_problems() if "form" in p] == []
    assert forms.planted_forms("invalid-tool-json") == (forms.ANSWERED, forms.ARGS_NOT_JSON)
    # the faults the issue names: none of them plants what the other violation is
    assert forms.REFUSED not in forms.planted_forms("invalid-tool-json")
    assert forms.UNKNOWN_ITEM not in forms.planted_forms("rs-missing-output-item-done")
    assert forms.CHOICE_IGNORED not in forms.planted_forms("chat-stream-call-dropped")
    assert set(catalog.PLANTED) == set(forms.PLANTED_FORMS)


def test_what_was_seen_is_said_in_a_line() -> None:
    # a refusal's own text is the check's message (printed once, with the check): the line keeps its status
    assert forms.seen("AN-TOOLS-006", forms.REFUSED, "HTTP 400:  tool_choice\n any") == \
        "AN-TOOLS-006: a request refused (HTTP 4xx) (HTTP 400)"
    assert forms.seen("AN-TOOLS-006", forms.REFUSED, "no status here") == "AN-TOOLS-006: a request refused (HTTP 4xx)"
    assert forms.seen("AN-GRAMMAR-TOOL-JSON", forms.ANSWERED, "tool input of block 1 does not join") == \
        "AN-GRAMMAR-TOOL-JSON: tool input of block 1 does not join"
