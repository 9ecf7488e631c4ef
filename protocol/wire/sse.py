"""Incremental Server-Sent Events decoder (WHATWG HTML "event stream interpretation").

``SSEDecoder.feed(chunk)`` takes network chunks as they arrive, split anywhere (inside a
multi-byte UTF-8 character, between CR and LF, inside the BOM) and returns the frames completed
by that chunk; ``flush()`` ends the stream. Decoding is byte-wise: lines are cut on CRLF, LF or CR
(none of which can occur inside a UTF-8 sequence), then each complete line is decoded, so a chunk
boundary never changes the result.

Unlike a browser, the decoder keeps everything for the transcript. Each ``SSEFrame`` has a
``kind``:

- ``"event"``: a dispatched event (a blank line ended a block that had ``data``);
- ``"comment"``: a line starting with ``:`` (e.g. keep-alive pings), never dispatched;
- ``"nodata"``: a block ended by a blank line but without any ``data`` field (not dispatched);
- ``"truncated"``: bytes left over when the stream ended without the final blank line (not
  dispatched, as the spec says, but recorded: a stream cut mid-frame is a bug worth showing).

Only ``kind == "event"`` frames are events; validators look at those alone.

Memory is bounded: a line, or a block of lines, larger than ``max_frame_bytes`` raises
``FrameTooLarge`` (the streaming client turns it into a failed transcript).

Hierarchy::

    WireError(Exception)
     └── FrameTooLarge
"""

from __future__ import annotations

from harnesscheck.errors import HarnesscheckError

import json as _json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "FrameKind",
    "FrameTooLarge",
    "SSEDecoder",
    "SSEFrame",
    "WireError",
    "decode_all",
]

DEFAULT_MAX_FRAME_BYTES = 8 * 1024 * 1024
_BOM = b"\xef\xbb\xbf"
_EOL = re.compile(rb"\r\n|\r|\n")

FrameKind = Literal["event", "comment", "nodata", "truncated"]


class WireError(HarnesscheckError):
    """Root of the wire layer's own errors."""


class FrameTooLarge(WireError):
    """A line or a frame grew beyond the decoder's limit."""

    def __init__(self, size: int, limit: int, what: str = "frame") -> None:
        super().__init__(f"SSE {what} exceeds {limit} bytes (at least {size} bytes buffered)")
        self.size = size
        self.limit = limit
        self.what = what


_NO_JSON = object()


@dataclass(frozen=True, slots=True, kw_only=True)
class SSEFrame:
    """One recorded piece of an event stream.

    ``data`` is the joined ``data`` lines (``"\\n"`` between them); ``json`` the parsed data (None
    when the data is not JSON, or not UTF-8, which JSON must be: then ``json_error`` says why,
    unless the data is ``[DONE]``, which sets ``done``). ``id`` is the stream's last event id at dispatch time (it persists across events,
    as the spec says); ``retry`` is set when this block carried a valid ``retry`` field. ``raw`` is
    the bytes of the frame as received. ``t_ns`` (arrival, monotonic ns from the request start) and
    ``chunk_index`` (which network read completed it) are stamped by the client.
    """

    index: int
    kind: FrameKind = "event"
    event: str | None = None
    data: str = ""
    id: str | None = None
    retry: int | None = None
    raw: bytes = b""
    json: Any = None
    json_error: str | None = None
    done: bool = False
    utf8_error: bool = False
    comment: str | None = None
    t_ns: int | None = None
    chunk_index: int | None = None

    @property
    def is_event(self) -> bool:
        return self.kind == "event"

    @classmethod
    def make(
        cls,
        data: Any,
        *,
        event: str | None = None,
        index: int = 0,
        t_ns: int | None = None,
        chunk_index: int | None = None,
    ) -> SSEFrame:
        """Build an event frame from data: a str is taken as is, anything else is JSON-encoded.

        For tests and for callers that synthesise frames; ``raw`` is rendered the way a server
        would write it.
        """
        text = data if isinstance(data, str) else _json.dumps(data, separators=(",", ":"))
        lines = [] if event is None else [f"event: {event}"]
        lines += [f"data: {line}" for line in text.split("\n")]
        raw = ("\n".join(lines) + "\n\n").encode("utf-8", "surrogatepass")
        parsed, err, done = _parse_data(text)
        return cls(
            index=index, kind="event", event=event, data=text, raw=raw, json=parsed,
            json_error=err, done=done, t_ns=t_ns, chunk_index=chunk_index,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (``raw`` as latin-1 text, which maps each byte to one code point)."""
        out: dict[str, Any] = {"index": self.index, "kind": self.kind}
        for name in ("event", "id", "retry", "comment", "t_ns", "chunk_index", "json_error"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.kind in ("event", "nodata", "truncated"):
            out["data"] = self.data
        if self.done:
            out["done"] = True
        if self.utf8_error:
            out["utf8_error"] = True
        out["raw"] = self.raw.decode("latin-1")
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SSEFrame:
        data = d.get("data", "")
        kind = d.get("kind", "event")
        utf8_error = bool(d.get("utf8_error", False))
        parsed, err, done = _parse_data(data, utf8_error) if kind == "event" else (None, None, False)
        return cls(
            index=d["index"], kind=kind, event=d.get("event"), data=data, id=d.get("id"),
            retry=d.get("retry"), raw=d.get("raw", "").encode("latin-1"), json=parsed,
            json_error=err if kind == "event" else d.get("json_error"), done=done,
            utf8_error=utf8_error, comment=d.get("comment"),
            t_ns=d.get("t_ns"), chunk_index=d.get("chunk_index"),
        )


def _parse_data(data: str, utf8_error: bool = False) -> tuple[Any, str | None, bool]:
    if data == "[DONE]":
        return None, None, True
    if utf8_error:  # JSON text must be UTF-8 (RFC 8259 section 8.1): bytes that are not make it invalid
        return None, "data is not valid UTF-8 (the bad bytes were decoded as U+FFFD)", False
    try:
        return _json.loads(data), None, False
    except (ValueError, RecursionError) as exc:
        return None, f"{type(exc).__name__}: {exc}", False


@dataclass(slots=True)
class _Block:
    raw: bytearray = field(default_factory=bytearray)
    event: str | None = None
    data: list[str] = field(default_factory=list)
    retry: int | None = None
    utf8_error: bool = False
    has_fields: bool = False


class SSEDecoder:
    """Incremental, spec-compliant SSE decoder. Not thread-safe; one per stream."""

    def __init__(self, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes <= 0:
            raise ValueError("max_frame_bytes must be positive")
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._scan = 0
        self._bom_checked = False
        self._block = _Block()
        self._last_id: str | None = None
        self._next_index = 0
        self._closed = False
        self.retry: int | None = None  # the stream's reconnection time, last valid value

    # -- public -------------------------------------------------------------------------
    def feed(self, chunk: bytes, *, t_ns: int | None = None, chunk_index: int | None = None) -> list[SSEFrame]:
        """Add received bytes; return the frames they complete (stamped with t_ns/chunk_index)."""
        if self._closed:
            raise WireError("feed() after flush()")
        self._buf += chunk
        if not self._bom_checked:
            if len(self._buf) < len(_BOM) and _BOM.startswith(bytes(self._buf)):
                return []  # could still be a BOM: wait for more
            if self._buf.startswith(_BOM):
                del self._buf[: len(_BOM)]
            self._bom_checked = True
        return self._drain(final=False, t_ns=t_ns, chunk_index=chunk_index)

    def flush(self, *, t_ns: int | None = None, chunk_index: int | None = None) -> list[SSEFrame]:
        """End of stream: settle a trailing CR, and record any incomplete block as "truncated"."""
        if self._closed:
            return []
        self._bom_checked = True
        frames = self._drain(final=True, t_ns=t_ns, chunk_index=chunk_index)
        self._closed = True
        block = self._block
        if self._buf or block.raw:
            raw = bytes(block.raw) + bytes(self._buf)
            pending = list(block.data)
            utf8_error = block.utf8_error
            if self._buf:  # an unterminated last line: show its text, it never became a field
                text, bad = _decode_line(bytes(self._buf))
                utf8_error = utf8_error or bad
                if text.startswith("data"):
                    pending.append(_field(text)[1])
            if raw.strip(b"\r\n"):
                frames.append(
                    SSEFrame(
                        index=self._take_index(), kind="truncated", event=block.event,
                        data="\n".join(pending), id=self._last_id, raw=raw,
                        json_error="stream ended inside a frame", utf8_error=utf8_error,
                        t_ns=t_ns, chunk_index=chunk_index,
                    )
                )
            self._buf.clear()
            self._block = _Block()
        return frames

    # -- internals ----------------------------------------------------------------------
    def _take_index(self) -> int:
        i = self._next_index
        self._next_index += 1
        return i

    def _drain(self, *, final: bool, t_ns: int | None, chunk_index: int | None) -> list[SSEFrame]:
        out: list[SSEFrame] = []
        buf = self._buf
        start = 0
        n = len(buf)
        scan = self._scan  # bytes before this offset hold no line end: never scan them twice
        self._scan = 0
        while start < n:
            m = _EOL.search(buf, max(start, scan))
            if m is None:
                self._scan = n - start
                break
            if m.group() == b"\r" and m.end() == n and not final:
                self._scan = m.start() - start
                break  # a CR at the very end: an LF may follow in the next chunk
            if m.start() - start > self.max_frame_bytes:
                raise FrameTooLarge(m.start() - start, self.max_frame_bytes, "line")
            line = bytes(buf[start : m.start()])
            raw_line = bytes(buf[start : m.end()])
            start = m.end()
            frame = self._line(line, raw_line, t_ns, chunk_index)
            if frame is not None:
                out.append(frame)
        if start:
            del buf[:start]
        if len(buf) > self.max_frame_bytes:
            raise FrameTooLarge(len(buf), self.max_frame_bytes, "line")
        if len(self._block.raw) + len(buf) > self.max_frame_bytes:
            raise FrameTooLarge(len(self._block.raw) + len(buf), self.max_frame_bytes, "frame")
        return out

    def _line(self, line: bytes, raw_line: bytes, t_ns: int | None, chunk_index: int | None) -> SSEFrame | None:
        block = self._block
        if not line:
            block.raw += raw_line
            return self._dispatch(t_ns, chunk_index)
        text, bad = _decode_line(line)
        if text.startswith(":"):
            return SSEFrame(
                index=self._take_index(), kind="comment", raw=raw_line, comment=text[1:].removeprefix(" "),
                id=self._last_id, utf8_error=bad, t_ns=t_ns, chunk_index=chunk_index,
            )
        block.raw += raw_line
        if len(block.raw) > self.max_frame_bytes:
            raise FrameTooLarge(len(block.raw), self.max_frame_bytes, "frame")
        block.utf8_error = block.utf8_error or bad
        block.has_fields = True
        name, value = _field(text)
        if name == "event":
            block.event = value
        elif name == "data":
            block.data.append(value)
        elif name == "id":
            if "\x00" not in value:
                self._last_id = value
        elif name == "retry":
            if value and value.isascii() and value.isdigit():
                block.retry = int(value)
                self.retry = block.retry
        return None

    def _dispatch(self, t_ns: int | None, chunk_index: int | None) -> SSEFrame | None:
        block = self._block
        if not block.has_fields:
            return None  # a stray blank line: its bytes stay with the next frame's raw
        self._block = _Block()
        if not block.data:
            return SSEFrame(
                index=self._take_index(), kind="nodata", event=block.event, id=self._last_id,
                retry=block.retry, raw=bytes(block.raw), utf8_error=block.utf8_error,
                t_ns=t_ns, chunk_index=chunk_index,
            )
        data = "\n".join(block.data)
        parsed, err, done = _parse_data(data, block.utf8_error)
        return SSEFrame(
            index=self._take_index(), kind="event", event=block.event, data=data, id=self._last_id,
            retry=block.retry, raw=bytes(block.raw), json=parsed, json_error=err, done=done,
            utf8_error=block.utf8_error, t_ns=t_ns, chunk_index=chunk_index,
        )


def _decode_line(line: bytes) -> tuple[str, bool]:
    try:
        return line.decode("utf-8"), False
    except UnicodeDecodeError:
        return line.decode("utf-8", "replace"), True


def _field(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep:
        return text, ""
    return name, value[1:] if value.startswith(" ") else value


def decode_all(data: bytes, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> list[SSEFrame]:
    """Decode a whole recorded stream at once (fixtures, replays)."""
    dec = SSEDecoder(max_frame_bytes=max_frame_bytes)
    return dec.feed(data) + dec.flush()
