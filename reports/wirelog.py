"""The numbered wire log of one case, as Autobahn|Testsuite's case pages show it: the request, the
response status and headers, then every frame with its number, arrival time and what it carried.

A case's transcript is the file results.json names (`transcript`, a `Transcript.to_json` document,
protocol/wire/transcript.py); a run keeps one for every check within its size budget, or only
for the failing ones, and says why one was left out (`transcript_left_out`).

- `load(check, base) -> Loaded`: the transcript of a results entry read from `base` (the folder its
  path is relative to), or why there is none.
- `wire_log(transcript, focus=None) -> WireLog`: the rows to show; a long stream shows its head,
  the frames around `focus` (the finding's frame) and its tail, saying how many were left out.
  `focus` is the row of the finding's frame (the report highlights it, scrolls the log to it and
  shows it beside the finding).

A frame's data that is a JSON object is shown with the keys that hold the same value in every frame
of the stream (a Chat chunk's `id`, `object`, `created`, `model`) after the others, so the part that
changes from frame to frame (`choices`) is what a row shows first; only when the text is plain JSON
that re-serialises to itself (the same bytes, keys aside), so nothing but the key order differs from
the wire. `WireLog.constant_keys` names the keys moved.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Loaded", "Row", "WireLog", "load", "wire_log"]

MAX_ROWS = 400  # a longer stream shows HEAD + the frames around the finding + TAIL
HEAD, AROUND, TAIL = 150, 25, 100
MAX_DATA = 600  # characters of a frame's data shown (the transcript file has the rest)
MAX_BODY = 6000  # characters of a request or response body shown


@dataclass(frozen=True, slots=True)
class Loaded:
    """A case's transcript (`doc`) or the sentence saying why it cannot be shown (`missing`)."""

    doc: dict[str, Any] | None
    missing: str = ""


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the log: a frame, or a gap (`gap` frames not shown) when `index` is None."""

    index: int | None
    t_ms: float | None = None
    dt_ms: float | None = None  # since the previous frame
    chunk: int | None = None
    kind: str = "event"
    event: str = ""
    data: str = ""
    clipped: int = 0  # characters of data not shown
    focus: bool = False
    gap: int = 0


@dataclass(slots=True)
class WireLog:
    request_line: str
    status: str
    request_headers: list[tuple[str, str]]
    request_body: str
    response_headers: list[tuple[str, str]]
    rows: list[Row] = field(default_factory=list)
    frames: int = 0
    body: str = ""  # a response that was not a stream
    error: str = ""
    times: dict[str, float | None] = field(default_factory=dict)
    focus: Row | None = None  # the finding's frame, when the log shows it
    # per event name ("" for unnamed events), the keys shown last in each frame's data (module doc)
    constant_keys: dict[str, list[str]] = field(default_factory=dict)


def load(check: dict[str, Any], base: Path | None) -> Loaded:
    """Read the transcript a results entry names; `base` is the folder its path is relative to."""
    path = check.get("transcript")
    if not path:
        why = check.get("transcript_left_out")
        return Loaded(None, f"Transcript not kept: {why}." if why else
                      "Transcript not kept (this run kept transcripts for failing checks only).")
    if base is None or "://" in path:
        return Loaded(None, f"Transcript not read: {path}")
    full = Path(path) if os.path.isabs(path) else base / path
    try:
        doc = json.loads(full.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Loaded(None, f"Transcript file {path} not found beside the report.")
    except (OSError, ValueError) as exc:
        return Loaded(None, f"Transcript file {path} could not be read: {exc}")
    if not isinstance(doc, dict) or "frames" not in doc:
        return Loaded(None, f"Transcript file {path} is not a transcript.")
    return Loaded(doc)


def _clip(text: str, limit: int) -> tuple[str, int]:
    return (text, 0) if len(text) <= limit else (text[:limit], len(text) - limit)


def _pretty(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=1, ensure_ascii=False)


_SEPARATORS = ((",", ":"), (", ", ": "))  # compact, and Python's default


def _json_object(text: str) -> tuple[dict[str, Any], tuple[str, str], bool] | None:
    """`text` as a JSON object, the separators it was written with and whether non-ASCII characters
    were escaped, when re-serialising it so gives back `text` exactly (a reordered copy then differs
    from the wire in key order only); else None."""
    if not text.startswith("{"):
        return None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    for seps in _SEPARATORS:
        for ascii_only in (False, True):
            try:
                if json.dumps(obj, separators=seps, ensure_ascii=ascii_only) == text:
                    return obj, seps, ascii_only
            except (ValueError, RecursionError):
                return None
    return None


def _constant_keys(frames: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Per event name (`""` for unnamed events), the top-level keys that hold one and the same scalar
    value in every event frame of that name whose data is a JSON object, when there are at least two
    such frames (module doc)."""
    seen: dict[str, dict[str, Any]] = {}
    count: dict[str, int] = {}
    for f in frames:
        if f.get("kind", "event") != "event":
            continue
        parsed = _json_object(str(f.get("data") or ""))
        if parsed is None:
            continue
        obj, name = parsed[0], str(f.get("event") or "")
        count[name] = count.get(name, 0) + 1
        if count[name] == 1:
            seen[name] = {k: v for k, v in obj.items() if isinstance(v, (str, int, float, bool)) or v is None}
        else:
            seen[name] = {k: v for k, v in seen[name].items()
                          if k in obj and obj[k] == v and type(obj[k]) is type(v)}
    return {name: list(keys) for name, keys in seen.items() if keys and count[name] >= 2}


def _reordered(text: str, constant: list[str]) -> str:
    parsed = _json_object(text) if constant else None
    if parsed is None:
        return text
    obj, seps, ascii_only = parsed
    if not any(k in obj for k in constant):
        return text
    first = {k: v for k, v in obj.items() if k not in constant}
    last = {k: obj[k] for k in constant if k in obj}
    return json.dumps(first | last, separators=seps, ensure_ascii=ascii_only)


def _row(f: dict[str, Any], prev_t: float | None, focus: int | None,
         constant: dict[str, list[str]] | None = None) -> Row:
    t = None if f.get("t_ns") is None else f["t_ns"] / 1e6
    kind = f.get("kind", "event")
    if kind == "comment":
        text = ":" + str(f.get("comment") or "")
    elif kind == "event":
        text = _reordered(str(f.get("data") or ""), (constant or {}).get(str(f.get("event") or ""), []))
    else:
        text = (f.get("raw") or "").encode("latin-1", "replace").decode("utf-8", "replace")
    shown, clipped = _clip(text, MAX_DATA)
    return Row(index=f.get("index"), t_ms=t, dt_ms=None if t is None or prev_t is None else t - prev_t,
               chunk=f.get("chunk_index"), kind=kind, event=str(f.get("event") or ""), data=shown,
               clipped=clipped, focus=focus is not None and f.get("index") == focus)


def _shown(n: int, focus_pos: int | None) -> list[range]:
    """Which positions of n frames to show, as ranges in order."""
    if n <= MAX_ROWS:
        return [range(n)]
    keep = set(range(HEAD)) | set(range(n - TAIL, n))
    if focus_pos is not None:
        keep |= set(range(max(0, focus_pos - AROUND), min(n, focus_pos + AROUND + 1)))
    out: list[range] = []
    for p in sorted(keep):
        if out and out[-1].stop == p:
            out[-1] = range(out[-1].start, p + 1)
        else:
            out.append(range(p, p + 1))
    return out


def wire_log(t: dict[str, Any], focus: int | None = None) -> WireLog:
    """The rows of a transcript's log: every frame of a short stream; head, focus and tail of a long one."""
    frames = list(t.get("frames") or [])
    status = t.get("status")
    timings = t.get("timings") or {}
    body = t.get("body") or {}
    body_text = body.get("text", "(binary body)") if isinstance(body, dict) else ""
    try:
        body_text = json.dumps(json.loads(body_text), indent=1, ensure_ascii=False) if body_text else ""
    except ValueError:
        pass
    shown_body, cut = _clip(body_text, MAX_BODY)
    request, rcut = _clip(_pretty(t.get("request_body")), MAX_BODY)
    log = WireLog(
        request_line=f"{t.get('method', '?')} {t.get('url', '?')}",
        status="no response" if status is None else str(status),
        request_headers=sorted((str(k), str(v)) for k, v in (t.get("request_headers") or {}).items()),
        request_body=request + (f"\n… {rcut} more characters in the transcript file" if rcut else ""),
        response_headers=sorted((str(k), str(v)) for k, v in (t.get("response_headers") or {}).items()),
        frames=len(frames),
        body=shown_body + (f"\n… {cut} more characters in the transcript file" if cut else ""),
        error=f"{t.get('error_kind') or 'error'}: {t['error']}" if t.get("error") else "",
        times={k: None if timings.get(k) is None else timings[k] / 1e6
               for k in ("headers_ns", "first_frame_ns", "end_ns")},
    )
    positions = {f.get("index"): p for p, f in enumerate(frames)}
    log.constant_keys = _constant_keys(frames)
    prev_stop = 0
    for block in _shown(len(frames), positions.get(focus)):
        if block.start > prev_stop:
            log.rows.append(Row(index=None, gap=block.start - prev_stop))
        for p in block:
            f = frames[p]
            prev = frames[p - 1].get("t_ns") if p > 0 else None
            row = _row(f, None if prev is None else prev / 1e6, focus, log.constant_keys)
            log.rows.append(row)
            if row.focus:
                log.focus = row
        prev_stop = block.stop
    return log
