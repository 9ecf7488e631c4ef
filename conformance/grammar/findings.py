"""Violations as data: a ``Finding`` names the grammar rule broken, the frame, and what was seen.

Validators return findings and never raise on what a server sent. ``frames_and_request`` lets
every validator take either a ``Transcript`` or a plain list of ``SSEFrame``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from conformance.wire.sse import SSEFrame
from conformance.wire.transcript import Transcript

__all__ = ["Finding", "Source", "frames_and_request", "rules_of", "short"]

Source = Transcript | Sequence[SSEFrame]


@dataclass(frozen=True, slots=True)
class Finding:
    """One violation. ``rule`` is a grammar rule id (e.g. ``AN-GRAMMAR-ORDER``); ``frame_index``
    is the ``SSEFrame.index`` of the offending frame, or None for a missing thing at the end."""

    rule: str
    frame_index: int | None
    message: str
    observed: str | None = None
    expected: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        where = "end of stream" if self.frame_index is None else f"frame #{self.frame_index}"
        text = f"{self.rule} at {where}: {self.message}"
        if self.observed is not None:
            text += f" (observed {self.observed}"
            text += f"; expected {self.expected})" if self.expected is not None else ")"
        elif self.expected is not None:
            text += f" (expected {self.expected})"
        return text


def frames_and_request(source: Any, request: Any = None) -> tuple[list[SSEFrame], Any]:
    """The frames of a Transcript (and its request body, unless one is given) or of a frame list.

    Anything else yields no frames: a validator never raises on its input."""
    if isinstance(source, Transcript):
        return list(source.frames), request if request is not None else source.request_body
    if isinstance(source, Iterable) and not isinstance(source, str | bytes | dict):
        return [f for f in source if isinstance(f, SSEFrame)], request
    return [], request


def fold(source: Any, accumulate: Any) -> dict[str, Any] | None:
    """Fold a stream's JSON events with an API's pure `accumulate(event, snapshot)`."""
    frames, _ = frames_and_request(source)
    snap: dict[str, Any] | None = None
    for f in frames:
        if f.kind == "event" and isinstance(f.json, dict):
            snap = accumulate(f.json, snap)
    return snap


def rules_of(findings: Iterable[Finding]) -> set[str]:
    return {f.rule for f in findings}


def short(value: Any, limit: int = 120) -> str:
    """A compact, bounded rendering of an observed value for a finding."""
    try:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
