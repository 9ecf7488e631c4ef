"""One reading of each stream (issue 32): what each API's fold records per event, read by apis.base.trace
(the dispatch checks and the timeline) and by the grammar validators. Streams written by hand; the
expected frames are counted from them, not computed by the code under test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harnesscheck.protocol import apis
from harnesscheck.protocol.apis.base import Reading, trace
from harnesscheck.conformance.grammar import validate_for
from harnesscheck.protocol.wire.sse import SSEFrame, decode_all
from harnesscheck.protocol.wire.transcript import Transcript

from tests.conformance import answer_fold


def _an(typ: str, **data: Any) -> dict[str, Any]:
    return {"type": typ, **data}


ANTHROPIC = [
    _an("message_start", message={"role": "assistant", "content": [], "stop_reason": None,
                                  "usage": {"input_tokens": 1, "output_tokens": 0}}),             # 0
    _an("content_block_start", index=0, content_block={"type": "thinking", "thinking": ""}),    # 1
    _an("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "hmm"}),   # 2
    _an("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "s"}),   # 3
    _an("content_block_stop", index=0),                                                         # 4
    _an("content_block_start", index=1, content_block={"type": "tool_use", "id": "toolu_1",
                                                       "name": "Read", "input": {}}),           # 5
    _an("content_block_delta", index=1, delta={"type": "input_json_delta", "partial_json": '{"p"'}),  # 6
    _an("content_block_delta", index=1, delta={"type": "input_json_delta", "partial_json": ': 1}'}),  # 7
    _an("content_block_stop", index=1),                                                         # 8
    _an("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 9}),        # 9
    _an("message_stop"),                                                                        # 10
]


def _ch(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _call(i: int, **fields: Any) -> dict[str, Any]:
    return {"tool_calls": [{"index": i, **fields}]}


CHAT = [
    _ch({"role": "assistant", "reasoning_content": "think"}),                                        # 0
    _ch(_call(0, id="call_a", type="function", function={"name": "Read", "arguments": ""})),       # 1
    _ch(_call(0, function={"arguments": '{"p": 1}'})),                                              # 2
    _ch({"content": "then"}),                                                                       # 3
    _ch(_call(1, id="call_b", type="function", function={"name": "Grep", "arguments": '{"q": 2}'})),  # 4
    _ch({}, finish="tool_calls"),                                                                   # 5
]


def _rs(n: int, typ: str, **data: Any) -> dict[str, Any]:
    return {"type": typ, "sequence_number": n, **data}


RESPONSES = [
    _rs(0, "response.created", response={"id": "r", "output": []}),
    _rs(1, "response.in_progress", response={"id": "r"}),
    _rs(2, "response.output_item.added", output_index=0,
        item={"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "Bash", "arguments": ""}),
    _rs(3, "response.function_call_arguments.delta", output_index=0, item_id="fc_1", delta='{"c": 1}'),
    _rs(4, "response.function_call_arguments.done", output_index=0, item_id="fc_1", arguments='{"c": 1}'),
    _rs(5, "response.output_item.done", output_index=0,
        item={"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "Bash",
              "arguments": '{"c": 1}'}),
    _rs(6, "response.completed", response={"id": "r", "output": [{"id": "fc_1"}],
                                           "usage": {"input_tokens": 1, "output_tokens": 2,
                                                     "total_tokens": 3}}),
]


def test_anthropic_trace_calls_and_words() -> None:
    t = trace(apis.get("anthropic"), enumerate(ANTHROPIC))
    [call] = t.calls
    assert (call.key, call.name, call.frames, call.complete, call.ended) == (1, "Read", [5, 6, 7, 8], 8, 8)
    assert [(c, w, n) for c, w, n in t.said] == [("reasoning", "hmm", 2)]
    assert [(n, closed) for n, _, closed in t.placed if closed] == [(4, (0,)), (8, (1,))]


def test_chat_call_ends_with_its_last_delta_and_completes_at_the_next_index() -> None:
    t = trace(apis.get("chat"), enumerate(CHAT))
    first, second = t.calls
    assert (first.name, first.frames, first.complete, first.ended) == ("Read", [1, 2], 4, 2)
    assert (second.name, second.frames, second.complete, second.ended) == ("Grep", [4], 5, 4)
    assert [(c, w, n) for c, w, n in t.said] == [("reasoning", "think", 0), ("text", "then", 3)]
    assert t.placed[-1][2] == ("reasoning", "text", 0, 1)  # the finish closes every part of choice 0


def test_responses_call_completes_at_arguments_done() -> None:
    t = trace(apis.get("responses"), enumerate(RESPONSES))
    [call] = t.calls
    assert (call.name, call.frames, call.complete, call.ended) == ("Bash", [2, 3, 4, 5], 4, 4)
    assert t.names == {0: "item 0: function_call Bash"}


def _frames(events: list[Any], named: bool) -> list[SSEFrame]:
    return [SSEFrame.make(d, event=d.get("type") if named else None, index=i) for i, d in enumerate(events)]


def test_the_validators_read_the_fold_and_hold_nothing_between_calls() -> None:
    for api, events, named in (("anthropic", ANTHROPIC, True), ("chat", CHAT, False),
                               ("responses", RESPONSES, True)):
        frames = _frames(events, named)
        if api == "chat":
            frames.append(SSEFrame.make("[DONE]", index=len(frames)))
        assert [f for f in validate_for(api, frames) if not f.informational] == [], api
        assert validate_for(api, frames) == validate_for(api, frames)  # pure: the same findings again
    # the Anthropic record, read directly: a delta after its block stopped
    snap = apis.get("anthropic").recording()
    for event in [*ANTHROPIC[:5], _an("content_block_delta", index=0, delta={"type": "thinking_delta",
                                                                               "thinking": "late"})]:
        snap = apis.get("anthropic").accumulate(event, snap)
    assert snap["_event"]["what"] == "block-closed" and snap["_event"]["stop"] == 4


# -- fold once (issue 44): one Reading per transcript, shared by every reader --------------------------------

def _transcript(api: str, frames: list[SSEFrame]) -> Transcript:
    return Transcript(api=api, method="POST", url=apis.get(api).PATH, status=200, frames=list(frames))


def _streams() -> list[tuple[str, list[SSEFrame]]]:
    chat = _frames(CHAT, False)
    dispatch = SSEFrame.make({"choice_index": 0, "tool_call": {"index": 0, "id": "call_a", "type": "function",
                                                               "function": {"name": "Read", "arguments": '{"p": 1}'}}},
                             event=apis.chat.DISPATCH_EVENT, index=0)
    chat = [*chat[:3], dispatch, *chat[3:], SSEFrame.make("[DONE]", index=0)]
    chat = [SSEFrame.make(f.json if f.json is not None else f.data, event=f.event, index=i) for i, f in enumerate(chat)]
    return [("anthropic", _frames(ANTHROPIC, True)), ("chat", chat), ("responses", _frames(RESPONSES, True))]


def _reads(api: str, source: Any) -> tuple[Any, ...]:
    module = apis.get(api)
    traced = Reading.of(module, source).trace if isinstance(source, Transcript) else \
        trace(module, [(f.index, module.fold_input(f)) for f in source if module.fold_input(f) is not None])
    return (module.final_answer(source), validate_for(api, source), traced.calls, traced.said, traced.placed,
            module.tool_calls(traced.snapshot))


def test_every_reader_shares_one_fold_of_a_transcript(monkeypatch: Any) -> None:
    for api, frames in _streams():
        module = apis.get(api)
        alone = _reads(api, frames)  # each reader folds the frames itself
        calls = []
        real = module.accumulate
        monkeypatch.setattr(module, "accumulate", lambda e, s, real=real: calls.append(e) or real(e, s))
        t = _transcript(api, frames)
        shared = _reads(api, t)
        assert shared == alone, api  # the same answer, findings and trace
        folded = [module.fold_input(f) for f in frames if module.fold_input(f) is not None]
        assert len(calls) == len(folded), (api, len(calls), len(folded))  # each input folded once, for all
        assert _reads(api, t) == alone and len(calls) == len(folded)  # read again: nothing folded again
        monkeypatch.undo()


def test_a_reader_that_folds_otherwise_folds_its_own() -> None:
    frames = _frames(CHAT, False)
    t = _transcript("chat", [*frames, SSEFrame.make("[DONE]", index=len(frames)),
                             SSEFrame.make(CHAT[3], index=len(frames) + 1)])  # a chunk after [DONE]
    answer = apis.chat.final_answer(t)  # folds every chunk, the one after [DONE] too
    assert answer is not None and answer["content"] == "thenthen"
    assert "CH-GRAMMAR-DONE" in {f.rule for f in validate_for("chat", t)}  # the validator stops at [DONE]
    assert (apis.chat.final_answer(_frames(CHAT, False)) or {})["content"] == "then"


def test_a_growing_transcript_gets_a_fresh_reading() -> None:
    frames = _frames(ANTHROPIC, True)
    t = _transcript("anthropic", frames[:5])
    first = Reading.of(apis.anthropic, t)
    assert Reading.of(apis.anthropic, t) is first and apis.anthropic.tool_calls(first.snapshot) == []
    t.frames.extend(frames[5:])
    assert Reading.of(apis.anthropic, t) is not first
    assert [c.name for c in apis.anthropic.tool_calls(Reading.of(apis.anthropic, t).snapshot)] == ["Read"]
    assert validate_for("anthropic", t) == validate_for("anthropic", frames)


def test_an_answer_is_the_caller_own() -> None:
    """The fold is shared: an answer a caller changes leaves the next reader's answer as it was."""
    for api, frames in _streams():
        t = _transcript(api, frames)
        first = apis.get(api).final_answer(t)
        assert first is not None
        before = json.dumps(first, sort_keys=True, default=str)
        for value in first.values():
            if isinstance(value, list):
                value.clear()
            elif isinstance(value, dict):
                value["changed"] = True
        assert json.dumps(apis.get(api).final_answer(t), sort_keys=True, default=str) == before, api


# -- the answer's fold (issue 44): the recorded fold without its record, built only when a reader asks -----

FIXTURES = Path(__file__).parent / "fixtures"


def test_the_answer_folds_without_the_record_and_agrees_with_it(monkeypatch: Any) -> None:
    """Every recorded fixture and hand-written stream: ``place`` is ``accumulate`` without the record, and the
    answer is the same however it is read; read alone, the answer runs no ``accumulate`` (the record is
    not built), and a validator after it still folds each input once."""
    streams = [(api, frames) for api, frames in _streams()]
    for path in sorted(FIXTURES.glob("*.sse")):
        api = path.name.split("_")[0]
        streams.append((api, [f for f in decode_all(path.read_bytes()) if f.kind == "event"]))
    assert {api for api, _ in streams} == {"anthropic", "chat", "responses"} and len(streams) > 10
    for api, frames in streams:
        answer_fold.agrees(apis.get(api), frames)
    for api, frames in _streams():
        module = apis.get(api)
        calls: list[Any] = []
        real = module.accumulate
        monkeypatch.setattr(module, "accumulate", lambda e, s, real=real: calls.append(e) or real(e, s))
        t = _transcript(api, frames)
        assert module.final_answer(t) == module.final_answer(frames) and calls == [], api  # no record built
        validate_for(api, t)
        folded = [module.fold_input(f) for f in frames if module.fold_input(f) is not None]
        assert len(calls) == len(folded), api
        monkeypatch.undo()
