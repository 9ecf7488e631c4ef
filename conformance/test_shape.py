"""The non-streamed answer has the fields its API reference marks required (docs/API_FACTS.md, "The
non-streamed answer"). A field the official SDK's type marks required too is a MUST rule (the check's
own id); one the reference requires but the SDK parses leniently (a default of None) is the SHOULD rule
``ID:<part>``. Each check asks for one non-streamed answer to a tool scenario (the API module's request),
so a tool call, where the model makes one, is judged with the rest. An answer whose stop reason says a call
was made (Anthropic stop_reason tool_use, Chat finish_reason tool_calls) but that holds no call (rendered as
text, as an Anthropic-to-Chat proxy did) fails ``ID:calls`` (MUST: a client cannot run it; issue 41)."""

from __future__ import annotations

from typing import Any

import pytest

from harnesscheck.protocol import apis
from harnesscheck.conformance.session import Session
from harnesscheck.conformance.verdict import fail, ok_response

# Anthropic Messages API reference (`Message`, requiredProperties); anthropic-sdk-python types/stop_reason.py
AN_STOP_REASONS = ("end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal",
                   "model_context_window_exceeded")
# openai-python types/chat/chat_completion.py Choice.finish_reason
CH_FINISH_REASONS = ("stop", "length", "tool_calls", "content_filter", "function_call")
# openai-python types/responses/response_status.py: a finished non-streamed answer is one of these
RS_DONE = ("completed", "incomplete", "failed")


def _is_str(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _counts(usage: Any, keys: tuple[str, ...]) -> bool:
    return isinstance(usage, dict) and all(_is_int(usage.get(k)) for k in keys)


def _const(answer: dict[str, Any], key: str, value: str) -> list[str]:
    return [] if answer.get(key) == value else [f"{key} is {answer.get(key, '(missing)')!r}, not {value!r}"]


def _strings(where: str, obj: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    return [f"{where}{k} is {obj.get(k, '(missing)')!r}, not a string" for k in keys
            if not isinstance(obj.get(k), str) or (k != "arguments" and obj.get(k) == "")]


# -- the rules, per API (pure: an answer in, what is wrong with it out) ---------------------------

def anthropic_required(message: dict[str, Any]) -> list[str]:
    """What the reference and the SDK's `Message` both require: id, type, role, content, model, usage."""
    out = _strings("", message, ("id", "model")) + _const(message, "type", "message") + \
        _const(message, "role", "assistant")
    content = message.get("content")
    typed = isinstance(content, list) and all(isinstance(b, dict) and _is_str(b.get("type")) for b in content)
    if not typed:
        out.append(f"content is {content!r}, not a list of typed blocks")
    usage = message.get("usage")
    if not _counts(usage, ("input_tokens", "output_tokens")):
        out.append(f"usage is {usage!r}, not an object with integer input_tokens and output_tokens")
    return out


def anthropic_stop(message: dict[str, Any]) -> list[str]:
    """What the reference requires and the SDK defaults to None: stop_reason (never null in a
    non-streamed answer, one of the documented values) and stop_sequence (present, null or a string)."""
    out = []
    if message.get("stop_reason") not in AN_STOP_REASONS:
        out.append(f"stop_reason is {message.get('stop_reason', '(missing)')!r}, not one of "
                   f"{', '.join(AN_STOP_REASONS)}")
    if "stop_sequence" not in message:
        out.append("stop_sequence is missing (the reference requires it: null unless a stop sequence "
                   "matched)")
    elif message["stop_sequence"] is not None and not isinstance(message["stop_sequence"], str):
        out.append(f"stop_sequence is {message['stop_sequence']!r}, not null or a string")
    return out


def chat_required(completion: dict[str, Any]) -> list[str]:
    """`ChatCompletion`: id, object, created, model, choices[] with index, message.role and finish_reason."""
    out = _strings("", completion, ("id", "model")) + _const(completion, "object", "chat.completion")
    if not _is_int(completion.get("created")):
        out.append(f"created is {completion.get('created', '(missing)')!r}, not an integer (Unix seconds)")
    choices = completion.get("choices")
    if not isinstance(choices, list) or not choices:
        return out + [f"choices is {choices!r}, not a non-empty list"]
    for n, choice in enumerate(choices):
        if not isinstance(choice, dict):
            out.append(f"choices[{n}] is not an object")
            continue
        if not _is_int(choice.get("index")):
            out.append(f"choices[{n}].index is {choice.get('index', '(missing)')!r}, not an integer")
        message = choice.get("message")
        if not isinstance(message, dict) or message.get("role") != "assistant":
            out.append(f"choices[{n}].message is {message!r}, not an assistant message")
        if choice.get("finish_reason") not in CH_FINISH_REASONS:
            reason = choice.get("finish_reason", "(missing)")
            out.append(f"choices[{n}].finish_reason is {reason!r}, not one of {', '.join(CH_FINISH_REASONS)}")
    return out


def responses_required(response: dict[str, Any]) -> list[str]:
    """`Response`: id, object, created_at, model, output[] items with their required fields (message:
    id, role, content; function_call: call_id, name, arguments; reasoning: id, summary)."""
    out = _strings("", response, ("id", "model")) + _const(response, "object", "response")
    created = response.get("created_at")
    if not isinstance(created, (int, float)) or isinstance(created, bool):
        out.append(f"created_at is {created!r}, not a number (Unix seconds)")
    output = response.get("output")
    if not isinstance(output, list):
        return out + [f"output is {output!r}, not a list"]
    for n, item in enumerate(output):
        where = f"output[{n}]."
        if not isinstance(item, dict) or not _is_str(item.get("type")):
            out.append(f"output[{n}] is {item!r}, not a typed item")
        elif item["type"] == "message":
            out += _strings(where, item, ("id",)) + [f"{where}{e}" for e in _const(item, "role", "assistant")]
            if not isinstance(item.get("content"), list):
                out.append(f"{where}content is {item.get('content', '(missing)')!r}, not a list")
        elif item["type"] == "function_call":
            out += _strings(where, item, ("call_id", "name", "arguments"))
        elif item["type"] == "reasoning":
            out += _strings(where, item, ("id",))
            if not isinstance(item.get("summary"), list):
                out.append(f"{where}summary is {item.get('summary', '(missing)')!r}, not a list")
    return out


def responses_status(response: dict[str, Any]) -> list[str]:
    """What the SDK types as optional: the answer's status (finished) and usage."""
    out = []
    if response.get("status") not in RS_DONE:
        out.append(f"status is {response.get('status', '(missing)')!r}, not one of {', '.join(RS_DONE)}")
    usage = response.get("usage")
    if not _counts(usage, ("input_tokens", "output_tokens", "total_tokens")):
        out.append(f"usage is {usage!r}, not an object with integer input_tokens, output_tokens and "
                   "total_tokens")
    return out


# -- the checks ------------------------------------------------------------------------------------

def _judge(hc: Session, api: str, check_id: str, rules: tuple[tuple[str, Any], ...]) -> None:
    """One non-streamed answer to the calculator scenario, judged rule by rule (the MUST rule first)."""
    transcript = hc.post(api, apis.get(api).PATH, hc.body(api, "calculator", stream=False),
                         label="non-streamed answer")
    ok_response(transcript, "non-streamed answer")
    answer = transcript.json_body()
    if not isinstance(answer, dict):
        fail(f"the non-streamed answer is not a JSON object: {transcript.text_body()[:200]!r}",
             transcript=transcript, rule=check_id)
    claimed = apis.get(api).missing_calls(answer)
    if claimed:  # the stop reason says a call was made, the answer holds none a client can run
        fail(f"the non-streamed answer: {claimed}: a client cannot run a call it only reads as text",
             transcript=transcript, rule=f"{check_id}:calls")
    for rule, problems_of in rules:
        problems = problems_of(answer)
        if problems:
            fail(f"the non-streamed answer: {'; '.join(problems)}", transcript=transcript, rule=rule)


@pytest.mark.check("AN-SHAPE-001")
def test_anthropic_message_shape(hc: Session) -> None:
    _judge(hc, "anthropic", "AN-SHAPE-001", (("AN-SHAPE-001", anthropic_required),
                                             ("AN-SHAPE-001:stop", anthropic_stop)))


@pytest.mark.check("CH-SHAPE-001")
def test_chat_completion_shape(hc: Session) -> None:
    _judge(hc, "chat", "CH-SHAPE-001", (("CH-SHAPE-001", chat_required),))


@pytest.mark.check("RS-SHAPE-001")
def test_response_shape(hc: Session) -> None:
    _judge(hc, "responses", "RS-SHAPE-001", (("RS-SHAPE-001", responses_required),
                                             ("RS-SHAPE-001:status", responses_status)))
