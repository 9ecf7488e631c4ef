"""A streaming tool executor (article 2): start each tool the moment its call is complete, while
the model is still generating, and hold a turn barrier before the next model call.

Feed it the events of one streamed turn (``on_event(event_name, data, t_ns)``, ``on_frame`` for
``protocol.wire.sse.SSEFrame``), or let ``ExecutorClient`` (a ``replay.client.StreamClient``
that also hands the executor its own fold's snapshots, ``on_snapshot``) do it. The stream is folded
with the API module's pure ``accumulate`` (``protocol.apis``) and ``replay.fold.CallWatch`` says
when a call appeared and when it was complete:

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
import functools
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harnesscheck.protocol import apis
from harnesscheck.replay.client import Fold, StreamClient
from harnesscheck.replay.fold import DISPATCH_EVENT, CallWatch, parse_arguments

__all__ = ["ExecutorClient", "StreamingToolExecutor", "Tool", "ToolRun", "schedule_model", "sleep_tool"]

ToolFn = Callable[[str, Any], Awaitable[Any]]
_SOURCES = {"stop": "content_block_stop"}  # the fold's completion source -> the executor's name for it


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
    _task: asyncio.Task[Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        def ms(v: int | None) -> float | None:
            return None if v is None else round(v / 1e6, 3)

        return {"index": self.index, "id": self.id, "name": self.name, "safe": self.safe,
                "ready_ms": ms(self.ready_ns), "ready_source": self.ready_source, "start_ms": ms(self.start_ns),
                "end_ms": ms(self.end_ns), "error": self.error}


class StreamingToolExecutor:
    """One turn. ``tools`` maps a tool name to a ``Tool``; ``default`` runs unknown names."""

    def __init__(self, api: str, tools: Mapping[str, Tool], *, default: Tool | None = None,
                 after_stream: bool = False, start_ns: int | None = None,
                 clock: Callable[[], int] = time.perf_counter_ns) -> None:
        if api not in apis.NAMES:
            raise ValueError(f"unknown api {api!r}")
        self.api = api
        self._acc = apis.get(api).accumulate
        self._tool_calls = apis.get(api).tool_calls
        self._watch = CallWatch(api, early=True)
        self.snapshot: dict[str, Any] | None = None
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
        """A ``protocol.wire.sse.SSEFrame`` (other frame kinds are ignored)."""
        if getattr(frame, "kind", "event") != "event" or frame.data in (None, "", "[DONE]"):
            return
        data = frame.json if getattr(frame, "json", None) is not None else parse_arguments(frame.data)
        if isinstance(data, dict):
            self.on_event(frame.event, data, t_ns if t_ns is not None else getattr(frame, "t_ns", None))

    def on_event(self, event: str | None, d: Mapping[str, Any], t_ns: int | None = None) -> None:
        """One decoded event of the stream; ``t_ns``: when it was read (default: now)."""
        t = self.now() if t_ns is None else t_ns
        if event == DISPATCH_EVENT:
            self.on_dispatch(d, t)
        else:
            self.on_snapshot(self._acc(d, self.snapshot), t)

    def on_snapshot(self, snapshot: dict[str, Any] | None, t: int) -> None:
        """The stream's snapshot after one more event (``protocol.apis``' fold): start runs for
        the calls that appeared, complete those that are complete."""
        self.snapshot = snapshot
        started, completed = self._watch.step(snapshot)
        for c in started:
            if c.key not in self._by_key:  # (a dispatch frame may have announced it)
                self._new(c.key, c.id, c.name)
        for c, source in completed:
            run = self._by_key[c.key]
            if not run.name and c.name:  # Chat may name a call after its first delta
                run.name = c.name
                run.safe = bool((tool := self._tool(run.name)) and tool.concurrency_safe)
            self._complete(run, parse_arguments(c.arguments), t, _SOURCES.get(source, source))

    def on_dispatch(self, d: Mapping[str, Any], t: int) -> None:
        """The reference server's Chat ``tool_call_dispatch`` frame: the call, complete."""
        call = d.get("tool_call") or {}
        idx = call.get("index", 0)
        fn = call.get("function") or {}
        run = self._by_key.get(idx) or self._new(idx, str(call.get("id", "")), str(fn.get("name", "")))
        args = fn.get("arguments")
        self._complete(run, parse_arguments(args) if isinstance(args, str) else self._arguments(idx), t,
                       "dispatch")

    def _arguments(self, key: Any) -> Any:
        """The arguments of call ``key`` as the snapshot has them so far."""
        for c in self._tool_calls(self.snapshot):
            if c.key == key:
                return parse_arguments(c.arguments)
        return {}

    def _new(self, key: Any, call_id: str, name: str) -> ToolRun:
        tool = self._tool(name)
        run = ToolRun(len(self.calls), call_id, name, safe=bool(tool and tool.concurrency_safe))
        self.calls.append(run)
        self._by_key[key] = run
        return run

    def end_stream(self, t_ns: int | None = None) -> None:
        """The model's answer is over (its last byte was read)."""
        if self.stream_end_ns is not None:
            return
        self.stream_end_ns = self.now() if t_ns is None else t_ns
        for key, run in self._by_key.items():  # a call never closed (truncated stream) is run as it stands
            if run.ready_ns is None:
                self._complete(run, self._arguments(key), self.stream_end_ns, "end_of_stream")
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

class ExecutorClient(StreamClient):
    """``replay.client.StreamClient`` whose ``run_turn`` also feeds a ``StreamingToolExecutor``
    with every event as its network read returns (same clock, same parsing)."""

    async def run_turn(self, url: str, body: Any, *, api: str, tools: Mapping[str, Tool],
                       default: Tool | None = None, after_stream: bool = False,
                       headers: Mapping[str, str] | None = None) -> tuple[Any, StreamingToolExecutor]:
        """Stream one turn, executing its tool calls; returns ``(StreamResult, executor)`` after
        the turn barrier (``executor.barrier_ns``: the turn latency from the request start)."""
        ex = StreamingToolExecutor(api, tools, default=default, after_stream=after_stream)
        result = await self.post(url, body, api=api, headers=headers, on_event=functools.partial(_feed, ex))
        ex.start_ns = result.start_ns  # (already so once an event arrived)
        ex.end_stream(result.end_ns)
        await ex.barrier()
        return result, ex


def _feed(ex: StreamingToolExecutor, fold: Fold, event: str | None, data: Any, t: int) -> None:
    """One event the client has just folded, to the executor."""
    ex.start_ns = fold.r.start_ns  # one clock: the client's request start
    if event == DISPATCH_EVENT:
        if isinstance(data, dict):
            ex.on_dispatch(data, t)
    else:
        ex.on_snapshot(fold.snapshot, t)  # the client's own fold, not folded twice
