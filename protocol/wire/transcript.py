"""A timed record of one HTTP exchange: the request, the response and every SSE frame.

The streaming clients (``client.py``) build a ``Transcript``; checks judge it; reports save it
(``to_json()``) and show the frames around an offending one (``excerpt()``). Secrets are redacted
before anything is stored here. Times are monotonic nanoseconds relative to the request start.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from .sse import SSEFrame

__all__ = ["Chunk", "Timings", "Transcript", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class Chunk:
    """One network read: its index, arrival time (ns from the request start) and size."""

    index: int
    t_ns: int
    size: int


@dataclass(slots=True)
class Timings:
    """``started_at``: wall clock (unix seconds); ``start_ns``: absolute monotonic ns at the start;
    the rest: ns from the start, None when that point was never reached."""

    started_at: float = 0.0
    start_ns: int = 0
    headers_ns: int | None = None
    first_frame_ns: int | None = None
    end_ns: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "started_at": self.started_at,
            "start_ns": self.start_ns,
            "headers_ns": self.headers_ns,
            "first_frame_ns": self.first_frame_ns,
            "end_ns": self.end_ns,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Timings:
        return cls(
            started_at=d.get("started_at", 0.0), start_ns=d.get("start_ns", 0),
            headers_ns=d.get("headers_ns"), first_frame_ns=d.get("first_frame_ns"), end_ns=d.get("end_ns"),
        )


@dataclass(slots=True, kw_only=True)
class Transcript:
    """One exchange. ``error`` is set when the exchange did not end cleanly (timeout, deadline,
    reset, oversize frame, wrong content type ...); ``error_kind`` names the class of it."""

    api: str
    method: str
    url: str
    request_headers: dict[str, str] = field(default_factory=dict)
    request_body: Any = None
    status: int | None = None
    response_headers: dict[str, str] = field(default_factory=dict)
    frames: list[SSEFrame] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)
    body: bytes | None = None
    error: str | None = None
    error_kind: str | None = None
    timings: Timings = field(default_factory=Timings)
    # the stream as each API's fold read it (protocol.apis.base.Reading, by API name): the one fold every
    # reader shares; not part of the record
    readings: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    # -- views --------------------------------------------------------------------------
    @property
    def events(self) -> list[SSEFrame]:
        """The dispatched event frames (no comments, no truncated tail)."""
        return [f for f in self.frames if f.kind == "event"]

    @property
    def ok(self) -> bool:
        return self.error is None and self.status is not None and 200 <= self.status < 300

    @property
    def content_type(self) -> str:
        for k, v in self.response_headers.items():
            if k.lower() == "content-type":
                return v
        return ""

    @property
    def truncated(self) -> bool:
        """True when the stream ended inside a frame."""
        return any(f.kind == "truncated" for f in self.frames)

    def json_body(self) -> Any:
        """The non-stream body parsed as JSON, or None when absent or not JSON."""
        if not self.body:
            return None
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def text_body(self) -> str:
        return (self.body or b"").decode("utf-8", "replace")

    # -- (de)serialisation ---------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] | None = None
        if self.body is not None:
            body = {"b64": base64.b64encode(self.body).decode("ascii")}
            try:
                body["text"] = self.body.decode("utf-8")
            except UnicodeDecodeError:
                pass
        return {
            "schema": SCHEMA_VERSION,
            "api": self.api,
            "method": self.method,
            "url": self.url,
            "request_headers": dict(self.request_headers),
            "request_body": self.request_body,
            "status": self.status,
            "response_headers": dict(self.response_headers),
            "frames": [f.to_dict() for f in self.frames],
            "chunks": [[c.index, c.t_ns, c.size] for c in self.chunks],
            "body": body,
            "error": self.error,
            "error_kind": self.error_kind,
            "timings": self.timings.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Transcript:
        body = d.get("body")
        return cls(
            api=d["api"], method=d["method"], url=d["url"],
            request_headers=dict(d.get("request_headers") or {}), request_body=d.get("request_body"),
            status=d.get("status"), response_headers=dict(d.get("response_headers") or {}),
            frames=[SSEFrame.from_dict(f) for f in d.get("frames") or []],
            chunks=[Chunk(*c) for c in d.get("chunks") or []],
            body=None if body is None else base64.b64decode(body["b64"]),
            error=d.get("error"), error_kind=d.get("error_kind"),
            timings=Timings.from_dict(d.get("timings") or {}),
        )

    def to_json(self, *, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> Transcript:
        return cls.from_dict(json.loads(text))

    # -- rendering ----------------------------------------------------------------------
    def excerpt(self, frame_index: int | None, context: int = 3, *, width: int = 160) -> str:
        """The frames around ``frame_index`` (``>>`` marks it) with arrival times in ms.

        ``frame_index=None`` shows the tail of the stream (for findings about a missing end).
        """
        head = f"{self.method} {self.url} -> {self.status if self.status is not None else 'no response'}"
        lines = [head]
        if not self.frames:
            lines.append("  (no frames)")
        else:
            positions = {f.index: i for i, f in enumerate(self.frames)}
            if frame_index is None or frame_index not in positions:
                centre = len(self.frames) - 1
            else:
                centre = positions[frame_index]
            lo = max(0, centre - context)
            hi = min(len(self.frames), centre + context + 1)
            if lo > 0:
                lines.append(f"     ... {lo} earlier frame(s)")
            for f in self.frames[lo:hi]:
                mark = ">>" if frame_index is not None and f.index == frame_index else "  "
                lines.append(f"{mark} {_render_frame(f, width)}")
            if hi < len(self.frames):
                lines.append(f"     ... {len(self.frames) - hi} later frame(s)")
        if self.error:
            lines.append(f"  error ({self.error_kind or 'error'}): {self.error}")
        return "\n".join(lines)


def _render_frame(f: SSEFrame, width: int) -> str:
    t = "      ?    " if f.t_ns is None else f"{f.t_ns / 1e6:10.1f}"
    prefix = f"#{f.index:<4} {t} ms "
    if f.kind == "comment":
        body = f": {f.comment}"
    elif f.kind == "event":
        body = (f"event: {f.event}  " if f.event is not None else "") + f"data: {f.data}"
    else:
        body = f"[{f.kind}] " + f.raw.decode("utf-8", "replace")
    body = body.replace("\r", "\\r").replace("\n", "\\n")
    if len(body) > width:
        body = body[: width - 3] + "..."
    return prefix + body
