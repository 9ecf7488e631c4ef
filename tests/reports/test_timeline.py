"""reports.timeline on streams written by hand: the first article's stream (message_start at 1 ms, a
thinking block 82-602 ms, a text block to 800 ms, a tool_use block at 800 ms, message_stop at
814 ms), a Chat stream with Dynamo's tool_call_dispatch frames, a Responses stream, and the SVG."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

from harnesscheck.reports.timeline import analyse, render_svg


def _frame(index: int, t_ms: float, event: str | None, data: Any, kind: str = "event") -> dict[str, Any]:
    return {"index": index, "kind": kind, "event": event, "t_ns": round(t_ms * 1e6),
            "data": data if isinstance(data, str) else json.dumps(data)}


def article() -> dict[str, Any]:
    """The first article's timing table as a transcript (~70 thinking deltas between 82 and 602 ms)."""
    fs: list[dict[str, Any]] = []

    def add(t: float, event: str, data: dict[str, Any]) -> None:
        fs.append(_frame(len(fs), t, event, {"type": event, **data}))

    add(1, "message_start", {"message": {"role": "assistant", "content": []}})
    add(82, "content_block_start", {"index": 0, "content_block": {"type": "thinking", "thinking": ""}})
    for k in range(70):
        add(82 + k * 7.5, "content_block_delta",
            {"index": 0, "delta": {"type": "thinking_delta", "thinking": "t"}})
    add(602, "content_block_stop", {"index": 0})
    add(602, "content_block_start", {"index": 1, "content_block": {"type": "text", "text": ""}})
    add(602, "content_block_delta", {"index": 1, "delta": {"type": "text_delta", "text": "\n\n"}})
    add(800, "content_block_stop", {"index": 1})
    add(800, "content_block_start", {"index": 2, "content_block": {"type": "tool_use", "name": "calculator"}})
    add(800, "content_block_delta", {"index": 2, "delta": {"type": "input_json_delta",
                                                           "partial_json": '{"expression": "15 * 23"}'}})
    add(800, "content_block_stop", {"index": 2})
    add(814, "message_delta", {"delta": {"stop_reason": "tool_use"}})
    add(814, "message_stop", {})
    return {"api": "anthropic", "frames": fs, "timings": {"headers_ns": 600_000, "end_ns": 815_000_000}}


def _marks(tl: Any) -> list[tuple[str, str, float, int | None]]:
    return [(m.kind, m.label, round(m.t_ms, 3), m.frame) for m in tl.markers]


def test_the_articles_stream_as_a_timeline() -> None:
    tl = analyse(article())
    assert _marks(tl) == [
        ("headers", "response headers", 0.6, None),
        ("first-token", "first token", 82.0, 2),
        ("tool-complete", "tool call 1 (calculator) complete", 800.0, 78),
        ("end", "end of stream", 814.0, 80),
    ]
    assert [(s.label, s.start_ms, s.end_ms, s.closed) for s in tl.spans] == [
        ("block 0: thinking", 82.0, 602.0, True), ("block 1: text", 602.0, 800.0, True),
        ("block 2: tool_use calculator", 800.0, 800.0, True)]
    assert [lane.label for lane in tl.lanes] == [
        "message_start", "content_block_start", "content_block_delta · thinking", "content_block_stop",
        "content_block_delta · text", "content_block_delta · input_json", "message_delta", "message_stop"]
    thinking = tl.lanes[2]
    assert len(thinking.times) == 70 and thinking.times[0] == 82.0 and thinking.frames[0] == 2
    assert tl.end_ms == 815.0


def test_a_block_never_stopped_and_the_findings_frame() -> None:
    doc = article()
    doc["frames"] = [f for f in doc["frames"] if f["index"] != 72]  # the thinking block's stop
    tl = analyse(doc, focus=73)
    assert [(s.label, s.closed) for s in tl.spans][0] == ("block 0: thinking", False)
    assert ("finding", "finding at #73", 602.0, 73) in _marks(tl)


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def test_chat_tool_calls_complete_with_their_last_delta_and_dispatch_frames() -> None:
    call = lambda i, **fn: {"tool_calls": [{"index": i, "function": fn}]}  # noqa: E731
    fs = [
        _frame(0, 5, None, _chunk({"role": "assistant"})),
        _frame(1, 10, None, _chunk({"reasoning_content": "think"})),
        _frame(2, 20, None, _chunk(call(0, name="Read", arguments=""))),
        _frame(3, 21, None, _chunk(call(0, arguments='{"path": "a"}'))),
        _frame(4, 21, "tool_call_dispatch", {"tool_call": {"index": 0, "function": {"name": "Read"}}}),
        _frame(5, 30, None, _chunk({"content": "and"})),
        _frame(6, 40, None, _chunk(call(1, name="Grep", arguments='{"q": 1}'))),
        _frame(7, 41, "tool_call_dispatch", {"tool_call": {"index": 1, "function": {"name": "Grep"}}}),
        _frame(8, 50, None, _chunk({}, finish="tool_calls")),
        _frame(9, 51, None, "[DONE]"),
    ]
    tl = analyse({"api": "chat", "frames": fs, "timings": {"headers_ns": 4_000_000, "end_ns": 52_000_000}})
    assert _marks(tl) == [
        ("headers", "response headers", 4.0, None),
        ("first-token", "first token", 10.0, 1),
        ("tool-complete", "tool call 1 (Read) complete", 21.0, 3),
        ("dispatch", "dispatch Read", 21.0, 4),
        ("tool-complete", "tool call 2 (Grep) complete", 40.0, 6),
        ("dispatch", "dispatch Grep", 41.0, 7),
        ("end", "end of stream", 51.0, 9),
    ]
    assert [lane.label for lane in tl.lanes] == [
        "delta.role", "delta.reasoning_content", "delta.tool_calls", "tool_call_dispatch", "delta.content",
        "finish_reason", "[DONE]"]


def test_responses_function_call_completes_at_arguments_done() -> None:
    def ev(i: int, t: float, name: str, **data: Any) -> dict[str, Any]:
        return _frame(i, t, name, {"type": name, **data})

    fs = [ev(0, 2, "response.created"),
          ev(1, 3, "response.output_item.added", output_index=0,
             item={"type": "function_call", "name": "Bash"}),
          ev(2, 9, "response.function_call_arguments.delta", output_index=0, delta='{"cmd"'),
          ev(3, 12, "response.function_call_arguments.done", output_index=0, arguments='{"cmd": 1}'),
          ev(4, 13, "response.output_item.done", output_index=0, item={"type": "function_call"}),
          ev(5, 20, "response.completed")]
    tl = analyse({"api": "responses", "frames": fs, "timings": {}})
    assert _marks(tl) == [("first-token", "first token", 9.0, 2),
                          ("tool-complete", "tool call 1 (Bash) complete", 12.0, 3),
                          ("end", "end of stream", 20.0, 5)]
    assert [(s.label, s.start_ms, s.end_ms) for s in tl.spans] == [("item 0: function_call Bash", 3.0, 13.0)]


def test_no_frames_no_timeline() -> None:
    assert analyse({"api": "anthropic", "frames": [], "timings": {"end_ns": 1}}) is None


def test_svg_is_well_formed_and_says_what_it_shows() -> None:
    doc = article()
    doc["frames"][0]["data"] = json.dumps({"type": "message_start", "x": "</svg><script>",
                                           "message": {"role": "assistant", "content": []}})
    svg = render_svg(analyse(doc), title='AN-STREAM-001 <"anthropic">')
    root = ET.fromstring(svg)  # parses: every text escaped
    assert root.tag.endswith("svg") and root.get("class") == "timeline"
    texts = ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]
    for label in ("first token 82 ms #2", "tool call 1 (calculator) complete 800 ms #78",
                  "end of stream 814 ms #80",
                  "block 0: thinking", "message_stop", "0", "200", "400", "600", "800"):
        assert label in texts, label
    assert "<script" not in svg
