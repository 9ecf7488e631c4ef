"""The API modules (protocol/apis): each fold's tool-call completion rule on recorded streams, the
record of events it could not place, purity, and request bodies the official SDKs' request types take.

Expected values are read off the fixtures by hand (event positions count the data events from 0)."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming, MessageCreateParamsStreaming
from openai.types.chat import completion_create_params as chat_params
from openai.types.responses import response_create_params as responses_params
from pydantic import TypeAdapter

from harnesscheck.protocol import apis
from harnesscheck.conformance import options
from harnesscheck.protocol.wire.sse import decode_all
from harnesscheck.scenarios.loader import load_all

FIXTURES = Path(__file__).parent / "fixtures"
SCENARIOS = sorted(load_all())


def events(name: str) -> list[Any]:
    """The fixture's data events as the fold takes them (Chat's [DONE] as that string)."""
    return ["[DONE]" if f.done else f.json for f in decode_all((FIXTURES / name).read_bytes()) if f.kind == "event"]


def fold(api: str, name: str) -> list[dict[str, Any] | None]:
    """The snapshot after each event, each input snapshot checked unchanged by the step (purity)."""
    module, snap, out = apis.get(api), None, []
    for event in events(name):
        before, event_before = copy.deepcopy(snap), copy.deepcopy(event)
        new = module.accumulate(event, snap)
        assert snap == before, f"accumulate mutated its snapshot on {event!r}"
        assert event == event_before, "accumulate mutated its event"
        snap = new
        out.append(snap)
    return out


def completions(api: str, snaps: list[dict[str, Any] | None]) -> dict[int, tuple[int, str]]:
    """call key -> (the event after which the call first reads complete, the source it names)."""
    seen: dict[int, tuple[int, str]] = {}
    for n, snap in enumerate(snaps):
        for call in apis.get(api).tool_calls(snap):
            if call.complete and call.key not in seen:
                seen[call.key] = (n, call.source)
    return seen


# -- the tool-call completion rule, per API ----------------------------------------------------

def test_chat_call_complete_when_next_index_starts_then_at_finish_reason() -> None:
    snaps = fold("chat", "chat_parallel_tools_usage.sse")
    # events 3-5 stream call 0, 6 starts call 1, 9 carries finish_reason "tool_calls", 11 is [DONE]
    assert completions("chat", snaps) == {0: (6, "next_index"), 1: (9, "finish_reason")}
    assert [c.complete for c in apis.chat.tool_calls(snaps[5])] == [False]
    calls = apis.chat.tool_calls(snaps[-1])
    assert [(c.index, c.id, c.name, json.loads(c.arguments)) for c in calls] == [
        (0, "call_abc123", "get_weather", {"city": "Paris"}), (1, "call_def456", "get_weather", {"city": "Tokyo"})]
    assert snaps[-1]["_end"] is True and "_end" not in snaps[-2]
    assert apis.chat.usage_tokens(snaps[-1]) == (182, 41, 128)


def test_anthropic_call_complete_at_its_block_stop() -> None:
    snaps = fold("anthropic", "anthropic_parallel_tools.sse")
    # block 1 (read_file) stops at event 6, block 2 (list_dir, no input deltas) at event 9
    assert completions("anthropic", snaps) == {1: (6, "stop"), 2: (9, "stop")}
    assert [c.complete for c in apis.anthropic.tool_calls(snaps[5])] == [False]
    calls = apis.anthropic.tool_calls(snaps[-1])
    assert [(c.key, c.index, c.id, c.name, json.loads(c.arguments)) for c in calls] == [
        (1, 0, "toolu_01X", "read_file", {"path": "a.txt"}), (2, 1, "toolu_01Y", "list_dir", {})]
    assert snaps[-1]["_end"] is True and snaps[-1]["stop_reason"] == "tool_use"
    assert "_unplaced" not in snaps[-1]  # the ping is an event of the API, placed by ignoring it


def test_responses_call_complete_at_arguments_done() -> None:
    snaps = fold("responses", "responses_reasoning_function_call.sse")
    # the function call is output item 2: arguments.done at event 20, before its output_item.done (21)
    assert completions("responses", snaps) == {2: (20, "arguments.done")}
    assert [c.complete for c in apis.responses.tool_calls(snaps[19])] == [False]
    (call,) = apis.responses.tool_calls(snaps[-1])
    assert (call.key, call.index, call.id, call.name, json.loads(call.arguments)) == (
        2, 0, "call_9Xz", "read_file", {"path": "main.py"})
    assert snaps[-1]["_end"] is True and "_unplaced" not in snaps[-1]


def test_responses_call_complete_at_item_done_without_arguments_done() -> None:
    raw = [e for e in events("responses_reasoning_function_call.sse")
           if not (isinstance(e, dict) and e.get("type") == "response.function_call_arguments.done")]
    snap = None
    for e in raw:
        snap = apis.responses.accumulate(e, snap)
    assert snap["_complete"] == {2: "item.done"}


def test_non_streamed_answers_hold_complete_calls() -> None:
    message = {"content": [{"type": "text", "text": "x"},
                           {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"p": "é"}}]}
    assert [(c.key, c.index, c.arguments, c.complete) for c in apis.anthropic.tool_calls(message)] == [
        (1, 0, '{"p": "é"}', True)]
    completion = {"choices": [{"message": {"tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}]}
    assert [(c.id, c.name, c.complete) for c in apis.chat.tool_calls(completion)] == [("c1", "f", True)]
    response = {"output": [{"type": "message", "content": []},
                           {"type": "function_call", "call_id": "call_1", "name": "g", "arguments": "{}"}]}
    assert [(c.key, c.index, c.id) for c in apis.responses.tool_calls(response)] == [(1, 0, "call_1")]


# -- what a fold cannot place is recorded, and the content stays as it was ---------------------

MESSAGE_START = {"type": "message_start", "message": {"id": "m", "role": "assistant", "content": [], "usage": {}}}


@pytest.mark.parametrize(("event", "recorded"), [
    ({"type": "content_block_delta", "index": 3, "delta": {"type": "text_delta", "text": "x"}}, "unknown index 3"),
    ({"type": "content_block_stop", "index": -1}, "unknown index -1"),
    ({"type": "message_wobble"}, "unknown event 'message_wobble'"),
])
def test_anthropic_records_unplaced(event: dict[str, Any], recorded: str) -> None:
    start = apis.anthropic.accumulate(MESSAGE_START, None)
    snap = apis.anthropic.accumulate(event, start)
    assert len(snap["_unplaced"]) == 1 and recorded in snap["_unplaced"][0]
    assert snap["content"] == start["content"] == []


def test_anthropic_delta_of_an_unknown_kind_is_recorded() -> None:
    snap = apis.anthropic.accumulate(MESSAGE_START, None)
    snap = apis.anthropic.accumulate({"type": "content_block_start", "index": 0,
                                      "content_block": {"type": "text", "text": ""}}, snap)
    snap = apis.anthropic.accumulate({"type": "content_block_delta", "index": 0,
                                      "delta": {"type": "wobble_delta", "text": "x"}}, snap)
    assert snap["_unplaced"] == ("delta 'wobble_delta' not placeable in block 0",)
    assert snap["content"] == [{"type": "text", "text": ""}]


def test_chat_records_unplaced() -> None:
    snap = apis.chat.accumulate({"choices": [{"index": 0, "delta": {"tool_calls": [{"id": "c"}]}}]}, None)
    assert snap["_unplaced"] == ("tool-call delta without an index",)
    assert snap["choices"][0]["tool_calls"] == {}
    snap = apis.chat.accumulate({"choices": [{"delta": {"content": "x"}}]}, snap)
    assert snap["_unplaced"][-1] == "choice without an index"


@pytest.mark.parametrize(("event", "recorded"), [
    ({"type": "response.output_text.delta", "output_index": 7, "content_index": 0, "delta": "x"},
     "response.output_text.delta for unknown output_index 7"),
    ({"type": "response.function_call_arguments.delta", "delta": "{"},
     "response.function_call_arguments.delta without an output_index"),
    ({"type": "response.wobble", "output_index": 0}, "response.wobble not folded"),
    ({"output_index": 0}, "event without a type"),
])
def test_responses_records_unplaced(event: dict[str, Any], recorded: str) -> None:
    start = apis.responses.accumulate({"type": "response.output_item.added", "output_index": 0,
                                       "item": {"type": "message", "id": "msg", "content": []}}, None)
    snap = apis.responses.accumulate(event, start)
    assert snap["_unplaced"] == (recorded,)
    assert snap["output"] == start["output"]


@pytest.mark.parametrize(("api", "name"), [
    ("anthropic", "anthropic_interleaved.sse"), ("anthropic", "anthropic_thinking.sse"),
    ("chat", "chat_tool_dispatch.sse"), ("responses", "responses_queued_reasoning_text.sse"),
])
def test_recorded_streams_fold_purely_with_nothing_unplaced(api: str, name: str) -> None:
    snaps = fold(api, name)  # fold() asserts each step left its input alone
    assert snaps[-1] is not None and "_unplaced" not in snaps[-1]


# -- request bodies the official SDKs' request types take --------------------------------------

FIRST_TYPES = {
    "anthropic": (MessageCreateParamsStreaming, MessageCreateParamsNonStreaming),
    "chat": (chat_params.CompletionCreateParamsStreaming, chat_params.CompletionCreateParamsNonStreaming),
    "responses": (responses_params.ResponseCreateParamsStreaming, responses_params.ResponseCreateParamsNonStreaming),
}


def _drain(value: Any) -> None:
    """Run pydantic's lazy validation of every Iterable field (messages, input, tools) to the end."""
    if isinstance(value, dict):
        for v in value.values():
            _drain(v)
    elif isinstance(value, list | tuple | Iterator):  # an Iterator: pydantic_core's ValidatorIterator
        for v in value:
            _drain(v)


@functools.cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def sdk_accepts(api: str, body: dict[str, Any]) -> None:
    """The body validates as the SDK's create-params TypedDict (every item of its iterables too), and
    names no top-level key the type lacks."""
    kind = FIRST_TYPES[api][0 if body.get("stream") else 1]
    adapter = _adapter(kind)  # held while draining: its lazy iterators use its definitions
    _drain(adapter.validate_python(body))
    known = kind.__required_keys__ | kind.__optional_keys__
    assert set(body) <= known, set(body) - known


def with_sdk_required(body: dict[str, Any]) -> dict[str, Any]:
    """A Responses body with the two fields filled that the openai SDK's TypedDicts mark Required but the
    kit leaves out, as the API allows: a function tool's ``strict`` where a check leaves it unmarked on
    purpose (FunctionToolParam; the kit's own scenario bodies send ``strict: false``, as Codex does) and a replayed output message's ``status`` (ResponseOutputMessageParam; Codex replays
    messages without it: its ResponseItem::Message has no status). Other APIs' bodies are returned as is."""
    if "input" not in body:
        return body
    tools = [{"strict": None, **t} if t.get("type") == "function" else t for t in body.get("tools") or []]
    items = [{**i, "status": "completed"} if i.get("type") == "message" and i.get("role") == "assistant"
             and "id" in i else i for i in body["input"]]
    return {**body, "input": items, **({"tools": tools} if "tools" in body else {})}


@pytest.mark.parametrize("api", apis.NAMES)
@pytest.mark.parametrize("scenario_id", SCENARIOS)
def test_first_turn_bodies_are_sdk_requests(api: str, scenario_id: str) -> None:
    scenario = load_all()[scenario_id]
    for stream in (True, False):
        body = apis.get(api).first(scenario, "m", stream=stream)
        sdk_accepts(api, with_sdk_required(body))
        assert body["stream"] is stream and body[apis.get(api).MAX_TOKENS_FIELD] >= apis.get(api).MIN_OUTPUT_TOKENS


def test_an_sdk_type_refuses_a_broken_body() -> None:
    """The check above can fail: a body with messages that are not a list is refused."""
    body = apis.anthropic.first(load_all()["calculator"], "m")
    with pytest.raises(ValueError):
        sdk_accepts("anthropic", {**body, "messages": "hi"})
    with pytest.raises(AssertionError):
        sdk_accepts("anthropic", {**body, "max_output_tokens": 16})


FOLLOWED = [("anthropic", "anthropic_parallel_tools.sse", 2), ("anthropic", "anthropic_interleaved.sse", None),
            ("chat", "chat_parallel_tools_usage.sse", 2), ("responses", "responses_reasoning_function_call.sse", 1)]


@pytest.mark.parametrize(("api", "name", "results"), FOLLOWED)
def test_follow_up_bodies_are_sdk_requests(api: str, name: str, results: int | None) -> None:
    module = apis.get(api)
    scenario = load_all()["parallel_tools"]
    body = module.first(scenario, "m")
    answer = module.final_answer(decode_all((FIXTURES / name).read_bytes()))
    before = copy.deepcopy(body)
    later = module.follow(body, answer, scenario, 1)
    assert body == before, "follow mutated the request it extends"
    sdk_accepts(api, with_sdk_required(later))
    calls = module.tool_calls(answer)
    if results is not None:
        assert len(calls) == results
    sent = json.dumps(later)
    for call in calls:
        assert json.dumps(scenario.result_for(call.name, call.arguments)) in sent


@pytest.mark.parametrize("api", ["anthropic", "responses"])
def test_kit_answer_goes_back_as_an_sdk_request(api: str) -> None:
    module = apis.get(api)
    scenario = load_all()["long_reasoning"]
    answer = module.kit_answer(scenario, signature="sig")
    assert [k for k, _ in module.parts(answer)] == [p.kind for p in scenario.turns[0].model]
    body = module.thinking_on(module.first(scenario, "m"))
    sdk_accepts(api, with_sdk_required(module.append_user(module.follow(body, answer, scenario, 1), "more?")))


def test_chat_has_no_interleaved_kit_answer() -> None:
    with pytest.raises(ValueError):
        apis.chat.kit_answer(load_all()["long_reasoning"])


# -- what an answer holds, and the edits the history witnesses make --------------------------------

def test_parts_in_model_order() -> None:
    an = apis.anthropic.final_answer(decode_all((FIXTURES / "anthropic_parallel_tools.sse").read_bytes()))
    assert apis.anthropic.parts(an) == [("text", "I'll run both."), ("tool_call", "read_file"), ("tool_call", "list_dir")]
    ch = apis.chat.final_answer(decode_all((FIXTURES / "chat_parallel_tools_usage.sse").read_bytes()))
    assert apis.chat.parts(ch) == [("reasoning", "The user wants weather in two cities."),
                                   ("tool_call", "get_weather"), ("tool_call", "get_weather")]
    rs = apis.responses.final_answer(decode_all((FIXTURES / "responses_reasoning_function_call.sse").read_bytes()))
    assert apis.responses.parts(rs) == [("reasoning", ""), ("text", "I'll read `main.py` first."),
                                        ("tool_call", "read_file")]


def test_usage_tokens_per_api() -> None:
    assert apis.anthropic.usage_tokens({"usage": {"input_tokens": 5, "cache_read_input_tokens": 100,
                                                  "cache_creation_input_tokens": 20, "output_tokens": 7}}) == (125, 7, 100)
    assert apis.responses.usage_tokens({"usage": {"input_tokens": 50, "output_tokens": 3,
                                                  "input_tokens_details": {"cached_tokens": 32}}}) == (50, 3, 32)
    assert apis.chat.usage_tokens({"usage": {"prompt_tokens": 9, "prompt_tokens_details": None}}) == (9, 0, 0)


@pytest.mark.parametrize("api", apis.NAMES)
def test_request_edits_leave_the_input_alone(api: str) -> None:
    module = apis.get(api)
    body = module.first(load_all()["interleaved"], "m")
    before = copy.deepcopy(body)
    prefixed = module.with_system_prefix(body, "[nonce]\n")
    module.append_user(body, "again")
    module.thinking_on(body)
    assert body == before
    assert "[nonce]" in json.dumps(prefixed) and "[nonce]" not in json.dumps(body)


def test_rewritten_edits_the_first_reasoning_only() -> None:
    answer = {"content": [{"type": "thinking", "thinking": "a", "signature": "s"},
                          {"type": "thinking", "thinking": "b", "signature": "t"}]}
    edited = apis.anthropic.rewritten(answer)
    assert [b["thinking"] for b in edited["content"]] == ["(revised) a", "b"] and answer["content"][0]["thinking"] == "a"
    assert apis.chat.rewritten({"content": "no reasoning"}) is None
    item = {"type": "reasoning", "encrypted_content": "e", "content": [{"type": "reasoning_text", "text": "r"}]}
    (out,) = apis.responses.rewritten({"output": [item]})["output"]
    assert "encrypted_content" not in out and out["content"][0]["text"] == "(revised) r"


def test_error_shapes() -> None:
    assert apis.anthropic.is_error_body({"type": "error", "error": {"type": "invalid_request_error", "message": "m"}})
    assert not apis.anthropic.is_error_body({"error": {"type": "x", "message": "m"}})
    assert apis.chat.is_error_body({"error": {"type": None, "message": "m", "code": None}})
    assert not apis.responses.is_error_body({"error": "m"})


def test_routes_and_names() -> None:
    assert [apis.get(n).PATH for n in apis.NAMES] == ["/v1/messages", "/v1/chat/completions", "/v1/responses"]
    # options reads the registry when it checks --apis (no copy made at its import: test_layers)
    assert not hasattr(options, "APIS") and "choose from anthropic, chat, responses" in str(
        options.validate_options(endpoint=None, apis="gemini", expect=(), tries=1, timeout=1.0))
    assert apis.anthropic.headers("k")["anthropic-version"] == "2023-06-01"
    assert "anthropic-version" not in apis.chat.headers(None)
    with pytest.raises(KeyError):
        apis.get("gemini")


def test_every_api_module_has_every_member_of_the_protocol() -> None:
    """A fourth API is one new module: the protocol says what it must hold, and this says when it does not."""
    import typing

    from harnesscheck.protocol.apis.base import Api

    members = set(typing.get_type_hints(Api)) | {n for n, v in vars(Api).items() if callable(v) and not n.startswith("_")}
    members -= {n for n in vars(typing.Protocol)}
    for name, module in apis.APIS.items():
        missing = sorted(m for m in members if not hasattr(module, m))
        assert not missing, f"{name}: {missing}"
    assert {"accumulate", "FORM", "stream_history", "PATH"} <= members
