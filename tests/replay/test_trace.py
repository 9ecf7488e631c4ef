"""Trace schema: load/save, validation messages, delta expansion."""

from __future__ import annotations

import json

import pytest

from harnesscheck.replay.trace import (
    ANSWER, Timing, Trace, TraceError, TraceTurn, dumps, expand_session, load, loads, make_delta, save,
)
from harnesscheck.replay.workloads import agent_coding

HEADER = json.dumps({"schema": "harnesscheck.trace", "version": 1, "source": "test", "created": "x"})


def _turns() -> list[TraceTurn]:
    t0 = TraceTurn(session="a", turn=0, api="anthropic",
                   request={"model": "m", "system": "sys", "messages": [{"role": "user", "content": "hi"}]},
                   response=[{"role": "assistant", "content": [{"type": "text", "text": "hello"}]}],
                   timing=Timing(at_ms=5))
    t1 = TraceTurn(session="a", turn=1, api="anthropic",
                   delta={"base": "previous", "append": [dict(ANSWER), {"role": "user", "content": "more"}],
                          "set": {"max_tokens": 9}, "unset": ["system"]},
                   timing=Timing(think_ms=100, tool_ms=20), expect={"tool_calls": []})
    return [t0, t1]


def test_save_load_roundtrip(tmp_path) -> None:
    trace = Trace.build(_turns(), source="test", meta={"k": 1})
    path = save(trace, tmp_path / "t.jsonl")
    back = load(path)
    assert dumps(back).splitlines()[1:] == dumps(trace).splitlines()[1:]
    assert back.meta == {"k": 1} and back.source == "test"
    assert back.sessions[0].turns[1].timing.think_ms == 100


def test_expand_delta_with_answer_set_unset() -> None:
    reqs = expand_session(_turns())
    assert reqs[1] == {"model": "m", "max_tokens": 9, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
        {"role": "user", "content": "more"}]}
    live = expand_session(_turns(), {0: [{"role": "assistant", "content": "LIVE"}]})
    assert live[1]["messages"][1] == {"role": "assistant", "content": "LIVE"}
    assert reqs[0] == _turns()[0].request  # expansion never mutates the trace


def test_keep_cuts_history() -> None:
    t0 = TraceTurn(session="s", turn=0, api="responses", request={"input": [1, 2, 3]}, response=[9])
    t1 = TraceTurn(session="s", turn=1, api="responses", delta={"base": "previous", "keep": 1,
                                                                 "append": [{"x": 2}, dict(ANSWER), 4]})
    assert expand_session([t0, t1])[1] == {"input": [1, {"x": 2}, 9, 4]}


@pytest.mark.parametrize(("prev", "cur", "slot"), [
    ({"messages": [1, 2], "a": 1}, {"messages": [1, 2, 3, 4], "a": 1}, None),
    ({"messages": [1, 2], "a": 1, "b": 2}, {"messages": [1, 5, 3], "a": 2}, None),
    ({"messages": [{"r": "u"}], "m": "x"}, {"messages": [{"r": "u"}, {"r": "a"}, {"r": "u2"}], "m": "x"}, (1, 1)),
])
def test_make_delta_inverts(prev, cur, slot) -> None:
    delta = make_delta(prev, cur, "chat", slot)
    t0 = TraceTurn(session="s", turn=0, request=prev, response=cur["messages"][1:2] if slot else None)
    t1 = TraceTurn(session="s", turn=1, delta=delta)
    assert expand_session([t0, t1])[1] == cur


def test_workload_trace_validates_and_expands() -> None:
    trace = loads(dumps(agent_coding(sessions=2, turns=7, prompt_tokens=3000, api="chat")))
    reqs = trace.sessions[0].requests()
    assert len(reqs) == 7
    assert all(len(reqs[i]["messages"]) > len(reqs[i - 1]["messages"]) for i in range(1, 7))
    assert len(reqs[0]["tools"]) == 20
    assert reqs[0]["messages"][0]["role"] == "system" and len(reqs[0]["messages"][0]["content"]) > 5000


@pytest.mark.parametrize(("line", "message"), [
    ({"turn": 0, "request": {}}, "missing required field 'session'"),
    ({"session": "a", "turn": 0, "api": "grpc", "request": {}}, "'api' must be one of"),
    ({"session": "a", "turn": 0}, "exactly one of 'request'"),
    ({"session": "a", "turn": 0, "request": {}, "delta": {"base": "previous"}}, "exactly one of 'request'"),
    ({"session": "a", "turn": 0, "request": {}, "colour": 1}, "unknown field(s) ['colour']"),
    ({"session": "a", "turn": 0, "request": {}, "timing": {"think_ms": -1}}, "timing 'think_ms' must be a number"),
    ({"session": "a", "turn": 0, "request": {}, "path": "v1/x"}, "'path' must be a request path starting with '/'"),
    ({"session": "a", "turn": 0, "delta": {"base": "first"}}, "delta 'base' must be \"previous\""),
])
def test_validation_messages(line, message) -> None:
    with pytest.raises(TraceError) as err:
        loads(HEADER + "\n" + json.dumps(line))
    assert message in str(err.value)
    assert "line 2" in str(err.value)


def test_validation_across_turns() -> None:
    gap = [{"session": "a", "turn": 0, "request": {"messages": []}}, {"session": "a", "turn": 2, "request": {}}]
    with pytest.raises(TraceError, match="numbered 0..1"):
        loads("\n".join([HEADER, *map(json.dumps, gap)]))
    first_delta = [{"session": "a", "turn": 0, "delta": {"base": "previous"}}]
    with pytest.raises(TraceError, match="first turn must give the whole request"):
        loads("\n".join([HEADER, *map(json.dumps, first_delta)]))
    not_list = [{"session": "a", "turn": 0, "request": {"messages": "x"}},
                {"session": "a", "turn": 1, "delta": {"base": "previous", "append": []}}]
    with pytest.raises(TraceError, match="must be a list"):
        loads("\n".join([HEADER, *map(json.dumps, not_list)]))
    with pytest.raises(TraceError, match="expected a header"):
        loads(json.dumps({"session": "a"}))
    with pytest.raises(TraceError, match="unsupported trace version"):
        loads(json.dumps({"schema": "harnesscheck.trace", "version": 99}))
