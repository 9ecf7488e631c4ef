"""`bench overlap`: turn latency with the tools executed after the stream versus while it streams
(article 2), next to the article's model.

For the tool-calling first turn of each scenario (bodies from ``protocol.apis``' ``first``), per
API, three arms interleaved per round (the order rotates, warm-up rounds discarded):

- ``stream``: the turn with instant tools: the end of stream E and the time each call was complete
  (``harnesscheck.replay.executor``'s definitions), which feed the model;
- ``after-stream``: a harness that starts the tools only at the end of stream;
- ``streaming``: ``replay.executor.StreamingToolExecutor``: each tool starts when its call is
  complete.

Turn latency: request start to the turn barrier (stream over and every tool result in). Fake tools
sleep ``--tool-ms`` (per call index, the last value repeated); by default they are not
concurrency-safe (run one at a time, in call order), so the model is the article's: after-stream
= E + sum(tools); streaming = max(stream end, last tool finish), each tool starting at
max(its call complete, the previous tool's finish), i.e. max(remaining generation, tool time).
``--concurrency-safe`` runs them in parallel (after-stream = E + max(tools)). The model arms are
computed per sample of the ``stream`` arm (``harnesscheck.replay.executor.schedule_model``); measured and model
agree when their medians' bootstrap intervals overlap or the interval of the ratio measured/model
contains 1 (``settings.agreement``); ``within_slack`` also reports whether the difference is within
1 ms per tool (uvloop's timer grid) plus 1% (wake-up delay on a loaded machine).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harnesscheck.protocol import apis as api_names
from harnesscheck.replay.benchmarks import common


@dataclass(kw_only=True)
class OverlapOptions(common.RoundsOptions):
    sessions: int = 6
    apis: list[str] = field(default_factory=lambda: list(api_names.NAMES))
    scenarios: list[str] = field(default_factory=lambda: ["parallel_tools", "interleaved"])
    tool_ms: list[float] = field(default_factory=lambda: [300.0, 300.0])  # per call index, the last repeated
    concurrency_safe: bool = False  # the fake tools run in parallel


ARMS = ("stream", "after-stream", "streaming")


def _durations(opts: OverlapOptions, n: int) -> list[float]:
    d = list(opts.tool_ms) or [0.0]
    return [d[i] if i < len(d) else d[-1] for i in range(n)]


def _tool(durations_ms: list[float], safe: bool) -> Any:
    """One fake tool for every name; the k-th call started sleeps durations_ms[k] (calls start in
    call order, so k is the call index)."""
    from harnesscheck.replay.executor import Tool

    counter = iter(range(1 << 30))

    async def fn(name: str, args: Any) -> str:
        k = next(counter)
        await asyncio.sleep((durations_ms[k] if k < len(durations_ms) else durations_ms[-1]) / 1000)
        return "ok"

    return Tool(fn, safe)


@dataclass
class Sample:
    turn_ms: float
    stream_end_ms: float
    ready_ms: list[float]


async def _measure(url: str, model: str, opts: OverlapOptions) -> dict[tuple[str, str, str], list[Sample]]:
    from harnesscheck.replay.executor import ExecutorClient, sleep_tool

    bodies = {(s, a): common.first_request(a, s, model) for s in opts.scenarios for a in opts.apis}
    hdrs = common.headers(opts.api_key)
    out: dict[tuple[str, str, str], list[Sample]] = {}
    durations = _durations(opts, 64)
    async with ExecutorClient() as client:
        for measured, order in opts.rounds(ARMS):
            for arm in order:
                for (scenario, api), body in bodies.items():
                    if arm == "stream":
                        tool, after = sleep_tool(0, safe=True), False
                    else:
                        tool, after = _tool(durations, opts.concurrency_safe), arm == "after-stream"
                    result, ex = await client.run_turn(url + common.PATHS[api], body, api=api, tools={},
                                                       default=tool, after_stream=after, headers=hdrs)
                    if not result.ok:
                        raise RuntimeError(f"{arm}/{scenario}/{api}: {result.error}")
                    if not ex.calls:
                        raise RuntimeError(f"{scenario}/{api}: the turn made no tool call")
                    if measured:
                        # run_turn returns after the barrier, so both ends are set
                        assert ex.barrier_ns is not None and ex.stream_end_ns is not None
                        ready = [c.ready_ns / 1e6 for c in ex.calls if c.ready_ns is not None]
                        if len(ready) != len(ex.calls):
                            raise RuntimeError(f"{arm}/{scenario}/{api}: a tool call never completed")
                        out.setdefault((scenario, api, arm), []).append(Sample(
                            ex.barrier_ns / 1e6, ex.stream_end_ns / 1e6, ready))
    return out


def run_overlap(opts: OverlapOptions) -> dict[str, Any]:
    from harnesscheck.replay.client import run_async
    from harnesscheck.reports.schema import now_iso

    started = now_iso()
    with common.target(opts) as target:
        samples = run_async(_measure(target.urls[0], target.model, opts))
        server = target.server_info()
    benchmarks = [_benchmark(s, a, {arm: samples[(s, a, arm)] for arm in ARMS}, server["timing"], opts)
                  for s in opts.scenarios for a in opts.apis]
    settings: dict[str, Any] = {
        "sessions": opts.sessions, "warmup_rounds": opts.warmup, "apis": opts.apis, "scenarios": opts.scenarios,
        "concurrency": 1, "tool_ms": opts.tool_ms, "concurrency_safe": opts.concurrency_safe,
        "tools": "asyncio.sleep fakes (replay.executor), per call index",
        "executor": "replay.executor.StreamingToolExecutor via ExecutorClient (aiohttp + uvloop)"}
    if timing_model := opts.timing_model(server):
        settings["timing_model"] = timing_model
    return target.document(benchmarks, apis=opts.apis, server=server, settings=settings, started_at=started)


def _overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    ca, cb = a.get("ci95"), b.get("ci95")
    if not ca or not cb:
        return False
    return ca[0] <= cb[1] and cb[0] <= ca[1]


def _benchmark(scenario: str, api: str, by_arm: dict[str, list[Sample]], timing: str,
               opts: OverlapOptions) -> dict[str, Any]:
    from harnesscheck.replay.executor import schedule_model

    stream = by_arm["stream"]
    n_calls = max(len(s.ready_ms) for s in stream)
    durations = _durations(opts, n_calls)
    safe = [opts.concurrency_safe] * n_calls

    def model(after: bool) -> list[float]:
        return [schedule_model(s.ready_ms, s.stream_end_ms, _durations(opts, len(s.ready_ms)),
                               [opts.concurrency_safe] * len(s.ready_ms), after_stream=after) for s in stream]

    arms = [common.arm("stream end", [s.stream_end_ms for s in stream]),
            common.arm("after-stream", [s.turn_ms for s in by_arm["after-stream"]]),
            common.arm("model after-stream", model(True)),
            common.arm("streaming", [s.turn_ms for s in by_arm["streaming"]]),
            common.arm("model streaming", model(False))]
    for i in range(n_calls):
        arms.append(common.arm(f"tool{i} complete", [s.ready_ms[i] for s in stream if i < len(s.ready_ms)]))
    named = {a["name"]: a for a in arms}
    ratios = [common.ratio("after-stream/streaming", named["after-stream"], named["streaming"]),
              common.ratio("model after-stream/model streaming", named["model after-stream"],
                           named["model streaming"]),
              common.ratio("after-stream/model", named["after-stream"], named["model after-stream"]),
              common.ratio("streaming/model", named["streaming"], named["model streaming"])]
    agreement = {}
    for arm_name in ("after-stream", "streaming"):
        m, p = named[arm_name], named[f"model {arm_name}"]
        r = next(x for x in ratios if x["name"] == f"{arm_name}/model")
        ratio_has_1 = bool(r.get("ci95")) and r["ci95"][0] <= 1 <= r["ci95"][1]
        # timers fire on a 1 ms grid (uvloop) and a loaded machine adds wake-up delay per tool
        slack = round(1.0 * n_calls + 0.01 * p["median"], 3)
        diff = m["median"] - p["median"]
        agreement[arm_name] = {"measured_median_ms": m["median"], "model_median_ms": p["median"],
                               "measured_ci95": m.get("ci95"), "model_ci95": p.get("ci95"),
                               "diff_ms": round(diff, 3), "intervals_overlap": _overlap(m, p),
                               "ratio_ci_contains_1": ratio_has_1, "slack_ms": slack,
                               "within_slack": abs(diff) <= slack,
                               "agree": _overlap(m, p) or ratio_has_1}
    e = float(np.median([s.stream_end_ms for s in stream]))
    saving = named["after-stream"]["median"] - named["streaming"]["median"]
    summary = [f"generation (end of stream) {e:.1f} ms; tools {', '.join(f'{d:g}' for d in durations)} ms "
               f"({'parallel' if opts.concurrency_safe else 'one at a time'})",
               *(f"{k}: measured {v['measured_median_ms']:.1f} ms, model {v['model_median_ms']:.1f} ms "
                 f"(diff {v['diff_ms']:+.1f}; {'agree' if v['agree'] else 'DISAGREE'}: intervals "
                 f"{'overlap' if v['intervals_overlap'] else 'do not overlap'}, ratio CI "
                 f"{'contains' if v['ratio_ci_contains_1'] else 'excludes'} 1; "
                 f"{'within' if v['within_slack'] else 'beyond'} the {v['slack_ms']:.1f} ms timer slack)"
                 for k, v in agreement.items()),
               f"saving per turn (after-stream - streaming): {saving:.1f} ms"]
    settings = {"scenario": scenario, "api": api, "sessions": opts.sessions, "tool_ms": durations,
                "concurrency_safe": safe, "agreement": agreement, "saving_per_turn_ms": round(saving, 3),
                "model": "after-stream: E + tools run from E; streaming: max(E, last tool finish), each "
                         "tool from max(call complete, previous finish if not concurrency-safe)",
                "summary": summary}
    return common.benchmark(f"overlap-{scenario}-{api}",
                            f"Turn latency, tools after vs while streaming: {scenario}, {api}", timing=timing,
                            settings=settings, arms=arms, ratios=ratios)
