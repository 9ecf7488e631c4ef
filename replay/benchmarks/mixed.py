"""`bench mixed`: do concurrent streams stutter while a large prompt is being tokenized?

An agent server tokenizes 50K-token prompts all day; if that CPU work runs on the server's event
loop, every stream it is serving stops while it runs. This benchmark streams at ``--concurrency``
(closed loop: each worker starts its next stream when one ends) and reports the worst inter-frame
gap of the streams, in two kinds of measurement window, alternated in one run:

- ``idle``: the streams alone;
- ``large``: the same streams while one large request (``--large-bytes`` of prompt text, a
  ``count_tokens`` body by default, or ``/tokenize`` prompt form) is in flight the whole time,
  sent again as soon as it is answered.

A window starts its streams until ``--window-s`` have passed and then lets them finish; in a
``large`` window the large requests run from before the first stream starts until the last stream
ends. A gap is the time between two consecutive content-bearing events of one stream, as the kit's
timed client (``replay.client.StreamClient``) receives them; the wait for the first event (TTFT)
is not a gap. Per window: the worst gap over all its streams (the arms' samples), the p99 gap, the
streams, and in ``large`` windows the large requests answered and their latency.

The embedded server runs the scripted engine with ``--decode-ms`` between tokens (default 5), so
an undisturbed gap is about that; ``--endpoint URL`` measures another server instead.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any

from harnesscheck.protocol import apis as api_names
from harnesscheck.replay.benchmarks import common

LARGE_ROUTES = {"count_tokens": "/v1/messages/count_tokens", "tokenize": "/tokenize"}


@dataclass(kw_only=True)
class MixedOptions(common.BenchOptions):
    concurrency: int = 16
    windows: int = 4  # per arm; the arms alternate
    window_s: float = 4.0
    stream_tokens: int = 200  # output tokens per stream (max_tokens)
    large_bytes: int = 2 * 1024 * 1024
    large_route: str = "count_tokens"
    apis: list[str] = field(default_factory=lambda: list(api_names.NAMES))
    scenario: str = "long_reasoning"
    prefill_us_per_token: float = 0.0


@dataclass
class Window:
    arm: str
    streams: int
    failed: int
    gaps_ms: list[float]
    large_ms: list[float]
    large_failed: int
    wall_s: float

    @property
    def worst_ms(self) -> float:
        return max(self.gaps_ms, default=0.0)

    def p99_ms(self) -> float | None:
        if not self.gaps_ms:
            return None
        ordered = sorted(self.gaps_ms)
        return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def large_text(n_bytes: int, *, seed: int = 0) -> str:
    """Deterministic prose of ``n_bytes`` ASCII characters (numbered sentences, no long repeats)."""
    rng = random.Random(seed)
    words = ("build", "test", "file", "path", "module", "return", "value", "error", "check", "agent", "tool",
             "session", "cache", "prefix", "token", "stream", "server", "client", "model", "result")
    parts: list[str] = []
    size = n = 0
    while size < n_bytes:
        n += 1
        line = f"Rule {n}: " + " ".join(rng.choice(words) for _ in range(rng.randint(6, 12))) + "."
        parts.append(line)
        size += len(line) + 1
    return "\n".join(parts)[:n_bytes]


def large_body(route: str, model: str, n_bytes: int) -> bytes:
    """The large request's body, serialised once (the client's cost stays out of the windows)."""
    text = large_text(n_bytes)
    if route == "count_tokens":
        body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": text}]}
    else:
        body = {"model": model, "prompt": text}
    return json.dumps(body, separators=(",", ":")).encode()


def stream_bodies(model: str, opts: MixedOptions) -> list[tuple[str, dict[str, Any]]]:
    from harnesscheck.protocol import apis

    return [(api, {**common.first_request(api, opts.scenario, model),
                   apis.get(api).MAX_TOKENS_FIELD: opts.stream_tokens}) for api in opts.apis]


async def _large_loop(session: Any, url: str, data: bytes, hdrs: dict[str, str], stop: asyncio.Event,
                      started: asyncio.Event, times_ms: list[float], failures: list[str]) -> None:
    """Keep one large request in flight until ``stop``; ``started`` is set once the first is sent."""
    while not stop.is_set():
        t0 = time.perf_counter()
        request = asyncio.ensure_future(session.post(url, data=data, headers=hdrs))
        await asyncio.sleep(0.05)  # the body is on the wire and the server is working on it
        started.set()
        async with await request as resp:
            await resp.read()
            if resp.status != 200:
                failures.append(f"HTTP {resp.status}")
                continue
        times_ms.append((time.perf_counter() - t0) * 1000)


async def _window(client: Any, session: Any, url: str, arm: str, bodies: list[tuple[str, dict[str, Any]]],
                  large: bytes | None, opts: MixedOptions, hdrs: dict[str, str]) -> Window:
    gaps: list[float] = []
    large_ms: list[float] = []
    large_failures: list[str] = []
    streams = failed = 0
    stop, started = asyncio.Event(), asyncio.Event()
    loader = None
    if large is not None:
        route = url + LARGE_ROUTES[opts.large_route]
        loader = asyncio.ensure_future(_large_loop(session, route, large, {**hdrs, "content-type": "application/json"},
                                                   stop, started, large_ms, large_failures))
        await started.wait()
    t0 = time.perf_counter()
    deadline = t0 + opts.window_s

    async def worker(k: int) -> None:
        nonlocal streams, failed
        while time.perf_counter() < deadline:
            api, body = bodies[k % len(bodies)]
            k += 1
            r = await client.post(url + common.PATHS[api], body, api=api, headers=hdrs)
            streams += 1
            if not r.ok:  # a Responses stream ending in response.incomplete (max_output_tokens) is whole
                failed += 1
                continue
            gaps.extend(r.itl_ms())

    await asyncio.gather(*(worker(k) for k in range(opts.concurrency)))
    wall = time.perf_counter() - t0
    if loader is not None:
        stop.set()
        await loader
    return Window(arm, streams, failed, gaps, large_ms, len(large_failures), wall)


async def _measure(url: str, model: str, opts: MixedOptions) -> list[Window]:
    import aiohttp

    from harnesscheck.replay.client import StreamClient

    hdrs = common.headers(opts.api_key)
    bodies = stream_bodies(model, opts)
    large = large_body(opts.large_route, model, opts.large_bytes)
    out: list[Window] = []
    timeout = aiohttp.ClientTimeout(total=600)
    async with StreamClient(limit=0) as client, aiohttp.ClientSession(timeout=timeout) as session:
        warm = dataclasses.replace(opts, window_s=0.0)
        await _window(client, session, url, "warm-up", bodies, large, warm, hdrs)  # imports, caches, connections
        for n in range(2 * opts.windows):
            arm = ("idle", "large")[n % 2] if (n // 2) % 2 == 0 else ("large", "idle")[n % 2]  # ABBA order
            out.append(await _window(client, session, url, arm, bodies, large if arm == "large" else None, opts, hdrs))
    return out


def run_mixed(opts: MixedOptions) -> dict[str, Any]:
    from harnesscheck.replay.client import run_async
    from harnesscheck.reports.schema import now_iso

    if opts.large_route not in LARGE_ROUTES:
        raise ValueError(f"--large-route: expected one of {', '.join(LARGE_ROUTES)}")
    started = now_iso()
    with common.target(opts) as target:
        windows = run_async(_measure(target.urls[0], target.model, opts))
        server = target.server_info()
    return _document(windows, opts, target.model, target.args[0] if target.args else [], server, started)


def _document(windows: list[Window], opts: MixedOptions, model: str, args: list[str], server: dict[str, Any],
              started: str) -> dict[str, Any]:
    label = {"idle": "no large prompt", "large": f"{opts.large_bytes / 2**20:.3g} MB {opts.large_route} in flight"}
    worst = {a: common.arm(label[a], [w.worst_ms for w in windows if w.arm == a], seed=n)
             for n, a in enumerate(("idle", "large"))}
    p99 = {a: common.arm(label[a], [w.p99_ms() or 0.0 for w in windows if w.arm == a], seed=10 + n)
           for n, a in enumerate(("idle", "large"))}
    rows = [{"arm": w.arm, "streams": w.streams, "failed": w.failed, "gaps": len(w.gaps_ms),
             "worst_gap_ms": round(w.worst_ms, 2), "p99_gap_ms": round(w.p99_ms() or 0.0, 2),
             "large_answered": len(w.large_ms), "large_failed": w.large_failed,
             "large_ms": [round(x, 1) for x in w.large_ms], "wall_s": round(w.wall_s, 3)} for w in windows]
    overall = {a: max((w.worst_ms for w in windows if w.arm == a), default=0.0) for a in ("idle", "large")}
    large_all = [x for w in windows for x in w.large_ms]
    diff = overall["large"] - overall["idle"]
    summary = [f"worst inter-frame gap over all windows: {overall['idle']:.1f} ms with no large prompt, "
               f"{overall['large']:.1f} ms with {label['large']} (difference {diff:+.1f} ms; the goal: within 50 ms)",
               f"median of the per-window worst gaps: {worst['idle']['median']} vs {worst['large']['median']} ms; "
               f"p99 gap: {p99['idle']['median']} vs {p99['large']['median']} ms",
               f"large requests answered: {len(large_all)}, median {sorted(large_all)[len(large_all) // 2]:.0f} ms"
               if large_all else "large requests answered: none",
               f"streams: {sum(w.streams for w in windows)}, failed {sum(w.failed for w in windows)}; "
               f"large failed {sum(w.large_failed for w in windows)}"]
    settings: dict[str, Any] = {"concurrency": opts.concurrency, "windows": opts.windows, "window_s": opts.window_s,
                                "stream_tokens": opts.stream_tokens, "apis": opts.apis, "scenario": opts.scenario,
                                "large_bytes": opts.large_bytes, "large_route": opts.large_route,
                                "server_args": args, "worst_gap_ms": {k: round(v, 2) for k, v in overall.items()},
                                "worst_gap_difference_ms": round(diff, 2), "rows": rows, "summary": summary}
    if timing_model := opts.timing_model(server):
        settings["timing_model"] = timing_model
    base = {"timing": server["timing"], "better": "lower", "unit": "ms"}
    short = {k: v for k, v in settings.items() if k not in ("rows", "summary")}
    benchmarks = [
        {**base, "name": "mixed-worst-gap", "title": "Worst inter-frame gap per window (ms)", "settings": settings,
         "arms": list(worst.values()), "ratios": [common.ratio("large/idle", worst["large"], worst["idle"], seed=21)]},
        {**base, "name": "mixed-p99-gap", "title": "p99 inter-frame gap per window (ms)", "settings": short,
         "arms": list(p99.values()), "ratios": []}]
    run_settings = {"concurrency": opts.concurrency, "large_route": opts.large_route, "large_bytes": opts.large_bytes,
                    "client": "replay.client.StreamClient (aiohttp + uvloop)", "order": "idle/large windows, ABBA"}
    return common.results_document(benchmarks=benchmarks, endpoint=opts.endpoint or "embedded", model=model,
                                   apis=opts.apis, server=server, settings=run_settings,
                                   started_at=started)
