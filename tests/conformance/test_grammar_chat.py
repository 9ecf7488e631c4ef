"""Chat Completions stream grammar: fixtures pass; each mutation breaks exactly one rule."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from harnesscheck.conformance.grammar import chat
from harnesscheck.conformance.grammar.findings import Finding, rules_of
from harnesscheck.protocol import apis
from harnesscheck.protocol.wire.sse import SSEFrame, decode_all
from harnesscheck.protocol.wire.transcript import Transcript

from tests.conformance import answer_fold

FIXTURES = Path(__file__).parent / "fixtures"
USAGE_REQ = {"model": "m", "stream": True, "stream_options": {"include_usage": True}, "tools": [{"type": "function"}]}
REQUESTS = {"chat_parallel_tools_usage.sse": USAGE_REQ}
VALID = sorted(p.name for p in FIXTURES.glob("chat_*.sse"))

Ev = list[list[Any]]


def load(name: str) -> Ev:
    return [[f.event, f.json if not f.done else "[DONE]"] for f in decode_all((FIXTURES / name).read_bytes()) if f.kind == "event"]


def frames(events: Ev) -> list[SSEFrame]:
    return [SSEFrame.make(d, event=n, index=i) for i, (n, d) in enumerate(events)]


def tool_frames(e: Ev, index: int) -> list[int]:
    return [i for i, (n, d) in enumerate(e) if n is None and isinstance(d, dict) and d.get("choices")
            and any(tc.get("index") == index for tc in d["choices"][0]["delta"].get("tool_calls") or [])]


def finish_frame(e: Ev) -> int:
    return next(i for i, (_, d) in enumerate(e) if isinstance(d, dict) and d.get("choices") and d["choices"][0]["finish_reason"])


def dispatch_frames(e: Ev) -> list[int]:
    return [i for i, (n, _) in enumerate(e) if n == chat.DISPATCH_EVENT]


@pytest.mark.parametrize("name", VALID)
def test_valid_fixture_has_no_findings(name: str) -> None:
    fr = decode_all((FIXTURES / name).read_bytes())
    assert chat.validate(fr, REQUESTS.get(name)) == []
    t = Transcript(api="chat", method="POST", url="u", request_body=REQUESTS.get(name), frames=fr)
    assert chat.validate(t) == []  # the request comes from the transcript


def test_final_message() -> None:
    m = chat.final_message(decode_all((FIXTURES / "chat_parallel_tools_usage.sse").read_bytes()))
    assert m is not None and m["role"] == "assistant" and m["finish_reason"] == "tool_calls"
    assert m["reasoning_content"] == "The user wants weather in two cities."
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in m["tool_calls"]] == [
        ("call_abc123", "get_weather", '{"city": "Paris"}'), ("call_def456", "get_weather", '{"city": "Tokyo"}')]
    assert m["usage"]["total_tokens"] == 223
    m = chat.final_message(decode_all((FIXTURES / "chat_text.sse").read_bytes()))
    assert m["content"] == "Hello! How can I help?" and m["reasoning_content"] == "Greeting; answer briefly."
    m = chat.final_message(decode_all((FIXTURES / "chat_tool_dispatch.sse").read_bytes()))
    assert [d["tool_call"]["id"] for d in m["dispatched"]] == ["call_r1", "call_r2"]


def test_fold_is_pure_and_keeps_first_id() -> None:
    events = load("chat_parallel_tools_usage.sse")
    m_tool_repeat(events)
    snap = None
    for _, d in events:
        before = copy.deepcopy(snap)
        new = chat.accumulate(d, snap)
        assert snap == before
        snap = new
    call = snap["choices"][0]["tool_calls"][0]
    assert call["id"] == "call_abc123" and call["function"]["name"] == "get_weather"


@pytest.mark.parametrize("name", ["chat_parallel_tools_usage.sse", "chat_tool_dispatch.sse"])
def test_sdk_agrees_with_the_fold(name: str) -> None:
    pytest.importorskip("openai")
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    fr = decode_all((FIXTURES / name).read_bytes())
    state = ChatCompletionStreamState()
    for f in fr:
        if f.kind == "event" and f.event is None and isinstance(f.json, dict):
            state.handle_chunk(ChatCompletionChunk.model_validate(f.json))
    sdk = state.get_final_completion().choices[0]
    ours = chat.final_message(fr)
    assert sdk.finish_reason == ours["finish_reason"]
    assert [(t.id, t.function.name, t.function.arguments) for t in sdk.message.tool_calls or []] == [
        (c["id"], c["function"]["name"], c["function"]["arguments"]) for c in ours["tool_calls"]]


def sdk_final_completion(events: Ev, request: dict[str, Any] | None = None) -> Any:
    """The official SDK's stream helper (client.chat.completions.stream) over a recorded stream."""
    openai = pytest.importorskip("openai")
    try:  # the SDK build here may run on httpx2
        import httpx2 as httpx  # type: ignore[import-not-found]
    except ImportError:
        import httpx
    body = "".join((f"event: {n}\n" if n else "") + "data: " + (d if isinstance(d, str) else json.dumps(d)) + "\n\n"
                   for n, d in events).encode()
    transport = httpx.MockTransport(lambda req: httpx.Response(200, content=body, headers={"content-type": "text/event-stream"}))
    client = openai.OpenAI(api_key="k", base_url="http://test/v1", http_client=httpx.Client(transport=transport))
    with client.chat.completions.stream(model="m", messages=[{"role": "user", "content": "x"}], **(request or {})) as s:
        return s.get_final_completion()


def test_sdk_helper_skips_side_events() -> None:
    """Why CH-GRAMMAR-UNKNOWN-EVENT is informational: a server's own named side events (Dynamo's
    tool_call_dispatch, a keepalive) do not disturb the SDK's stream helper."""
    events = load("chat_tool_dispatch.sse")
    m_side_event(events)
    final = sdk_final_completion(events)
    want = chat.final_message(frames(events))
    assert final.choices[0].finish_reason == want["finish_reason"] == "tool_calls"
    assert [t.function.arguments for t in final.choices[0].message.tool_calls] == [
        c["function"]["arguments"] for c in want["tool_calls"]]
    findings = chat.validate(frames(events))
    assert rules_of(findings) == {"CH-GRAMMAR-UNKNOWN-EVENT"} and all(f.informational for f in findings)


# -- mutations ------------------------------------------------------------------------------

def m_json(e: Ev) -> None: e.insert(2, [None, "{broken"])
def m_side_event(e: Ev) -> None: e.insert(2, ["keepalive", {"type": "keepalive", "t": 1}])
def m_side_event_not_json(e: Ev) -> None: e.insert(2, ["keepalive", "still here"])
def m_no_event_lines_ok(e: Ev) -> None: e[:] = [[None, d] for n, d in e if n != chat.DISPATCH_EVENT]


def m_error_cuts_the_stream(e: Ev) -> None:  # a server error after the 200: the rest never comes
    e[3:] = [[None, {"error": {"message": "overloaded", "type": "server_error", "code": 503}}]]

def m_event_name(e: Ev) -> None: e[1][0] = "message"
def m_error(e: Ev) -> None: e.insert(2, [None, {"error": {"message": "boom", "type": "server_error"}}])
def m_object(e: Ev) -> None: e[1][1]["object"] = "chat.completion"
def m_id(e: Ev) -> None: e[2][1]["id"] = "chatcmpl-other"
def m_choices(e: Ev) -> None: del e[1][1]["choices"][0]["delta"]


def m_tool_index(e: Ev) -> None:
    for i in tool_frames(e, 1):
        for tc in e[i][1]["choices"][0]["delta"]["tool_calls"]:
            tc["index"] = 2


def m_tool_first(e: Ev) -> None:
    e[tool_frames(e, 0)[0]][1]["choices"][0]["delta"]["tool_calls"][0]["function"].pop("name")


def m_tool_first_no_id(e: Ev) -> None:
    tc = e[tool_frames(e, 0)[0]][1]["choices"][0]["delta"]["tool_calls"][0]
    tc.pop("id")


def m_tool_repeat(e: Ev) -> None:
    tc = e[tool_frames(e, 0)[1]][1]["choices"][0]["delta"]["tool_calls"][0]
    tc["id"] = "call_abc123"
    tc["type"] = "function"


def m_tool_repeat_name(e: Ev) -> None:
    e[tool_frames(e, 1)[2]][1]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] = "get_weather"


def m_type_repeat_is_fine(e: Ev) -> None:
    e[tool_frames(e, 0)[1]][1]["choices"][0]["delta"]["tool_calls"][0]["type"] = "function"


def m_tool_args(e: Ev) -> None:
    del e[tool_frames(e, 1)[-1]]


def m_tool_args_not_string(e: Ev) -> None:
    e[tool_frames(e, 0)[1]][1]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] = {"city": "Paris"}
    del e[tool_frames(e, 0)[2]]  # so the joined rest would not be judged as JSON either


def m_finish_reason(e: Ev) -> None: e[finish_frame(e)][1]["choices"][0]["finish_reason"] = "end_turn"


def m_finish_twice(e: Ev) -> None:
    i = finish_frame(e)
    e.insert(i + 1, copy.deepcopy(e[i]))


def m_finish_missing(e: Ev) -> None: e[finish_frame(e)][1]["choices"][0]["finish_reason"] = None


def m_after_finish(e: Ev) -> None:
    i = finish_frame(e)
    late = copy.deepcopy(e[i])
    late[1]["choices"][0].update(finish_reason=None, delta={"content": "late"})
    e.insert(i + 1, late)


def m_stop_after_tools(e: Ev) -> None: e[finish_frame(e)][1]["choices"][0]["finish_reason"] = "stop"
def m_tool_calls_without_tools(e: Ev) -> None: e[finish_frame(e)][1]["choices"][0]["finish_reason"] = "tool_calls"


def m_usage_missing(e: Ev) -> None: del e[-2]
def m_usage_choices(e: Ev) -> None: e[-2][1]["choices"] = [{"index": 0, "delta": {}}]


def m_usage_on_finish_chunk(e: Ev) -> None:  # usage merged into the finish chunk, no usage chunk of its own
    e[finish_frame(e)][1]["usage"] = e[-2][1]["usage"]
    del e[-2]


def m_continuous_usage_ok(e: Ev) -> None:  # usage on every chunk (vLLM continuous_usage_stats) and the usage chunk
    for _, d in e[:-2]:
        if isinstance(d, dict):
            d["usage"] = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}

def m_usage_shape(e: Ev) -> None: e[-2][1]["usage"].pop("total_tokens")
def m_usage_early(e: Ev) -> None: e.insert(finish_frame(e), e.pop(-2))
def m_usage_twice(e: Ev) -> None: e.insert(-1, copy.deepcopy(e[-2]))


def m_done_missing(e: Ev) -> None: del e[-1]
def m_after_done(e: Ev) -> None: e.append(copy.deepcopy(e[-2]))


def m_dispatch_shape(e: Ev) -> None: e[dispatch_frames(e)[0]][1]["tool_call"].pop("id")
def m_dispatch_twice(e: Ev) -> None: e.insert(dispatch_frames(e)[1] + 1, copy.deepcopy(e[dispatch_frames(e)[1]]))
def m_dispatch_mismatch(e: Ev) -> None: e[dispatch_frames(e)[1]][1]["tool_call"]["function"]["arguments"] = '{"path": "c.py"}'
def m_dispatch_name(e: Ev) -> None: e[dispatch_frames(e)[0]][1]["tool_call"]["function"]["name"] = "write_file"


def m_dispatch_early(e: Ev) -> None:  # dispatch of call 0 before its last argument fragment
    d = e.pop(dispatch_frames(e)[0])
    e.insert(tool_frames(e, 0)[1], d)
    d[1]["tool_call"]["function"]["arguments"] = '{"path": "a.py"}'


def m_dispatch_before_call(e: Ev) -> None:
    d = e.pop(dispatch_frames(e)[1])
    e.insert(1, d)


def m_dispatch_late(e: Ev) -> None: e.append(e.pop(dispatch_frames(e)[1]))
def m_dispatch_missing(e: Ev) -> None: del e[dispatch_frames(e)[1]]


MUTATIONS: list[tuple[str, Callable[[Ev], None], set[str]]] = [
    ("chat_text.sse", m_json, {"CH-GRAMMAR-JSON"}),
    ("chat_text.sse", m_event_name, {"CH-GRAMMAR-EVENT-NAME"}),
    ("chat_text.sse", m_error, {"CH-GRAMMAR-ERROR"}),
    ("chat_parallel_tools_usage.sse", m_error_cuts_the_stream, {"CH-GRAMMAR-ERROR"}),
    ("chat_text.sse", m_side_event, {"CH-GRAMMAR-UNKNOWN-EVENT"}),
    ("chat_text.sse", m_side_event_not_json, {"CH-GRAMMAR-JSON"}),
    ("chat_tool_dispatch.sse", m_no_event_lines_ok, set()),
    ("chat_text.sse", m_object, {"CH-GRAMMAR-OBJECT"}),
    ("chat_text.sse", m_id, {"CH-GRAMMAR-ID"}),
    ("chat_text.sse", m_choices, {"CH-GRAMMAR-CHOICES"}),
    ("chat_parallel_tools_usage.sse", m_tool_index, {"CH-GRAMMAR-TOOL-INDEX"}),
    ("chat_parallel_tools_usage.sse", m_tool_first, {"CH-GRAMMAR-TOOL-FIRST"}),
    ("chat_parallel_tools_usage.sse", m_tool_first_no_id, {"CH-GRAMMAR-TOOL-FIRST"}),
    ("chat_parallel_tools_usage.sse", m_tool_repeat, {"CH-GRAMMAR-TOOL-REPEAT"}),
    ("chat_parallel_tools_usage.sse", m_tool_repeat_name, {"CH-GRAMMAR-TOOL-REPEAT"}),
    ("chat_parallel_tools_usage.sse", m_type_repeat_is_fine, set()),
    ("chat_parallel_tools_usage.sse", m_tool_args, {"CH-GRAMMAR-TOOL-ARGS"}),
    ("chat_parallel_tools_usage.sse", m_tool_args_not_string, {"CH-GRAMMAR-TOOL-ARGS"}),
    ("chat_text.sse", m_finish_reason, {"CH-GRAMMAR-FINISH-REASON"}),
    ("chat_text.sse", m_finish_twice, {"CH-GRAMMAR-FINISH-ONCE"}),
    ("chat_text.sse", m_finish_missing, {"CH-GRAMMAR-FINISH-ONCE"}),
    ("chat_text.sse", m_after_finish, {"CH-GRAMMAR-AFTER-FINISH"}),
    ("chat_parallel_tools_usage.sse", m_stop_after_tools, {"CH-GRAMMAR-FINISH-TOOL-CALLS"}),
    ("chat_text.sse", m_tool_calls_without_tools, {"CH-GRAMMAR-FINISH-TOOL-CALLS"}),
    ("chat_parallel_tools_usage.sse", m_usage_missing, {"CH-GRAMMAR-USAGE-CHUNK"}),
    ("chat_parallel_tools_usage.sse", m_usage_choices, {"CH-GRAMMAR-USAGE-CHOICES"}),
    ("chat_parallel_tools_usage.sse", m_usage_on_finish_chunk, {"CH-GRAMMAR-USAGE-CHOICES"}),
    ("chat_parallel_tools_usage.sse", m_continuous_usage_ok, set()),
    ("chat_parallel_tools_usage.sse", m_usage_shape, {"CH-GRAMMAR-USAGE-CHUNK"}),
    ("chat_parallel_tools_usage.sse", m_usage_early, {"CH-GRAMMAR-USAGE-CHUNK"}),
    ("chat_parallel_tools_usage.sse", m_usage_twice, {"CH-GRAMMAR-USAGE-CHUNK"}),
    ("chat_text.sse", m_done_missing, {"CH-GRAMMAR-DONE"}),
    ("chat_text.sse", m_after_done, {"CH-GRAMMAR-DONE"}),
    ("chat_tool_dispatch.sse", m_dispatch_shape, {"CH-DISPATCH-SHAPE", "CH-DISPATCH-MISSING"}),
    ("chat_tool_dispatch.sse", m_dispatch_twice, {"CH-DISPATCH-ONCE"}),
    ("chat_tool_dispatch.sse", m_dispatch_mismatch, {"CH-DISPATCH-MATCH"}),
    ("chat_tool_dispatch.sse", m_dispatch_name, {"CH-DISPATCH-MATCH"}),
    ("chat_tool_dispatch.sse", m_dispatch_early, {"CH-DISPATCH-EARLY"}),
    ("chat_tool_dispatch.sse", m_dispatch_before_call, {"CH-DISPATCH-EARLY"}),
    ("chat_tool_dispatch.sse", m_dispatch_late, {"CH-DISPATCH-LATE"}),
    ("chat_tool_dispatch.sse", m_dispatch_missing, {"CH-DISPATCH-MISSING"}),
]


@pytest.mark.parametrize(("fixture", "mutate", "expected"), MUTATIONS, ids=[m[1].__name__ for m in MUTATIONS])
def test_mutation_breaks_exactly_one_rule(fixture: str, mutate: Callable[[Ev], None], expected: set[str]) -> None:
    events = load(fixture)
    mutate(events)
    findings = chat.validate(frames(events), REQUESTS.get(fixture))
    assert rules_of(findings) == expected, [str(f) for f in findings]
    assert all(f.rule in chat.RULES for f in findings)
    for f in findings:  # what was seen, what was wanted, where; informational exactly for those rules
        assert f.frame_index is not None and f.message and f.observed is not None, str(f)
        assert f.informational == (f.rule in chat.INFORMATIONAL), str(f)
        assert f.expected is not None or f.informational, str(f)


def test_every_rule_has_a_failing_case() -> None:
    assert set().union(*(m[2] for m in MUTATIONS)) == set(chat.RULES)
    assert chat.INFORMATIONAL <= set(chat.RULES)


def test_usage_messages_say_which_deviation() -> None:
    events = load("chat_parallel_tools_usage.sse")
    m_usage_choices(events)
    (f,) = chat.validate(frames(events), USAGE_REQ)
    assert f.rule == "CH-GRAMMAR-USAGE-CHOICES" and f.frame_index == len(events) - 2
    assert "no usage" not in f.message and "choices is not []" in f.message
    assert f.observed == 'choices: [{"index": 0, "delta": {}}]' and f.expected == "choices: []"
    events = load("chat_parallel_tools_usage.sse")
    m_usage_missing(events)
    (f,) = chat.validate(frames(events), USAGE_REQ)
    assert f.rule == "CH-GRAMMAR-USAGE-CHUNK" and "no chunk carried usage" in f.message
    assert f.frame_index == len(events) - 1  # the end of the stream: the [DONE] frame


def test_error_reports_the_body() -> None:
    events = load("chat_text.sse")
    m_error_cuts_the_stream(events)
    (f,) = chat.validate(frames(events), USAGE_REQ)
    assert f.informational and "server_error: overloaded" in f.message
    assert json.loads(f.observed or "") == {"message": "overloaded", "type": "server_error", "code": 503}


def test_event_name_summed_per_name() -> None:
    events = load("chat_text.sse")
    for ev in events:
        ev[0] = "message"
    findings = chat.validate(frames(events))
    assert rules_of(findings) == {"CH-GRAMMAR-EVENT-NAME"} and len(findings) == 1
    assert f"{len(events)} chunk frame(s)" in findings[0].message and findings[0].frame_index == 0


def test_forced_function_may_answer_stop() -> None:
    events = load("chat_parallel_tools_usage.sse")
    m_stop_after_tools(events)
    req = {**USAGE_REQ, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
    assert chat.validate(frames(events), req) == []


def test_without_include_usage_no_usage_chunk_needed() -> None:
    events = load("chat_parallel_tools_usage.sse")
    m_usage_missing(events)
    assert chat.validate(frames(events), {"stream": True}) == []


# -- never raises ---------------------------------------------------------------------------

JSONISH = st.one_of(st.none(), st.booleans(), st.integers(-1, 2), st.text(max_size=4),
                    st.lists(st.integers(), max_size=2), st.dictionaries(st.sampled_from(["index", "id"]), st.integers(), max_size=2))
TCS = st.lists(st.fixed_dictionaries({"index": st.integers(0, 2) | JSONISH}, optional={
    "id": st.sampled_from(["c1", ""]) | JSONISH, "type": st.just("function") | JSONISH,
    "function": st.fixed_dictionaries({}, optional={"name": st.just("f") | JSONISH, "arguments": st.sampled_from(["{", "}", ""]) | JSONISH}) | JSONISH,
}), max_size=2) | JSONISH


@st.composite
def plausible_chunk(draw: st.DrawFn) -> list[Any]:
    name = draw(st.sampled_from([None, None, None, chat.DISPATCH_EVENT, "x"]))
    if name == chat.DISPATCH_EVENT:
        tc = draw(st.fixed_dictionaries({"index": st.integers(0, 2), "id": st.just("c1"), "type": st.just("function"),
                                         "function": st.just({"name": "f", "arguments": "{}"}) | JSONISH}) | JSONISH)
        return [name, draw(st.just({"choice_index": 0, "tool_call": tc}) | JSONISH)]
    choice = st.fixed_dictionaries({"index": st.integers(0, 1) | JSONISH, "delta": st.fixed_dictionaries({}, optional={
        "content": st.just("x") | JSONISH, "tool_calls": TCS}) | JSONISH,
        "finish_reason": st.sampled_from([None, "stop", "tool_calls", "bad"]) | JSONISH})
    d = {"id": draw(st.just("a") | JSONISH), "object": "chat.completion.chunk",
         "choices": draw(st.lists(choice, max_size=2) | JSONISH), "usage": draw(JSONISH)}
    return [name, draw(st.just(d) | JSONISH | st.sampled_from(["[DONE]", "{x"]))]


@settings(max_examples=100, deadline=None)
@given(st.lists(plausible_chunk(), max_size=12), st.sampled_from([None, USAGE_REQ, {"tool_choice": {"type": "function"}}, "junk"]))
@example([[None, {"id": "a", "object": "chat.completion.chunk",  # found by hypothesis: unhashable
                  "choices": [{"index": 0, "delta": {}, "finish_reason": []}], "usage": None}]], None)
def test_validator_and_fold_never_raise(events: Ev, request: Any) -> None:
    fr = frames(events)
    findings = chat.validate(fr, request)
    assert all(isinstance(f, Finding) and f.rule in chat.RULES for f in findings)
    chat.final_message(fr)
    answer_fold.agrees(apis.chat, fr)  # the answer's fold is the recorded one without its record
