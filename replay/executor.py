"""A streaming tool executor (article 2): start each tool the moment its call is complete, while
the model is still generating, and hold a turn barrier before the next model call.

Feed it the events of one streamed turn (``on_event(event_name, data, t_ns)``, ``on_frame`` for
``conformance.wire.sse.SSEFrame``), or let ``ExecutorClient`` (a ``replay.client.StreamClient``
that also feeds the executor of the request) do it. A call is *complete* at

- Anthropic: ``content_block_stop`` of a ``tool_use`` block (arguments: the joined
  ``input_json_delta`` parts);
- Responses: ``response.function_call_arguments.done`` (else ``response.output_item.done`` of the
  ``function_call`` item);
- Chat: the earliest of its ``event: tool_call_dispatch`` frame, the chunk after which its
  accumulated arguments parse as a JSON object, the next tool-call index starting, and
  ``finish_reason``.

Scheduling (Claude Code's ``StreamingToolExecutor``): calls start in call order; a tool flagged
``concurrency_safe`` runs alongside other safe tools; any other tool runs alone (it waits for the
running ones, and the calls after it wait for it). ``barrier()`` waits for the end of the stream
(``end_stream``) and every tool, and returns the results in call order: what the next model
request carries.

``after_stream=True`` gives the classic harness for comparison: nothing starts before
``end_stream``; the same scheduling then runs all calls.

All times are ns on ``time.perf_counter_ns`` relative to ``start_ns`` (the request start).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from harnesscheck.replay.client import StreamClient

__all__ = ["Tool", "ToolRun", "StreamingToolExecutor", "ExecutorClient", "sleep_tool", "schedule_model"]

ToolFn = Callable[[str, Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Tool:
    fn: ToolFn
    concurrency_safe: bool = False


def sleep_tool(ms: float, *, safe: bool = False, result: str = "ok") -> Tool:
    """A fake tool that takes ``ms`` milliseconds (asyncio.sleep) and returns ``result``."""

    async def fn(name: str, args: Any) -> str:
        await asyncio.sleep(ms / 1000)
        return result

    return Tool(fn, safe)


@dataclass(slots=True, eq=False)
class ToolRun:
    """One tool call of the turn and its execution."""

    index: int  # call order within the turn
    id: str
    name: str
    arguments: Any = None  # parsed JSON (or the raw text when it does not parse)
    safe: bool = False
    ready_ns: int | None = None  # the call was complete
    ready_source: str = ""
    start_ns: int | None = None
    end_ns: int | None = None
    result: Any = None
    error: str | None = None
    _raw: list[str] = field(default_factory=list)
    _task: asyncio.Task[Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        def ms(v: int | None) -> float | None:
            return None if v is None else round(v / 1e6, 3)

        return {"index": self.index, "id": self.id, "name": self.name, "safe": self.safe,
                "ready_ms": ms(self.ready_ns), "ready_source": self.ready_source, "start_ms": ms(self.start_ns),
                "end_ms": ms(self.end_ns), "error": self.error}


def _parse(raw: str) -> Any:
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return raw


class StreamingToolExecutor:
    """One turn. ``tools`` maps a tool name to a ``Tool``; ``default`` runs unknown names."""

    def __init__(self, api: str, tools: Mapping[str, Tool], *, default: Tool | None = None,
                 after_stream: bool = False, start_ns: int | None = None,
                 clock: Callable[[], int] = time.perf_counter_ns) -> None:
        if api not in ("anthropic", "chat", "responses"):
            raise ValueError(f"unknown api {api!r}")
        self.api = api
        self.tools = dict(tools)
        self.default = default
        self.after_stream = after_stream
        self.clock = clock
        self.start_ns = clock() if start_ns is None else start_ns
        self.calls: list[ToolRun] = []
        self.stream_end_ns: int | None = None
        self.barrier_ns: int | None = None
        self._by_key: dict[Any, ToolRun] = {}  # API position (block / output / chat index) -> call
        self._queue: list[ToolRun] = []  # complete, not started, in call order
        self._running: set[ToolRun] = set()
        self._changed: asyncio.Event | None = None

    # -- time -------------------------------------------------------------------------------

    def now(self) -> int:
        return self.clock() - self.start_ns

    # -- events -----------------------------------------------------------------------------

    def on_frame(self, frame: Any, t_ns: int | None = None) -> None:
        """A ``conformance.wire.sse.SSEFrame`` (other frame kinds are ignored)."""
        if getattr(frame, "kind", "event") != "event" or frame.data in (None, "", "[DONE]"):
            return
        data = frame.json if getattr(frame, "json", None) is not None else _parse(frame.data)
        if isinstance(data, dict):
            self.on_event(frame.event, data, t_ns if t_ns is not None else getattr(frame, "t_ns", None))

    def on_event(self, event: str | None, d: Mapping[str, Any], t_ns: int | None = None) -> None:
        """One decoded event of the stream; ``t_ns``: when it was read (default: now)."""
        t = self.now() if t_ns is None else t_ns
        if self.api == "anthropic":
            self._anthropic(d, t)
        elif self.api == "responses":
            self._responses(event, d, t)
        else:
            self._chat(event, d, t)

    def _new(self, key: Any, call_id: str, name: str) -> ToolRun:
        tool = self._tool(name)
        run = ToolRun(len(self.calls), call_id, name, safe=bool(tool and tool.concurrency_safe))
        self.calls.append(run)
        self._by_key[key] = run
        return run

    def _anthropic(self, d: Mapping[str, Any], t: int) -> None:
        typ = d.get("type")
        if typ == "content_block_start":
            block = d.get("content_block") or {}
            if block.get("type") == "tool_use":
                self._new(d.get("index"), str(block.get("id", "")), str(block.get("name", "")))
        elif typ == "content_block_delta":
            delta = d.get("delta") or {}
            run = self._by_key.get(d.get("index"))
            if run is not None and delta.get("type") == "input_json_delta":
                run._raw.append(delta.get("partial_json") or "")
        elif typ == "content_block_stop":
            run = self._by_key.get(d.get("index"))
            if run is not None:
                self._complete(run, _parse("".join(run._raw)), t, "content_block_stop")

    def _responses(self, event: str | None, d: Mapping[str, Any], t: int) -> None:
        typ = d.get("type") or event
        if typ == "response.output_item.added":
            item = d.get("item") or {}
            if item.get("type") == "function_call":
                self._new(d.get("output_index"), str(item.get("call_id") or item.get("id") or ""),
                          str(item.get("name", "")))
        elif typ == "response.function_call_arguments.delta":
            run = self._by_key.get(d.get("output_index"))
            if run is not None:
                run._raw.append(d.get("delta") or "")
        elif typ == "response.function_call_arguments.done":
            run = self._by_key.get(d.get("output_index"))
            if run is not None:
                args = d.get("arguments")
                self._complete(run, _parse(args if isinstance(args, str) else "".join(run._raw)), t,
                               "arguments.done")
        elif typ == "response.output_item.done":
            item = d.get("item") or {}
            if item.get("type") != "function_call":
                return
            run = self._by_key.get(d.get("output_index"))
            if run is None:  # no output_item.added seen
                run = self._new(d.get("output_index"), str(item.get("call_id") or ""), str(item.get("name", "")))
            args = item.get("arguments")
            self._complete(run, _parse(args if isinstance(args, str) else "".join(run._raw)), t, "item.done")

    def _chat(self, event: str | None, d: Mapping[str, Any], t: int) -> None:
        if event == "tool_call_dispatch":
            call = d.get("tool_call") or {}
            idx = call.get("index", 0)
            fn = call.get("function") or {}
            run = self._by_key.get(idx) or self._new(idx, str(call.get("id", "")), str(fn.get("name", "")))
            args = fn.get("arguments")
            self._complete(run, _parse(args if isinstance(args, str) else "".join(run._raw)), t, "dispatch")
            return
        for choice in d.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            for tc in delta.get("tool_calls") or ():
                idx = tc.get("index", 0)
                fn = tc.get("function") or {}
                run = self._by_key.get(idx)
                if run is None:
                    for other in self.calls:  # a new index: the earlier calls are complete
                        if other.ready_ns is None:
                            self._complete(other, _parse("".join(other._raw)), t, "next_index")
                    run = self._new(idx, str(tc.get("id") or ""), str(fn.get("name") or ""))
                elif fn.get("name") and not run.name:
                    run.name = fn["name"]
                    run.safe = bool((tool := self._tool(run.name)) and tool.concurrency_safe)
                if fn.get("arguments"):
                    run._raw.append(fn["arguments"])
                    if run.ready_ns is None:
                        raw = "".join(run._raw)
                        if raw.rstrip().endswith("}"):
                            try:
                                args = json.loads(raw)
                            except ValueError:
                                args = None
                            if isinstance(args, dict):
                                self._complete(run, args, t, "arguments")
            if choice.get("finish_reason"):
                for run in self.calls:
                    if run.ready_ns is None:
                        self._complete(run, _parse("".join(run._raw)), t, "finish_reason")

    def end_stream(self, t_ns: int | None = None) -> None:
        """The model's answer is over (its last byte was read)."""
        if self.stream_end_ns is not None:
            return
        self.stream_end_ns = self.now() if t_ns is None else t_ns
        for run in self.calls:  # a call never closed (truncated stream) is run as it stands
            if run.ready_ns is None:
                self._complete(run, _parse("".join(run._raw)), self.stream_end_ns, "end_of_stream")
        self._pump()

    # -- scheduling ---------------------------------------------------------------------------

    def _tool(self, name: str) -> Tool | None:
        return self.tools.get(name, self.default)

    def _complete(self, run: ToolRun, args: Any, t: int, source: str) -> None:
        if run.ready_ns is not None:
            return
        run.ready_ns, run.ready_source, run.arguments = t, source, args
        self._queue.append(run)
        self._pump()

    def _pump(self) -> None:
        if self.after_stream and self.stream_end_ns is None:
            return
        while self._queue:
            run = self._queue[0]
            if self._running and not (run.safe and all(r.safe for r in self._running)):
                break  # call order: nothing overtakes a waiting call
            self._queue.pop(0)
            self._start(run)

    def _start(self, run: ToolRun) -> None:
        tool = self._tool(run.name)
        run.start_ns = self.now()
        self._running.add(run)
        run._task = asyncio.get_running_loop().create_task(self._exec(run, tool))

    async def _exec(self, run: ToolRun, tool: Tool | None) -> None:
        try:
            if tool is None:
                raise LookupError(f"no tool named {run.name!r}")
            run.result = await tool.fn(run.name, run.arguments)
        except Exception as exc:  # noqa: BLE001 - a failing tool is a tool result, not a crash
            run.error = f"{type(exc).__name__}: {exc}"
            run.result = run.error
        finally:
            run.end_ns = self.now()
            self._running.discard(run)
            self._pump()
            if self._changed is not None:
                self._changed.set()

    async def barrier(self) -> list[ToolRun]:
        """Turn barrier: wait for the end of stream (call ``end_stream`` first) and every tool;
        the runs in call order."""
        if self.stream_end_ns is None:
            raise RuntimeError("barrier() before end_stream()")
        self._changed = asyncio.Event()
        while self._queue or self._running:
            self._changed.clear()
            await self._changed.wait()
        self.barrier_ns = self.now()
        return list(self.calls)

    def results(self) -> list[dict[str, Any]]:
        """Tool results in call order, as ``{id, name, content, is_error}``."""
        return [{"id": r.id, "name": r.name, "content": r.result if isinstance(r.result, str) else json.dumps(r.result),
                 "is_error": r.error is not None} for r in self.calls]

    def timeline(self) -> dict[str, Any]:
        def ms(v: int | None) -> float | None:
            return None if v is None else round(v / 1e6, 3)

        return {"stream_end_ms": ms(self.stream_end_ns), "barrier_ms": ms(self.barrier_ns),
                "after_stream": self.after_stream, "calls": [r.to_dict() for r in self.calls]}


def schedule_model(ready_ms: list[float], stream_end_ms: float, durations_ms: list[float], safe: list[bool],
                   *, after_stream: bool = False) -> float:
    """The turn end the executor's rules predict with zero overhead: calls become ready at
    ``ready_ms`` (all at ``stream_end_ms`` when ``after_stream``), run with the given durations
    under the same ordering rules; the turn ends at max(stream end, last tool finish).

    All calls safe and after the stream: end + max(durations); none safe: end + sum(durations)
    (the article's "sum"); streaming: max(remaining generation, tool time) per call."""
    ready = [stream_end_ms if after_stream else r for r in ready_ms]
    running: list[tuple[float, bool]] = []  # (finish, safe)
    last_start = 0.0
    finish_all = stream_end_ms
    for r, d, s in zip(ready, durations_ms, safe, strict=True):
        t = max(r, last_start)
        while True:
            running = [(f, fs) for f, fs in running if f > t]
            if not running or (s and all(fs for _, fs in running)):
                break
            t = min(f for f, _ in running)
        running.append((t + d, s))
        last_start = t
        finish_all = max(finish_all, t + d)
    return finish_all


# -- StreamClient that feeds an executor ------------------------------------------------------

_CURRENT: ContextVar[StreamingToolExecutor | None] = ContextVar("harnesscheck_executor", default=None)


class ExecutorClient(StreamClient):
    """``replay.client.StreamClient`` whose ``run_turn`` also feeds a ``StreamingToolExecutor``
    with every event as its network read returns (same clock, same parsing)."""

    async def run_turn(self, url: str, body: Any, *, api: str, tools: Mapping[str, Tool],
                       default: Tool | None = None, after_stream: bool = False,
                       headers: Mapping[str, str] | None = None) -> tuple[Any, StreamingToolExecutor]:
        """Stream one turn, executing its tool calls; returns ``(StreamResult, executor)`` after
        the turn barrier (``executor.barrier_ns``: the turn latency from the request start)."""
        ex = StreamingToolExecutor(api, tools, default=default, after_stream=after_stream)
        token = _CURRENT.set(ex)
        try:
            result = await self.post(url, body, api=api, headers=headers)
        finally:
            _CURRENT.reset(token)
        ex.start_ns = result.start_ns  # (already so once an event arrived)
        ex.end_stream(result.end_ns)
        await ex.barrier()
        return result, ex

    def _on(self, folder: Any, r: Any, event: str | None, text: str, t: int, loads: Callable[[str], Any]) -> None:
        r.events += 1
        if text == "[DONE]":
            done = getattr(folder, "done", None)
            if done is not None:
                done()
            return
        try:
            d = loads(text)
        except ValueError:
            r.error = r.error or f"event data is not JSON: {text[:200]!r}"
            r.error_kind = r.error_kind or "bad_json"
            return
        if isinstance(d, dict):
            folder.on(event, d, t)
            ex = _CURRENT.get()
            if ex is not None:
                ex.start_ns = r.start_ns  # one clock: the client's request start
                ex.on_event(event, d, t)
