"""A streamed case as a picture: which events arrived when, as inline SVG (no matplotlib: a report of
a 54-check run draws dozens of these and must build in seconds).

The input is a transcript as saved (`Transcript.to_json`, protocol/wire/transcript.py): frames
with `index`, `kind`, `event`, `data` and `t_ns` (ns from the request start), and `timings`.

- `analyse(transcript, focus=None) -> Timeline | None`: lanes (one per event type, in order of first
  arrival: Anthropic and Responses by event name, Chat by what a chunk carries), spans (content
  blocks, output items, Chat channels and tool calls, from first to last frame), and the markers a
  person looks for: response headers, the first token, each tool call's completion and dispatch
  frame, the finding's frame, the end of the stream. None when the exchange streamed no frame.
- `render_svg(timeline) -> str`: the chart (markers as labelled vertical lines over the lanes).

The stream is read once, with its API's fold (`protocol.apis.base.trace`): the parts each frame
placed something in and closed (spans), the words (the first token: the API's `is_content`), and each
tool call's frames and the frame where the model finished it, the one `conformance/test_dispatch.py`
judges by (Anthropic the block's `content_block_stop`, Responses `function_call_arguments.done` or the
item's `output_item.done`, Chat the call's last delta); its dispatch frame is Dynamo's
`tool_call_dispatch` side frame, where the endpoint sends one. An API the kit does not know gets lanes
and the end of the stream only.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from html import escape
from typing import Any

from harnesscheck.protocol import apis
from harnesscheck.protocol.apis.base import trace

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


def _label(frame: dict[str, Any], data: dict[str, Any]) -> str:
    """A frame's lane: an event with a `type` (Anthropic, Responses) by it, a chunk by what it carries."""
    kind = frame.get("kind", "event")
    if kind == "comment":
        return ": comment"
    if kind != "event":
        return f"[{kind}]"
    return _named_label(frame, data) if isinstance(data.get("type"), str) else _chat_label(frame, data)


def analyse(transcript: dict[str, Any], focus: int | None = None) -> Timeline | None:
    """The timeline of a streamed exchange; None when it carried no timed frame."""
    frames = [f for f in transcript.get("frames") or [] if f.get("t_ns") is not None]
    if not frames:
        return None
    api = str(transcript.get("api") or "")
    timings = transcript.get("timings") or {}
    lanes: dict[str, Lane] = {}
    markers: list[Marker] = []
    headers = _ms(timings.get("headers_ns"))
    if headers is not None:
        markers.append(Marker("headers", "response headers", headers))
    times: dict[int, float] = {}
    events: list[tuple[int, dict[str, Any]]] = []
    for f in frames:
        t = times[f["index"]] = f["t_ns"] / 1e6
        data = _json(f) if f.get("kind", "event") == "event" else {}
        if data:
            events.append((f["index"], data))
        label = _label(f, data)
        lane = lanes.setdefault(label, Lane(label))
        lane.times.append(t)
        lane.frames.append(f["index"])
        if "dispatch" in str(f.get("event") or ""):
            call = (data.get("tool_call") or {}) if isinstance(data.get("tool_call"), dict) else {}
            fn = call.get("function")
            name = fn.get("name") if isinstance(fn, dict) else None
            markers.append(Marker("dispatch", f"dispatch {name or ''}".strip(), t, f["index"]))
    module = apis.APIS.get(api)
    spans: list[Span] = []
    if module is not None:
        markers += _read(module, events, times, spans)
    last = ([f for f in frames if f.get("kind", "event") == "event"] or frames)[-1]
    markers.append(Marker("end", "end of stream", last["t_ns"] / 1e6, last["index"]))
    if focus is not None and focus in times:
        markers.append(Marker("finding", f"finding at #{focus}", times[focus], focus))
    end = max([_ms(timings.get("end_ns")) or 0.0, frames[-1]["t_ns"] / 1e6])
    markers.sort(key=lambda m: (m.t_ms, m.frame if m.frame is not None else -1))
    return Timeline(api, list(lanes.values()), spans, markers, end)


def _read(module: Any, events: list[tuple[int, dict[str, Any]]], times: dict[int, float],
          spans: list[Span]) -> list[Marker]:
    """Read the stream with its API's fold: the first token, the spans of the parts (from the first frame
    placed in a part to the frame that closed it), and each tool call's completion (the frame where the
    model finished it, once the API's rule made it complete)."""
    markers: list[Marker] = []
    first = next((n for n, data in events if module.is_content(data)), None)
    if first is not None:
        markers.append(Marker("first-token", "first token", times[first], first))
    traced = trace(module, events)
    numbers = {call.key: f"{k} ({call.name})" for k, call in enumerate(traced.calls, start=1)}
    open_: dict[Any, Span] = {}
    seen: set[Any] = set()
    for n, parts, closed in traced.placed:
        t = times[n]
        for key in parts:
            span = open_.get(key)
            if span is not None:
                span.end_ms, span.end_frame = max(span.end_ms, t), n
            elif key not in seen:  # a closed part is not opened again
                seen.add(key)
                label = traced.names.get(key) or f"tool call {numbers.get(key, '?')}"
                span = open_[key] = Span(label, t, t, closed=False, end_frame=n)
                spans.append(span)
        for key in closed:  # a frame that closes a part without carrying it (Chat's finish) does not extend it
            span = open_.pop(key, None)
            if span is not None:
                span.closed = True
    for call in traced.calls:
        if call.complete is not None:
            at = call.ended
            markers.append(Marker("tool-complete", f"tool call {numbers[call.key]} complete", times[at], at))
    return markers


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
    power: float = 10.0 ** math.floor(math.log10(raw))
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
