"""A streamed case as a picture: which events arrived when, as inline SVG (no matplotlib: a report of
a 54-check run draws dozens of these and must build in seconds).

The input is a transcript as saved (`Transcript.to_json`, conformance/wire/transcript.py): frames
with `index`, `kind`, `event`, `data` and `t_ns` (ns from the request start), and `timings`.

- `analyse(transcript, focus=None) -> Timeline | None`: lanes (one per event type, in order of first
  arrival: Anthropic and Responses by event name, Chat by what a chunk carries), spans (content
  blocks, output items, Chat channels and tool calls, from first to last frame), and the markers a
  person looks for: response headers, the first token, each tool call's completion and dispatch
  frame, the finding's frame, the end of the stream. None when the exchange streamed no frame.
- `render_svg(timeline) -> str`: the chart (markers as labelled vertical lines over the lanes).

Each API's notion of a tool call's completion is the one `conformance/test_dispatch.py` judges by:
Anthropic the tool_use block's `content_block_stop`, Responses `function_call_arguments.done` (or the
item's `output_item.done`), Chat the call's last argument delta; its dispatch frame is Dynamo's
`tool_call_dispatch` side frame, where the endpoint sends one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from typing import Any

__all__ = ["Lane", "Marker", "Span", "Timeline", "analyse", "render_svg"]


@dataclass(slots=True)
class Lane:
    """One event type and the arrival times (ms) and frame indices of its frames."""

    label: str
    times: list[float] = field(default_factory=list)
    frames: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Marker:
    """A point in time worth a line: `kind` is headers, first-token, tool-complete, dispatch, finding
    or end; `frame` the frame that marks it (None for the response headers)."""

    kind: str
    label: str
    t_ms: float
    frame: int | None = None


@dataclass(slots=True)
class Span:
    """A content block, output item, channel or tool call: from its first to its last frame."""

    label: str
    start_ms: float
    end_ms: float
    closed: bool = True  # False when the stream never closed it (no stop / done frame)
    end_frame: int | None = None  # the last frame that touched it


@dataclass(slots=True)
class Timeline:
    api: str
    lanes: list[Lane]
    spans: list[Span]
    markers: list[Marker]
    end_ms: float  # the stream's last byte (or last frame)


def _json(frame: dict[str, Any]) -> dict[str, Any]:
    try:
        value = json.loads(frame.get("data") or "")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _ms(t_ns: Any) -> float | None:
    return None if t_ns is None else t_ns / 1e6


def _chat_label(frame: dict[str, Any], data: dict[str, Any]) -> str:
    """What a chat.completion.chunk carries, as a lane name."""
    if frame.get("event"):
        return str(frame["event"])
    if (frame.get("data") or "").strip() == "[DONE]":
        return "[DONE]"
    choices = data.get("choices") or []
    if not choices:
        return "usage chunk" if data.get("usage") else "empty chunk"
    parts = []
    for choice in choices:
        delta = choice.get("delta") or {} if isinstance(choice, dict) else {}
        for key in ("role", "reasoning_content", "reasoning", "content", "tool_calls"):
            if delta.get(key):
                parts.append(f"delta.{key}")
        if isinstance(choice, dict) and choice.get("finish_reason"):
            parts.append("finish_reason")
    return " + ".join(dict.fromkeys(parts)) or "empty delta"


def _named_label(frame: dict[str, Any], data: dict[str, Any]) -> str:
    """An Anthropic or Responses event as a lane name: its type (an Anthropic delta's kind beside it)."""
    name = str(frame.get("event") or data.get("type") or "(unnamed)")
    delta = data.get("delta")
    if name == "content_block_delta" and isinstance(delta, dict) and delta.get("type"):
        return f"{name} · {str(delta['type']).removesuffix('_delta')}"
    return name


def _label(api: str, frame: dict[str, Any], data: dict[str, Any]) -> str:
    kind = frame.get("kind", "event")
    if kind == "comment":
        return ": comment"
    if kind != "event":
        return f"[{kind}]"
    return _reading(api).label(frame, data)


_TOKEN_DELTAS = {"text_delta", "thinking_delta", "input_json_delta", "citations_delta"}
_RS_TOKEN_EVENTS = {"response.output_text.delta", "response.reasoning_text.delta",
                    "response.reasoning_summary_text.delta", "response.function_call_arguments.delta",
                    "response.refusal.delta"}


def _anthropic_token(data: dict[str, Any]) -> bool:
    delta = data.get("delta")
    return data.get("type") == "content_block_delta" and isinstance(delta, dict) and \
        delta.get("type") in _TOKEN_DELTAS


def _responses_token(data: dict[str, Any]) -> bool:
    return data.get("type") in _RS_TOKEN_EVENTS and bool(data.get("delta"))


def _chat_token(data: dict[str, Any]) -> bool:
    for choice in data.get("choices") or []:
        delta = (choice.get("delta") or {}) if isinstance(choice, dict) else {}
        if any(delta.get(k) for k in ("content", "reasoning_content", "reasoning", "tool_calls")):
            return True
    return False


class _Spans:
    """Open and closed spans by key, in order of opening."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.open: dict[Any, Span] = {}

    def touch(self, key: Any, label: str, t: float, frame: int) -> Span:
        span = self.open.get(key)
        if span is None:
            span = self.open[key] = Span(label, t, t, closed=False)
            self.spans.append(span)
        span.end_ms, span.end_frame = max(span.end_ms, t), frame
        return span

    def close(self, key: Any, t: float, frame: int) -> Span | None:
        span = self.open.pop(key, None)
        if span is not None:
            span.end_ms, span.end_frame, span.closed = max(span.end_ms, t), frame, True
        return span


def analyse(transcript: dict[str, Any], focus: int | None = None) -> Timeline | None:
    """The timeline of a streamed exchange; None when it carried no timed frame."""
    api = str(transcript.get("api") or "")
    frames = [f for f in transcript.get("frames") or [] if f.get("t_ns") is not None]
    if not frames:
        return None
    timings = transcript.get("timings") or {}
    reading = _reading(api)
    lanes: dict[str, Lane] = {}
    spans = _Spans()
    markers: list[Marker] = []
    headers = _ms(timings.get("headers_ns"))
    if headers is not None:
        markers.append(Marker("headers", "response headers", headers))
    first_token: Marker | None = None
    calls = _Calls()
    for f in frames:
        t = f["t_ns"] / 1e6
        data = _json(f) if f.get("kind", "event") == "event" else {}
        lane = lanes.setdefault(_label(api, f, data), Lane(_label(api, f, data)))
        lane.times.append(t)
        lane.frames.append(f["index"])
        if first_token is None and reading.is_token(data):
            first_token = Marker("first-token", "first token", t, f["index"])
            markers.append(first_token)
        done = reading.spans(f, data, t, spans, calls)
        if done is not None:
            markers.append(Marker("tool-complete", f"tool call {done} complete", t, f["index"]))
        if "dispatch" in str(f.get("event") or ""):
            call = (data.get("tool_call") or {}) if isinstance(data.get("tool_call"), dict) else {}
            fn = call.get("function")
            name = fn.get("name") if isinstance(fn, dict) else None
            markers.append(Marker("dispatch", f"dispatch {name or ''}".strip(), t, f["index"]))
    if reading.settle is not None:
        markers += reading.settle(spans, calls)
    events = [f for f in frames if f.get("kind", "event") == "event"]
    last = (events or frames)[-1]
    markers.append(Marker("end", "end of stream", last["t_ns"] / 1e6, last["index"]))
    if focus is not None:
        hit = next((f for f in frames if f["index"] == focus), None)
        if hit is not None:
            markers.append(Marker("finding", f"finding at #{focus}", hit["t_ns"] / 1e6, focus))
    end = max([_ms(timings.get("end_ns")) or 0.0, frames[-1]["t_ns"] / 1e6])
    markers.sort(key=lambda m: (m.t_ms, m.frame if m.frame is not None else -1))
    return Timeline(api, list(lanes.values()), spans.spans, markers, end)


class _Calls:
    """The tool calls seen, numbered in order of appearance, and which of them completed."""

    def __init__(self) -> None:
        self.names: dict[Any, str] = {}
        self.done: set[Any] = set()

    def add(self, key: Any, name: Any) -> str:
        if key not in self.names:
            self.names[key] = f"{len(self.names) + 1} ({name})"
        return self.names[key]

    def complete(self, key: Any) -> str | None:
        """The call's label the first time it completes; None for another frame or a repeat."""
        if key not in self.names or key in self.done:
            return None
        self.done.add(key)
        return self.names[key]


def _anthropic_spans(f: dict[str, Any], data: dict[str, Any], t: float, spans: _Spans, calls: _Calls) -> str | None:
    """Content blocks from start to stop; a tool_use block's call completes at its stop."""
    kind, n, index = data.get("type"), f["index"], data.get("index")
    if kind == "content_block_start":
        block = data.get("content_block") if isinstance(data.get("content_block"), dict) else {}
        name = block.get("name") if block.get("type") == "tool_use" else None
        label = f"block {index}: {block.get('type', '?')}" + (f" {name}" if name else "")
        spans.touch(("block", index), label, t, n)
        if block.get("type") == "tool_use":
            calls.add(("block", index), name)
    elif kind == "content_block_delta":
        if ("block", index) in spans.open:
            spans.touch(("block", index), "", t, n)
    elif kind == "content_block_stop":
        spans.close(("block", index), t, n)
        return calls.complete(("block", index))
    return None


def _responses_spans(f: dict[str, Any], data: dict[str, Any], t: float, spans: _Spans, calls: _Calls) -> str | None:
    """Output items from added to done; a function call completes at its arguments' done (or the item's)."""
    kind, n, oi = data.get("type"), f["index"], data.get("output_index")
    item = data.get("item") if isinstance(data.get("item"), dict) else {}
    if kind == "response.output_item.added":
        name = item.get("name") if item.get("type") == "function_call" else None
        label = f"item {oi}: {item.get('type', '?')}" + (f" {name}" if name else "")
        spans.touch(("item", oi), label, t, n)
        if item.get("type") == "function_call":
            calls.add(("item", oi), name)
    elif kind in ("response.function_call_arguments.done", "response.output_item.done"):
        if kind == "response.output_item.done":
            spans.close(("item", oi), t, n)
        elif ("item", oi) in spans.open:
            spans.touch(("item", oi), "", t, n)
        return calls.complete(("item", oi))
    elif ("item", oi) in spans.open:
        spans.touch(("item", oi), "", t, n)
    return None


def _chat_spans(f: dict[str, Any], data: dict[str, Any], t: float, spans: _Spans, calls: _Calls) -> str | None:
    """Reasoning and text channels and tool calls by index, each from its first to its last delta."""
    n = f["index"]
    for choice in data.get("choices") or []:
        delta = (choice.get("delta") or {}) if isinstance(choice, dict) else {}
        for key, channel in (("reasoning_content", "reasoning"), ("reasoning", "reasoning"),
                             ("content", "text")):
            if delta.get(key):
                spans.touch(("channel", channel), channel, t, n)
        for tc in delta.get("tool_calls") or []:
            if not isinstance(tc, dict):
                continue
            key = ("call", tc.get("index"))
            name = (tc.get("function") or {}).get("name") if isinstance(tc.get("function"), dict) else None
            spans.touch(key, f"tool call {calls.add(key, name)}", t, n)
    return None


def _chat_settle(spans: _Spans, calls: _Calls) -> list[Marker]:
    """A chat call is complete with its last argument delta, known only at the end; a chat stream has
    no closing frames, so its finish ends every channel."""
    markers = []
    for key in list(calls.names):
        span = spans.open.get(key)
        if span is not None and calls.complete(key):
            markers.append(Marker("tool-complete", f"tool call {calls.names[key]} complete", span.end_ms,
                                  span.end_frame))
    for span in spans.spans:
        span.closed = True
    return markers


@dataclass(frozen=True, slots=True)
class _Reading:
    """How the timeline reads one API's frames: a lane name per event frame, whether a frame carries a
    token, the spans a frame opens, extends or closes (the tool call it completes), and what only the
    end of the stream settles."""

    label: Callable[[dict[str, Any], dict[str, Any]], str]
    is_token: Callable[[dict[str, Any]], bool]
    spans: Callable[[dict[str, Any], dict[str, Any], float, _Spans, _Calls], str | None]
    settle: Callable[[_Spans, _Calls], list[Marker]] | None = None


_READINGS = {
    "anthropic": _Reading(_named_label, _anthropic_token, _anthropic_spans),
    "chat": _Reading(_chat_label, _chat_token, _chat_spans, _chat_settle),
    "responses": _Reading(_named_label, _responses_token, _responses_spans),
}
# An API the timeline does not know: lanes by event name, chunks read for Chat's tokens and channels.
_OTHER = _Reading(_named_label, _chat_token, _chat_spans)


def _reading(api: str) -> _Reading:
    return _READINGS.get(api, _OTHER)


# -- drawing ---------------------------------------------------------------------------------

_W = 1000  # viewBox width; the page scales it to its column
_LEFT = 250  # lane labels
_RIGHT = 24
_LANE = 17
_SPAN = 15
_LABEL_ROW = 14
_CHAR = 6.7  # width of an 11 px monospace character
_COLOURS = {"headers": "#64748b", "first-token": "#15803d", "tool-complete": "#c2410c", "dispatch": "#7e22ce",
            "finding": "#b91c1c", "end": "#1f2933"}
_LANE_CHARS = int((_LEFT - 20) / _CHAR)
_SPAN_FILL = {"thinking": "#ddd6fe", "reasoning": "#ddd6fe", "text": "#bfdbfe", "message": "#bfdbfe",
              "tool_use": "#fed7aa", "function_call": "#fed7aa", "tool": "#fed7aa"}


def _nice_step(span: float, target: int = 8) -> float:
    raw = max(span, 1e-9) / target
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _fmt_ms(t: float) -> str:
    return f"{t:.0f}" if abs(t) >= 10 or t == int(t) else f"{t:.1f}"


def _fill(label: str) -> str:
    for word, colour in _SPAN_FILL.items():
        if word in label:
            return colour
    return "#e2e8f0"


def _rows(items: list[tuple[float, float]]) -> list[int]:
    """Greedy packing: the row of each (x0, x1) interval so that none overlaps in a row."""
    ends: list[float] = []
    out = []
    for x0, x1 in items:
        row = next((r for r, e in enumerate(ends) if e <= x0), len(ends))
        if row == len(ends):
            ends.append(x1)
        else:
            ends[row] = x1
        out.append(row)
    return out


def render_svg(tl: Timeline, *, title: str = "") -> str:
    """The timeline as one `<svg class="timeline">` element (text escaped, no external references)."""
    span_ms = max(tl.end_ms, 1e-3)
    first = min((t for lane in tl.lanes for t in lane.times), default=0.0)
    lo = 0.0 if first <= 0.35 * span_ms else max(0.0, first - 0.06 * (span_ms - first))
    width = _W - _LEFT - _RIGHT

    def x(t: float) -> float:
        return _LEFT + (t - lo) / max(span_ms - lo, 1e-9) * width

    # marker labels above the plot, packed in rows so that none overlaps another
    texts = [f"{m.label} {_fmt_ms(m.t_ms)} ms" + (f" #{m.frame}" if m.frame is not None else "")
             for m in tl.markers]
    boxes = []
    for m, text in zip(tl.markers, texts):
        w = len(text) * _CHAR + 6
        x0 = x(m.t_ms) if x(m.t_ms) + w <= _W else x(m.t_ms) - w
        boxes.append((x0, x0 + w))
    order = sorted(range(len(boxes)), key=lambda i: boxes[i][0])
    packed = _rows([boxes[i] for i in order])
    label_row = {i: r for i, r in zip(order, packed)}
    n_label_rows = max(packed, default=-1) + 1
    top = 8 + n_label_rows * _LABEL_ROW + 4
    span_rows = _rows([(x(s.start_ms), max(x(s.end_ms), x(s.start_ms) + 3) + 2) for s in tl.spans])
    n_span_rows = max(span_rows, default=-1) + 1
    lanes_top = top + n_span_rows * _SPAN + (6 if n_span_rows else 0)
    plot_bottom = lanes_top + len(tl.lanes) * _LANE
    height = plot_bottom + 34

    out = [f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_W} {height}" '
           f'role="img" aria-label="{escape(title or "timeline of the stream")}" font-size="11" '
           f'font-family="ui-monospace, SFMono-Regular, Menlo, Consolas, monospace">']
    if title:
        out.append(f"<title>{escape(title)}</title>")
    # axis and grid
    step = _nice_step(span_ms - lo)
    tick = math.ceil(lo / step) * step
    while tick <= span_ms + 1e-9:
        tx = x(tick)
        out.append(f'<line x1="{tx:.1f}" y1="{top}" x2="{tx:.1f}" y2="{plot_bottom}" stroke="#eef1f4"/>')
        out.append(f'<text x="{tx:.1f}" y="{plot_bottom + 14}" text-anchor="middle" '
                   f'fill="#616e7c">{_fmt_ms(tick)}</text>')
        tick += step
    axis = "ms since the request was sent" + (f" (axis starts at {_fmt_ms(lo)} ms)" if lo > 0 else "")
    out.append(f'<text x="{_LEFT + width / 2:.0f}" y="{plot_bottom + 29}" text-anchor="middle" '
               f'fill="#616e7c">{escape(axis)}</text>')
    # spans
    if n_span_rows:
        out.append(f'<text x="{_LEFT - 8}" y="{top + 11}" text-anchor="end" fill="#616e7c">blocks</text>')
    for s, row in zip(tl.spans, span_rows):
        x0, x1 = x(s.start_ms), max(x(s.end_ms), x(s.start_ms) + 3)
        y = top + row * _SPAN
        dash = "" if s.closed else ' stroke-dasharray="3 2"'
        tip = f"{s.label}: {_fmt_ms(s.start_ms)}–{_fmt_ms(s.end_ms)} ms" + \
            ("" if s.closed else " (never closed)")
        out.append(f'<g><title>{escape(tip)}</title><rect x="{x0:.1f}" y="{y + 1}" width="{x1 - x0:.1f}" '
                   f'height="{_SPAN - 3}" rx="2" fill="{_fill(s.label)}" stroke="#475569" '
                   f'stroke-width="0.6"{dash}/>')
        if x1 - x0 > len(s.label) * _CHAR + 6:
            out.append(f'<text x="{x0 + 4:.1f}" y="{y + 11}" fill="#1f2933">{escape(s.label)}</text>')
        out.append("</g>")
    # lanes: one path of ticks per event type, one tick per pixel column
    for n, lane in enumerate(tl.lanes):
        y = lanes_top + n * _LANE
        if n % 2 == 0:
            out.append(f'<rect x="{_LEFT}" y="{y}" width="{width}" height="{_LANE}" fill="#f8fafc"/>')
        label = lane.label if len(lane.label) <= _LANE_CHARS else lane.label[:_LANE_CHARS - 1] + "…"
        tip = (f"{lane.label}: {len(lane.times)} frame(s), "
               f"{_fmt_ms(min(lane.times))}–{_fmt_ms(max(lane.times))} ms, first #{lane.frames[0]}")
        out.append(f'<g><title>{escape(tip)}</title><text x="{_LEFT - 8}" y="{y + 12}" text-anchor="end" '
                   f'fill="#1f2933">{escape(label)}</text></g>')
        cols = sorted({round(x(t) * 2) / 2 for t in lane.times})
        d = "".join(f"M{c:g} {y + 3}v{_LANE - 6}" for c in cols)
        out.append(f'<path d="{d}" stroke="#2563eb" stroke-width="1.6"><title>{escape(tip)}</title></path>')
    # markers
    for i, (m, text) in enumerate(zip(tl.markers, texts)):
        mx = x(m.t_ms)
        colour = _COLOURS.get(m.kind, "#1f2933")
        ly = 8 + label_row[i] * _LABEL_ROW + 10
        x0 = boxes[i][0]
        out.append(f'<g class="marker {m.kind}"><line x1="{mx:.1f}" y1="{ly + 2}" x2="{mx:.1f}" '
                   f'y2="{plot_bottom}" '
                   f'stroke="{colour}" stroke-width="1.2" stroke-dasharray="4 3"/>'
                   f'<text x="{x0 + 3:.1f}" y="{ly}" fill="{colour}">{escape(text)}</text></g>')
    out.append("</svg>")
    return "".join(out)
