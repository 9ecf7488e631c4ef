"""Violations as data: a ``Finding`` names the grammar rule broken, the frame, and what was seen.

Validators return findings and never raise on what a server sent. ``frames_and_request`` lets
every validator take either a ``Transcript`` or a plain list of ``SSEFrame``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from harnesscheck.protocol.apis.base import frames_and_request
from harnesscheck.protocol.wire.sse import SSEFrame
from harnesscheck.protocol.wire.transcript import Transcript

__all__ = ["Collector", "EventNames", "Finding", "Source", "frames_and_request", "rules_of", "short"]

Source = Transcript | Sequence[SSEFrame]


@dataclass(frozen=True, slots=True)
class Finding:
    """One violation, or one informational record. ``rule`` is a grammar rule id (e.g.
    ``AN-GRAMMAR-ORDER``); ``frame_index`` is the ``SSEFrame.index`` of the offending frame (for a
    thing missing at the end, the last frame seen), None only when the stream had no frame at all.

    ``informational`` marks what the references allow but a reader should see (an unknown event
    type, an error the endpoint reported in the stream): recorded and shown, never a failure."""

    rule: str
    frame_index: int | None
    message: str
    observed: str | None = None
    expected: str | None = None
    informational: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        where = "end of stream" if self.frame_index is None else f"frame #{self.frame_index}"
        text = f"{self.rule}{' (informational)' if self.informational else ''} at {where}: {self.message}"
        if self.observed is not None:
            text += f" (observed {self.observed}"
            text += f"; expected {self.expected})" if self.expected is not None else ")"
        elif self.expected is not None:
            text += f" (expected {self.expected})"
        return text


def without_cut_call(findings: list[Finding], rule: str, last_call_from: int | None) -> list[Finding]:
    """``findings`` less the ``rule`` findings of a call the output limit cut: the turn ended by its
    output limit (the caller knows) and the call is the last part (its findings at or after frame
    ``last_call_from``). The references let the limit truncate; the cut-call rules (<P>-TOOLS-005) judge
    such a call, never the arguments rule of a complete one."""
    if last_call_from is None:
        return findings
    return [f for f in findings if not (f.rule == rule and f.frame_index is not None
                                        and f.frame_index >= last_call_from)]


def rules_of(findings: Iterable[Finding]) -> set[str]:
    return {f.rule for f in findings}


def short(value: Any, limit: int = 120) -> str:
    """A compact, bounded rendering of an observed value for a finding."""
    try:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Collector:
    """A validator's finding list: observed and expected values rendered short, and findings about
    something missing at the end placed at the last frame seen (so a reader sees where it stopped)."""

    def __init__(self, frames: Sequence[SSEFrame]) -> None:
        self.out: list[Finding] = []
        self.last: int | None = frames[-1].index if frames else None

    def add(self, rule: str, frame: int | None, message: str, observed: Any = None, expected: Any = None, *,
            informational: bool = False) -> None:
        self.out.append(Finding(rule, frame, message, None if observed is None else short(observed),
                                None if expected is None else short(expected), informational))

    def at_end(self, rule: str, message: str, observed: Any = None, expected: Any = None) -> None:
        where = f"the stream ended after frame #{self.last}" if self.last is not None else \
            "the stream had no frame"
        self.add(rule, self.last, f"{message} ({where})", observed, expected)


class EventNames:
    """The SSE `event:` line against the data's `type`, summed up per frame kind: one finding per
    type whose line is absent (rule ``absent``), one per (name, type) pair that differs (rule
    ``differs``), each at its first frame with the count. A long stream with no `event:` lines thus
    yields one finding per event type, not one per frame."""

    def __init__(self, absent: str, differs: str, *, absent_informational: bool = False) -> None:
        self.rules = (absent, differs)
        self.absent_informational = absent_informational
        self.seen: dict[tuple[str | None, str], list[int]] = {}  # (event name or None, type) -> frames

    def check(self, frame: SSEFrame, typ: str) -> None:
        if frame.event != typ:
            self.seen.setdefault((frame.event, typ), []).append(frame.index)

    def report(self, sink: Collector, note: Any = None) -> None:
        """``note(event, type)`` may add a sentence about what a client does with that frame."""
        for (event, typ), where in sorted(self.seen.items(), key=lambda kv: kv[1][0]):
            extra = note(event, typ) if note else ""
            count = f"{len(where)} `{typ}` frame{'s' if len(where) > 1 else ''} (first at frame #{where[0]})"
            if event is None:
                sink.add(self.rules[0], where[0], f"the SSE `event:` line is absent on {count}{extra}",
                         "no event: line", f"event: {typ}", informational=self.absent_informational)
            else:
                sink.add(self.rules[1], where[0], f"the SSE event name differs (event: {event}, type: "
                         f"{typ}) on {count}{extra}", f"event: {event}, type: {typ}", f"event: {typ}")
