"""The replay side of the API fold (replay/fold.py, replay/forms.py) on hand-written streams: the
client's answer, structure and tool-ready times come from protocol.apis' snapshot; CallWatch's
incremental-parse rule applies only where the API marks no end per call; paths map to APIs."""

from __future__ import annotations

import pytest

from harnesscheck.replay.client import Fold, StreamResult
from harnesscheck.replay.fold import CallWatch
from harnesscheck.replay.forms import api_for_path


def _chat(delta: dict | None = None, finish: str | None = None) -> dict:
    return {"id": "c", "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}


def _fold(api: str, events: list[tuple[str | None, object]]) -> StreamResult:
    r = StreamResult(api=api, status=200)
    fold = Fold(r)
    for t, (event, d) in enumerate(events):
        fold.on(event, d, t)
    fold.finish()
    fold.answer()
    return r


def test_chat_structure_keeps_arrival_order_and_ready_sources():
    r = _fold("chat", [
        (None, _chat({"role": "assistant", "reasoning_content": "think "})),
        (None, _chat({"reasoning_content": "more"})),
        (None, _chat({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "read", "arguments": '{"p":'}}]})),
        (None, _chat({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]})),
        (None, _chat({"reasoning_content": "again"})),
        (None, _chat({"tool_calls": [{"index": 1, "id": "b", "function": {"name": "run", "arguments": "{}"}}]})),
        (None, _chat(finish="tool_calls")),
        (None, "[DONE]"),
    ])
    assert r.structure == {"blocks": ["reasoning", "tool_call", "reasoning", "tool_call"],
                           "tool_calls": ["read", "run"], "stop": "tool_calls"}
    assert [(t.index, t.name, t.t_ns, t.source) for t in r.tool_ready] == [(0, "read", 5, "next_index"),
                                                                          (1, "run", 6, "finish_reason")]
    assert r.token_ns == [0, 1, 2, 3, 4, 5]
    assert r.finished and r.error is None
    assert r.answer == [{"role": "assistant", "content": None, "reasoning_content": "think moreagain",
                         "tool_calls": [{"id": "a", "type": "function", "function": {"name": "read", "arguments": '{"p":1}'}},
                                        {"id": "b", "type": "function", "function": {"name": "run", "arguments": "{}"}}]}]


def test_chat_dispatch_frame_counts_once_and_finish_reason_ends_the_stream():
    r = _fold("chat", [
        (None, _chat({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "read", "arguments": "{}"}}]})),
        ("tool_call_dispatch", {"tool_call": {"index": 0, "function": {"name": "read"}}}),
        (None, _chat(finish="tool_calls")),  # no [DONE]: whole all the same
    ])
    assert [(t.index, t.source) for t in r.tool_ready] == [(0, "dispatch")]
    assert r.finished and r.stop_reason == "tool_calls"


def test_anthropic_unfinished_tool_block_goes_back_with_empty_input_and_errors_are_named():
    r = _fold("anthropic", [
        (None, {"type": "message_start", "message": {"content": [], "usage": {"input_tokens": 3}}}),
        (None, {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        (None, {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}}),
        (None, {"type": "content_block_start", "index": 1,
                "content_block": {"type": "tool_use", "id": "t", "name": "bash", "input": {}}}),
        (None, {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"c'}}),
        (None, {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}),
    ])
    assert r.answer == [{"role": "assistant", "content": [{"type": "text", "text": "hi"},
                                                          {"type": "tool_use", "id": "t", "name": "bash", "input": {}}]}]
    assert r.tool_ready == [] and not r.finished
    assert r.error_kind == "error_event" and r.error.startswith("error event: ") and "busy" in r.error
    assert r.usage == {"input_tokens": 3}


def test_responses_incomplete_is_an_end_failed_is_an_error():
    done = {"type": "response.incomplete", "response": {"status": "incomplete", "output": [], "usage": {"output_tokens": 16}}}
    r = _fold("responses", [(None, {"type": "response.created", "response": {"status": "in_progress"}}), (None, done)])
    assert r.finished and r.stop_reason == "incomplete" and r.usage == {"output_tokens": 16} and r.error is None
    failed = {"type": "response.failed", "response": {"status": "failed", "error": {"code": "server_error"}}}
    r = _fold("responses", [(None, failed)])
    assert not r.finished and r.error.startswith("response.failed: ") and r.error_kind == "error_event"


@pytest.mark.parametrize(("api", "early", "sources"), [
    ("chat", True, ["arguments", "finish_reason"]),  # no end per call: parsed arguments count first
    ("chat", False, ["finish_reason"]),
])
def test_callwatch_parses_early_only_where_the_api_marks_no_end_per_call(api, early, sources):
    from harnesscheck.protocol import apis

    watch = CallWatch(api, early=early)
    snap = None
    seen = []
    for d in (_chat({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": '{"x": 1'}}]}),
              _chat({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}),
              _chat(finish="tool_calls")):
        snap = apis.get(api).accumulate(d, snap)
        seen += [s for _, s in watch.step(snap)[1]]
    assert seen == sources


def test_callwatch_never_parses_early_on_an_api_with_an_end_per_call():
    from harnesscheck.protocol import apis

    watch = CallWatch("anthropic", early=True)
    snap = None
    seen = []
    for d in ({"type": "message_start", "message": {"content": []}},
              {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "f"}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{}"}},
              {"type": "content_block_stop", "index": 0}):
        snap = apis.get("anthropic").accumulate(d, snap)
        started, completed = watch.step(snap)
        seen += [("start", c.name) for c in started] + [("done", s) for _, s in completed]
    assert seen == [("start", "f"), ("done", "stop")]


def test_api_for_path():
    assert api_for_path("/v1/messages") == "anthropic"
    assert api_for_path("/proxy/v1/chat/completions?x=1") == "chat"
    assert api_for_path("/v1/responses/") == "responses"
    assert api_for_path("/v1/messages/count_tokens") is None
    assert api_for_path("/v1/models") is None
