"""Streaming tool dispatch: a tool call is usable the moment it is complete, not at the end of the
turn (article 2), and Dynamo's `tool_call_dispatch` side frames are well formed when offered.

Witness: order, not clock. A server that holds tool calls back sends a call's completion after
content the model generated later (its next reasoning, text or call). So only content generated
after a call completed is judged: a call is held back when such content arrived before the call's
completion event. Which content came later in the model's output is known from the scenario's script
(its reasoning and text parts, found in the streamed text) and from the calls' own order.

The rule is exercised (catalog.OUTPUT_AFTER_CALL) only by a call that completed before reasoning or
text streamed after it: that call was not held to the end of the turn. A call followed only by other
calls proves nothing (held-back calls still stream one after the other), nor does a call that is the
last content of its turn. While no scenario exercised the rule, each is sampled again up to --tries
times, every sample judged; a rule never exercised is inconclusive (not-exercised), never a pass.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from harnesscheck.protocol import apis
from harnesscheck.conformance import catalog
from harnesscheck.protocol.apis.base import Reading
from harnesscheck.conformance.session import Session
from harnesscheck.conformance.verdict import Problems, fail, inconclusive, ok_response, skip
from harnesscheck.protocol.wire.transcript import Transcript
from harnesscheck.scenarios.loader import ModelPart

SCENARIO = "long_reasoning"  # r0 t0 r1 t1 with ~700 reasoning tokens generated after t0 completes
# Each first turn has content after its first call; the short ones first, so a slow endpoint's deadline
# on the long one comes last.
SCENARIOS = ("interleaved", "parallel_tools", SCENARIO)
# CH-DISPATCH-002: a dispatch frame may trail the call's last delta by this many frames (the frame that
# tells a client the call is complete, and one more); later, or after the finish_reason chunk, is late.
DISPATCH_SLACK = 2


def _value(arguments: object) -> object:
    try:
        return json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return arguments


@dataclass
class _Call:
    name: str
    frames: list[int] = field(default_factory=list)  # frames the fold placed in the call (start, deltas, end)
    complete: int | None = None  # the frame where the model finished the call (CallTrace.ended)


@dataclass
class _Stream:
    """What a stream carried, by frame: text per channel ("reasoning", "text") and the tool calls."""

    chars: dict[str, list[tuple[str, int]]] = field(default_factory=lambda: {"reasoning": [], "text": []})
    calls: list[_Call] = field(default_factory=list)
    content: list[int] = field(default_factory=list)  # every frame that carries model output


def _parse(api: str, t: Transcript) -> _Stream:
    """The stream's model output by frame, read with the API's fold (apis.base.trace): the text each
    frame said, and each tool call's frames and the frame where the model finished it (the API's rule:
    Anthropic the block's content_block_stop, Responses the first of arguments.done and output_item.done,
    Chat its last delta before the next index or the finish)."""
    s = _Stream()
    traced = Reading.of(apis.get(api), t).trace
    for channel, said, frame in traced.said:
        if said:
            s.chars[channel].extend((c, frame) for c in said if not c.isspace())
            s.content.append(frame)
    for call in traced.calls:
        s.calls.append(_Call(call.name, list(call.frames), call.ended))
        s.content += call.frames
    s.content.sort()
    return s


def _locate(stream: _Stream, part: ModelPart, cursor: dict[str, int]) -> set[int]:
    """The frames that carried a scripted reasoning or text part (whitespace aside), searched from
    where the previous part of the same channel ended; empty when the model did not say it."""
    needle = "".join(part.text.split())
    if not needle:
        return set()
    own = "reasoning" if part.kind == "reasoning" else "text"
    for channel in (own, "text" if own == "reasoning" else "reasoning"):  # reasoning may stream as text
        chars = stream.chars[channel]
        joined = "".join(c for c, _ in chars)
        at = joined.find(needle, cursor.get(channel, 0))
        if at >= 0:
            cursor[channel] = at + len(needle)
            return {frame for _, frame in chars[at:at + len(needle)]}
    return set()


def _later(stream: _Stream, script: tuple[ModelPart, ...]) -> list[dict[int, str]]:
    """For each streamed call, the frames of content generated after it: later calls, and the
    scripted parts after its position in the script, as frame -> what the frame carried."""
    cursor: dict[str, int] = {}
    part_frames = [(n, p, _locate(stream, p, cursor)) for n, p in enumerate(script) if p.kind != "tool_call"]
    call_positions = [n for n, p in enumerate(script) if p.kind == "tool_call"]
    out = []
    for k, _call in enumerate(stream.calls):
        later: dict[int, str] = {}
        for j, other in enumerate(stream.calls[k + 1:], start=k + 1):
            later.update((frame, f"tool call {j} ({other.name})") for frame in other.frames)
        if k < len(call_positions):
            for n, part, frames in part_frames:
                if n > call_positions[k]:
                    what = f"the script's {part.kind} part {n} ({part.text[:24]!r}...)"
                    later.update((frame, what) for frame in frames)
        out.append(later)
    return out


def _sample(hc: Session, api: str, scenario: str, n: int) -> Transcript:
    """Try n (from 0) of a scenario's turn 0: the stream other checks share, then new samples of it."""
    if n == 0:
        return hc.stream(api, scenario)
    return hc.post(api, apis.get(api).PATH, hc.request_for(api, scenario, 0), stream=True,
                   label=f"{scenario} turn 0 (try {n + 1})")


def _judge_stream(scenario: str, script: tuple[ModelPart, ...], t: Transcript, api: str,
                  idle: list[str]) -> bool:
    """Fail when a call became complete after content the model generated later; True when a call
    completed before reasoning or text that streamed after it (the rule was exercised)."""
    stream = _parse(api, t)
    if not stream.calls:
        idle.append(f"{scenario}: no tool call")
        return False
    call_frames = {n for call in stream.calls for n in call.frames}
    exercised = False
    for k, (call, later) in enumerate(zip(stream.calls, _later(stream, script), strict=True)):
        done = call.complete if call.complete is not None else max(call.frames, default=-1)
        early = sorted(n for n in later if n < done)
        if early:
            fail(f"{scenario}: tool call {k} ({call.name}) became complete at frame #{done}, but "
                 f"{len(early)} content frame(s) the model generated after it arrived before that, the "
                 f"first at frame #{early[0]} ({later[early[0]]}): tool calls are held back to the end of "
                 "the turn", transcript=t)
        if any(n > done and n not in call_frames for n in stream.content):
            exercised = True
        else:
            what = "only other tool calls" if any(n > done for n in stream.content) else "nothing"
            idle.append(f"{scenario}: tool call {k} ({call.name}) is followed by {what}")
    return exercised


def _attempt(hc: Session, api: str, scenario: str, idle: list[str]) -> Callable[[], None]:
    """One try per call: the next sample of the scenario, judged, the path marked when it was taken."""
    script = hc.scenario(scenario).turns[0].model
    tries = itertools.count()

    def attempt() -> None:
        t = _sample(hc, api, scenario, next(tries))
        ok_response(t, f"{scenario} stream")
        if _judge_stream(scenario, script, t, api, idle):
            hc.saw(catalog.OUTPUT_AFTER_CALL)

    return attempt


def _judge(hc: Session, api: str) -> None:
    """Held-back tool calls arrive after what the model generated later; a call with no reasoning or
    text after it proves nothing either way. While no scenario has exercised the rule, each is sampled
    again (up to --tries in all) until one does."""
    idle: list[str] = []
    for scenario in SCENARIOS:
        attempt = _attempt(hc, api, scenario, idle)
        if catalog.OUTPUT_AFTER_CALL in hc.exercised:
            attempt()  # exercised already: judge the shared stream, sample no more
        else:
            hc.until_taken((catalog.OUTPUT_AFTER_CALL,), attempt)
    if catalog.OUTPUT_AFTER_CALL not in hc.exercised:
        inconclusive(f"not exercised in {max(1, hc.endpoint.tries)} tries per scenario: no tool call was "
                     "followed by reasoning or text, so nothing could have been held back ("
                     + "; ".join(dict.fromkeys(idle)) + ")", cause="not-exercised")


@pytest.mark.check("AN-DISPATCH-001")
def test_anthropic_tool_block_closes_early(hc: Session) -> None:
    _judge(hc, "anthropic")


@pytest.mark.check("CH-DISPATCH-001")
def test_chat_tool_deltas_inline(hc: Session) -> None:
    _judge(hc, "chat")


@pytest.mark.check("RS-DISPATCH-001")
def test_responses_arguments_done_early(hc: Session) -> None:
    _judge(hc, "responses")


@pytest.mark.check("CH-DISPATCH-002")
def test_chat_tool_call_dispatch_frames(hc: Session) -> None:
    t = hc.stream("chat", SCENARIO)
    ok_response(t, f"{SCENARIO} stream")
    frames = [f for f in t.events if f.event == "tool_call_dispatch"]
    if not frames:
        if "tool-dispatch" in hc.endpoint.expect:
            fail("no tool_call_dispatch frame, though the endpoint is declared to offer it", transcript=t)
        skip("the endpoint sends no tool_call_dispatch frames (declare --expect tool-dispatch to require them)")
    api = apis.get("chat")
    traced = Reading.of(api, t).trace  # the dispatch frames fold without changing content
    streamed = {c.key: {"id": c.id, "name": c.name, "arguments": c.arguments}
                for c in api.tool_calls(traced.snapshot)}
    last_args_frame = {c.key: max(c.frames, default=-1) for c in traced.calls}
    completed = {c.key: c.ended for c in traced.calls}  # the frame where the model finished each call
    done_index = next((f.index for f in t.events if f.data == "[DONE]"), None)
    finish_index = next((f.index for f in t.events if f.event != "tool_call_dispatch" and _finish_reason(f.json)),
                        None)
    problems = Problems("CH-DISPATCH-002")
    seen: set[int] = set()
    for f in frames:
        data = f.json if isinstance(f.json, dict) else None
        call = (data or {}).get("tool_call") or {}
        index = call.get("index")
        if data is None or not isinstance(index, int) or data.get("choice_index") != 0 or \
                call.get("type") != "function" or not isinstance(call.get("function"), dict):
            problems.add(f"frame #{f.index}: a tool_call_dispatch frame is not {{choice_index, tool_call: {{index, "
                         "id, type, function}}", transcript=t)
            continue
        if index in seen:
            problems.add(f"tool_call_dispatch sent twice for call {index}", transcript=t)
        seen.add(index)
        want = streamed.get(index)
        fn = call["function"]
        if want is None or call.get("id") != want["id"] or fn.get("name") != want["name"] or \
                _value(fn.get("arguments")) != _value(want["arguments"]):
            problems.add(f"tool_call_dispatch for call {index} differs from the streamed call {want}", transcript=t)
        if f.index < last_args_frame.get(index, -1):
            problems.add(f"tool_call_dispatch for call {index} came before its arguments were complete", transcript=t)
        if done_index is not None and f.index > done_index:
            problems.add("tool_call_dispatch after data: [DONE]", transcript=t)
        elif finish_index is not None and f.index > finish_index:
            problems.add(f"tool_call_dispatch for call {index} (frame #{f.index}) came after the chunk carrying "
                         f"finish_reason (frame #{finish_index}): the turn was over before the call was dispatched",
                         transcript=t)
        elif index in completed and f.index > completed[index] + DISPATCH_SLACK:
            problems.add(f"tool_call_dispatch for call {index} (frame #{f.index}) came {f.index - completed[index]} "
                         f"frames after the call's last delta (frame #{completed[index]}); at most "
                         f"{DISPATCH_SLACK} allowed", transcript=t)
    if seen != set(streamed):
        problems.add(f"tool_call_dispatch frames for calls {sorted(seen)}, streamed calls {sorted(streamed)}",
                     transcript=t)
    problems.raise_if_any()


def _finish_reason(data: object) -> bool:
    """A Chat chunk that carries a finish_reason."""
    choices = data.get("choices") if isinstance(data, dict) else None
    return isinstance(choices, list) and any(isinstance(c, dict) and c.get("finish_reason") for c in choices)
