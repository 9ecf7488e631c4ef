"""The replay side of the one API fold: what replay reads from ``apis.get(api).accumulate``'s snapshot.

The stream fold itself lives in ``protocol.apis`` (one pure ``accumulate(event, snapshot)`` per API);
replay only adds timestamps. This module holds what the replay client, the streaming executor and the
dispatch benchmark read from a snapshot, as one ``View`` per API in ``VIEWS`` (keyed by API name), each
made of its API module's ``stream_*`` members: the answer in history form (what a next request carries), its
structure (part kinds in order, tool names, stop), usage, stop reason, whether the stream ended, and
the error text of an error event. ``CallWatch`` follows a stream's tool calls across snapshots: which
appeared and when each became complete (by the API's rule, or earlier by a parse of its arguments
where the API marks no end per call).

The reference server's own Chat ``event: tool_call_dispatch`` frames (``DISPATCH_EVENT``) are not part
of any API; the client and the executor handle them beside the fold.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harnesscheck.protocol import apis
from harnesscheck.protocol.apis import ToolCall
from harnesscheck.protocol.apis.chat import DISPATCH_EVENT

__all__ = ["DISPATCH_EVENT", "VIEWS", "CallWatch", "View", "parse_arguments", "view"]

Snapshot = dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class View:
    """What replay reads from one API's snapshot (``None`` before the stream's first event)."""

    history: Callable[[Snapshot], list[Any]]  # the answer as a next request carries it
    structure: Callable[[Snapshot, list[str]], dict[str, Any]]  # blocks, tool_calls, stop
    usage: Callable[[Snapshot], dict[str, Any]]
    stop: Callable[[Snapshot], str | None]
    ended: Callable[[Snapshot], bool]  # the API's end event arrived (the stream is whole)
    error: Callable[[Any], str | None]  # the error text of an error event
    text: Callable[[list[Any] | None], str]  # the content a history-form answer carries, in order
    call_ids: Callable[[list[Any] | None], list[str]]  # the tool call ids of a history-form answer
    # logs the part kinds a content event grew, for an API whose answer keeps no order of its own
    grown: Callable[[Snapshot, Snapshot, list[str]], None] | None = None
    per_call_end: bool = True  # the API marks each tool call's end on the wire


def _view(api: Any) -> View:
    return View(api.stream_history, api.stream_structure, api.stream_usage, api.stream_stop, api.stream_ended,
                api.stream_error, api.answer_text, api.answer_call_ids, api.stream_grown, api.PER_CALL_END)


VIEWS: Mapping[str, View] = apis.Table(_view)  # read from the registry when looked up


def view(api: str) -> View:
    """The view of ``api`` (a registered API's too: made from its module); KeyError (naming the APIs) for
    any other."""
    module = apis.get(api)
    return VIEWS.get(api) or _view(module)


# -- tool calls across snapshots ---------------------------------------------------------------

class CallWatch:
    """The tool calls of one stream as its snapshots pass.

    ``step(snapshot)`` returns ``(started, completed)``: the calls that appeared, and ``(call,
    source)`` for each call the API's rule (``_complete``) made complete, in call order; each call
    is reported once in each list. With ``early=True`` and an API that marks no end per call (Chat),
    a call also completes, with source "arguments", at the first snapshot whose arguments so far
    parse as a JSON object (a client parsing incrementally can start it then); its rule completion
    still follows (a consumer that wants the earliest keeps the first).
    ``starts=False`` skips the started list (and looks at the calls only when ``_complete`` changed).
    """

    __slots__ = ("_args", "_done", "_early", "_parsed", "_ruled", "_seen", "_starts", "_tool_calls")

    def __init__(self, api: str, *, early: bool = False, starts: bool = True) -> None:
        self._tool_calls = apis.get(api).tool_calls
        self._early = early and not view(api).per_call_end
        self._starts = starts or self._early
        self._done: Any = None
        self._seen: set[int] = set()
        self._ruled: set[int] = set()
        self._parsed: set[int] = set()
        self._args: dict[int, int] = {}

    def step(self, snapshot: Snapshot) -> tuple[list[ToolCall], list[tuple[ToolCall, str]]]:
        done = (snapshot or {}).get("_complete")
        if not self._starts and done is self._done:
            return [], []
        self._done = done
        done = done or {}
        started: list[ToolCall] = []
        completed: list[tuple[ToolCall, str]] = []
        for c in self._tool_calls(snapshot):
            if self._starts and c.key not in self._seen:
                self._seen.add(c.key)
                started.append(c)
            if c.key in self._ruled:
                continue
            if c.key in done:
                self._ruled.add(c.key)
                completed.append((c, done[c.key]))
            elif self._early and c.key not in self._parsed and self._args.get(c.key) != len(c.arguments):
                self._args[c.key] = len(c.arguments)
                if c.arguments.rstrip().endswith("}") and isinstance(_loads(c.arguments), dict):
                    self._parsed.add(c.key)
                    completed.append((c, "arguments"))
        return started, completed


def _loads(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def parse_arguments(raw: str) -> Any:
    """A call's arguments: the parsed JSON ({} when empty), or the raw text when it does not parse."""
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return raw
