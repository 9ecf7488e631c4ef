"""`bench dispatch`: how early a harness can start each tool (article 2).

For the tool-calling first turns of the ``parallel_tools`` and ``interleaved`` scenarios, per API,
the time from the request start to

- each tool call *complete* (the stream folded by ``protocol.apis``): Anthropic ``content_block_stop``
  of the ``tool_use`` block; Responses ``response.function_call_arguments.done``; Chat the first chunk
  after which the call's accumulated arguments parse as a JSON object (a client parsing incrementally
  can start it then);
- Chat also: the *boundary*, where a client without incremental JSON parsing learns the call is
  complete (the next tool-call index starts, or ``finish_reason``);
- its ``tool_call_dispatch`` frame (Chat, when the server sends one);
- the end of the stream (the last byte).

Server modes (embedded): ``buffered`` (``--fault buffer-tool-calls``: calls held to the end of the
turn), ``inline`` (``--no-enable-streaming-tool-dispatch``: calls stream inline, no dispatch frame)
and ``dispatch`` (the default). The saving per turn is the end of stream minus the time the first
tool could start; a harness that waits for the end of stream gets none of it. Against an external
endpoint there is a single mode, ``endpoint``.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harnesscheck.protocol import apis
from harnesscheck.replay.benchmarks import common
from harnesscheck.replay.fold import DISPATCH_EVENT, CallWatch, view

MODES = {"buffered": ["--fault", "buffer-tool-calls"], "inline": ["--no-enable-streaming-tool-dispatch"],
         "dispatch": []}


@dataclass(kw_only=True)
class DispatchOptions(common.RoundsOptions):  # the arms are the server modes
    sessions: int = 5
    apis: list[str] = field(default_factory=lambda: list(apis.NAMES))
    scenarios: list[str] = field(default_factory=lambda: ["parallel_tools", "interleaved"])


@dataclass
class Turn:
    """One streamed turn: ms from the request start."""

    ready: dict[int, float] = field(default_factory=dict)  # call index -> complete
    dispatch: dict[int, float] = field(default_factory=dict)  # call index -> tool_call_dispatch frame
    boundary: dict[int, float] = field(default_factory=dict)  # Chat: next index starts / finish_reason
    end: float = 0.0
    ttft: float | None = None
    error: str | None = None


async def record(session: Any, url: str, api: str, body: dict[str, Any], headers: dict[str, str]) -> Turn:
    """Stream one request, timing every event as its network read returns."""
    from harnesscheck.replay.client import FastSSE

    turn = Turn()
    sse = FastSSE()
    clock = time.perf_counter_ns
    fold = _Fold(api)
    hdrs = {"content-type": "application/json", "accept": "text/event-stream", **headers}
    start = clock()
    async with session.post(url, data=json.dumps(body).encode(), headers=hdrs) as resp:
        if resp.status != 200:
            turn.error = f"HTTP {resp.status}: {(await resp.text())[:300]}"
            return turn
        while True:
            chunk = await resp.content.readany()
            if not chunk:
                break
            t = (clock() - start) / 1e6
            for event, text in sse.feed(chunk):
                if text == "[DONE]":
                    continue
                try:
                    d = json.loads(text)
                except ValueError:
                    continue
                fold.on(event, d, t, turn)
    turn.end = (clock() - start) / 1e6
    return turn


class _Fold:
    """One stream through its API's fold (``protocol.apis``): per call (by position), when it was
    complete (the earliest of the API's rule and, where the API marks no end per call, the first
    chunk after which its arguments parse as a JSON object), the rule's own time as the boundary
    there, and the reference server's Chat ``tool_call_dispatch`` frame."""

    def __init__(self, api: str) -> None:
        self.api = apis.get(api)
        self.per_call_end = view(api).per_call_end
        self.snapshot: dict[str, Any] | None = None
        self.watch = CallWatch(api, early=True)

    def on(self, event: str | None, d: Any, t: float, turn: Turn) -> None:
        if event == DISPATCH_EVENT:
            turn.dispatch.setdefault((d.get("tool_call") or {}).get("index", 0), t)
            return
        if turn.ttft is None and self.api.is_content(d):
            turn.ttft = t
        self.snapshot = self.api.accumulate(d, self.snapshot)
        for call, source in self.watch.step(self.snapshot)[1]:
            turn.ready.setdefault(call.index, t)
            if not self.per_call_end and source != "arguments":
                turn.boundary.setdefault(call.index, t)


async def _measure(urls: dict[str, str], model: str, opts: DispatchOptions) -> dict[tuple[str, str, str], list[Turn]]:
    import aiohttp

    hdrs = common.headers(opts.api_key)
    out: dict[tuple[str, str, str], list[Turn]] = {}
    bodies = {(s, a): common.first_request(a, s, model) for s in opts.scenarios for a in opts.apis}
    modes = list(urls)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
        for measured, order in opts.rounds(modes):
            for mode in order:
                for (scenario, api), body in bodies.items():
                    try:
                        turn = await record(session, urls[mode] + common.PATHS[api], api, body, hdrs)
                    except asyncio.CancelledError:  # stopped: the turns measured so far (none: the stop as it came)
                        if out:
                            return out
                        raise
                    if turn.error:
                        raise RuntimeError(f"{mode}/{scenario}/{api}: {turn.error}")
                    if measured:
                        out.setdefault((scenario, api, mode), []).append(turn)
    return out


def run_dispatch(opts: DispatchOptions) -> dict[str, Any]:
    from harnesscheck.reports.schema import now_iso

    started = now_iso()
    with common.target(opts, *MODES.values()) as target:
        names = list(MODES) if target.embedded else ["endpoint"]
        turns, stop = common.run_stoppable(_measure(dict(zip(names, target.urls, strict=True)), target.model, opts))
        server = target.server_info()
    benchmarks = []
    for scenario in opts.scenarios:
        for api in opts.apis:
            by_mode = {m: t for (s, a, m), t in turns.items() if s == scenario and a == api}
            if by_mode or stop is None:  # stopped: the (scenario, API) pairs measured before it
                benchmarks.append(_benchmark(scenario, api, by_mode, server["timing"], opts))
    settings = {"sessions": opts.sessions, "warmup_rounds": opts.warmup, "apis": opts.apis,
                "scenarios": opts.scenarios, "concurrency": 1,
                "modes": {m: " ".join(a) or "(default)" for m, a in MODES.items()} if not opts.endpoint else
                {"endpoint": "the endpoint's own setting"}}
    if timing_model := opts.timing_model(server):
        settings["timing_model"] = timing_model
    return common.stopped(target.document(benchmarks, apis=opts.apis, server=server, settings=settings,
                                          started_at=started), stop)


def _benchmark(scenario: str, api: str, by_mode: dict[str, list[Turn]], timing: str,
               opts: DispatchOptions) -> dict[str, Any]:
    arms: list[dict[str, Any]] = []
    per_mode: dict[str, dict[str, Any]] = {}
    summary: list[str] = []
    for mode, turns in by_mode.items():
        n_calls = max((len(t.ready) for t in turns), default=0)
        for i in range(n_calls):
            arms.append(common.arm(f"{mode} tool{i} complete", [t.ready[i] for t in turns if i in t.ready]))
            if any(i in t.boundary for t in turns):
                arms.append(common.arm(f"{mode} tool{i} boundary", [t.boundary[i] for t in turns if i in t.boundary]))
            if any(i in t.dispatch for t in turns):
                arms.append(common.arm(f"{mode} tool{i} dispatch", [t.dispatch[i] for t in turns if i in t.dispatch]))
        arms.append(common.arm(f"{mode} end", [t.end for t in turns]))
        first_start = [min([*t.ready.values(), *t.dispatch.values()], default=t.end) for t in turns]
        saving = [t.end - f for t, f in zip(turns, first_start, strict=True)]
        lead = [sum(t.end - v for v in t.ready.values()) for t in turns]
        per_mode[mode] = {"first_tool_start_ms": round(float(np.median(first_start)), 3),
                          "end_ms": round(float(np.median([t.end for t in turns])), 3),
                          "saving_per_turn_ms": round(float(np.median(saving)), 3),
                          "tool_lead_sum_ms": round(float(np.median(lead)), 3),
                          "calls": n_calls}
        summary.append(f"{mode}: first tool can start at {per_mode[mode]['first_tool_start_ms']:.1f} ms, "
                       f"end of stream {per_mode[mode]['end_ms']:.1f} ms, saving per turn "
                       f"{per_mode[mode]['saving_per_turn_ms']:.1f} ms")
    ratios = []
    names = {a["name"]: a for a in arms}
    if "buffered tool0 complete" in names:
        for mode in by_mode:
            if mode != "buffered" and f"{mode} tool0 complete" in names:
                ratios.append(common.ratio(f"{mode}/buffered tool0 complete", names[f"{mode} tool0 complete"],
                                           names["buffered tool0 complete"]))
    settings = {"scenario": scenario, "api": api, "sessions": opts.sessions, "modes": per_mode,
                "summary": summary}
    return common.benchmark(f"dispatch-{scenario}-{api}", f"Tool-ready latency: {scenario}, {api}",
                            timing=timing, settings=settings, arms=arms, ratios=ratios)
