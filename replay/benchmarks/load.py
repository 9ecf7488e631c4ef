"""`bench load`: concurrency and request-rate sweeps, with the figures `vllm bench serve` prints.

Two kinds of sweep, each a list of levels run one after another against one endpoint:

- ``concurrency``: a closed loop of C workers, each sending its next request when its last one
  ends, for ``duration_s`` (no request starts later; the level ends when the last one does);
- ``rate``: an open loop, requests sent at Poisson arrivals of rate r (exponential gaps drawn
  from ``random.Random(seed)``, ``poisson_schedule``) for ``duration_s``, whatever is in flight.

The requests come from a workload (``workload_requests``): a trace file or ``builtin:agent-coding``
(every turn's full request, the recorded answers in the history, each sent as an independent
request in trace order, cycled), ``scenario:NAME`` (a built-in scenario's first request with
``max_tokens`` output tokens, the same each time), or ``random:ISL,OSL[,RATIO]`` (vllm bench's
``random`` dataset, AIPerf's synthetic prompts: ``RANDOM_PROMPTS`` distinct prompts of about ISL
input tokens, each asking for OSL output tokens, both drawn uniformly within +-RATIO of them; the
input is the kit's own filler prose, cut at a different place for each prompt so no two share a
prefix, counted with the reference tokenizer; nothing downloaded). All go through the kit's timed
client (``replay.client.StreamClient``), each request within ``timeout_s``: one whose stream started
and then went silent for at least half of it is recorded as stalled (``Sample.stalled``), as
`check` records a stalled endpoint.

Per level, as vLLM 0.32's ``vllm/benchmarks/serve.py`` (``calculate_metrics``) computes them and
under the names it prints and writes: ``completed``, ``failed``, ``duration`` (level start to the
last answer), ``total_input_tokens`` / ``total_output_tokens`` (the endpoint's usage; output falls
back to the count of content events), ``request_throughput`` (completed / duration),
``output_throughput``, ``total_token_throughput``, ``request_goodput`` (completed requests meeting
every SLO / duration: ``ttft`` <= SLO, ``tpot`` <= SLO, ``e2el`` <= SLO, vLLM's ``--goodput``),
``max_output_tokens_per_s`` and ``max_concurrent_requests`` (one-second buckets from the first
start: the output tokens that arrived in the busiest second, each request's usage tokens spread over
its content events; the requests active at any time in the busiest second, so more than the
concurrency when requests are shorter than a second), and mean, median,
std, p50, p90, p99 of TTFT, TPOT (per request: (E2EL - TTFT) / (output tokens - 1)), ITL (every
gap between content events, pooled) and E2EL, in ms. The kit adds ``max_in_flight``: the most
requests in flight at one instant (what "Maximum request concurrency" caps).

The results document holds, per sweep, the latency benchmarks ``load-KIND-ttft``, ``-tpot`` and
``-e2el`` (one sample per request; lower is better) and the rate benchmarks ``load-KIND-throughput``
(requests/s), ``-output-throughput`` (tokens/s) and, with an SLO, ``-goodput`` (requests/s within
it), higher is better, whose samples are the level's rate in each of its time windows
(``window_rates``), so the regression gate judges a drop in throughput as it judges a rise in
latency. The TTFT benchmark's ``settings.figures`` holds every level's vLLM-named figures.

Why one module (708 lines): one benchmark, in the order it runs (options, workload, a level,
its figures, the sweep and its results document), each section marked; the figures are computed
with the samples' private fields and named as vLLM's ``calculate_metrics`` names them, which is
easiest to check side by side with that one function when they sit together.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harnesscheck.replay.benchmarks import common

KINDS = ("concurrency", "rate")
PERCENTILES = (50, 90, 99)
SLO_KEYS = {"ttft_ms": "ttft", "ttft": "ttft", "itl_ms": "tpot", "tpot_ms": "tpot", "tpot": "tpot",
            "e2e_ms": "e2el", "e2el_ms": "e2el", "e2el": "e2el"}
_METRICS = (("ttft", "TTFT", "Time to First Token"),
            ("tpot", "TPOT", "Time per Output Token (excl. 1st token)"),
            ("itl", "ITL", "Inter-token Latency"), ("e2el", "E2EL", "End-to-end Latency"))


@dataclass
class LoadOptions:
    endpoint: str | None = None
    model: str | None = None
    api_key: str | None = None
    workload: str = "scenario:long_reasoning"
    apis: list[str] = field(default_factory=lambda: ["chat"])  # scenario: and builtin: workloads, alternated
    max_tokens: int = 64  # scenario: workloads
    concurrency: list[int] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)
    duration_s: float = 10.0
    max_requests: int | None = None  # per level, at most
    seed: int = 0
    slo_ms: dict[str, float] = field(default_factory=dict)  # ttft / tpot / e2el -> ms
    warmup: int = 1
    ttft_base_ms: float = 10.0
    prefill_us_per_token: float = 0.0
    decode_ms: float = 5.0
    server_args: list[str] = field(default_factory=list)
    progress: Callable[[str, int, int], None] | None = None  # (level label, done, failed), per answer
    timeout_s: float = 120.0  # each request's deadline (a stream silent for half of it: stalled)
    record: Callable[[str, Sample], None] | None = None  # (level label, sample), per answer (--export-requests)


@dataclass
class Sample:
    """One request of a level: its start (s from the level start) and what the client measured."""

    start_s: float
    ok: bool
    error: str | None = None
    ttft_ms: float | None = None
    e2el_ms: float = 0.0
    itl_ms: list[float] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    api: str = ""
    status: int | None = None
    stalled: bool = False  # the stream started, then sent nothing for at least half the deadline

    def record(self, level: str, n: int) -> dict[str, Any]:
        """The request as one line of ``--export-requests`` (JSON lines; times in ms, start in s from
        the level's start; ``error`` redacted by the client)."""
        return {"level": level, "n": n, "api": self.api, "start_s": round(self.start_s, 6), "ok": self.ok,
                "status": self.status, "error": self.error, "stalled": self.stalled,
                "ttft_ms": None if self.ttft_ms is None else round(self.ttft_ms, 3),
                "tpot_ms": round(self.tpot_ms, 3), "e2el_ms": round(self.e2el_ms, 3),
                "itl_ms": [round(x, 3) for x in self.itl_ms],
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens}

    @property
    def tpot_ms(self) -> float:
        """(E2EL - TTFT) / (output tokens - 1); 0 for one token or none, as vLLM counts it for goodput."""
        if self.output_tokens <= 1 or self.ttft_ms is None:
            return 0.0
        return (self.e2el_ms - self.ttft_ms) / (self.output_tokens - 1)


def parse_slo(text: str) -> dict[str, float]:
    """``ttft_ms=500,itl_ms=50,e2e_ms=4000`` -> ms by metric (vLLM's ``ttft``, ``tpot``, ``e2el`` too)."""
    out: dict[str, float] = {}
    for item in filter(None, (x.strip() for x in text.replace(" ", ",").split(","))):
        key, sep, value = item.replace(":", "=").partition("=")
        if not sep or key not in SLO_KEYS:
            raise ValueError(f"SLO {item!r}: expected NAME=MS, NAME one of ttft_ms, itl_ms (= tpot), e2e_ms")
        ms = float(value)
        if ms < 0 or not math.isfinite(ms):
            raise ValueError(f"SLO {item!r}: the value must be a finite number of ms >= 0")
        out[SLO_KEYS[key]] = ms
    return out


def poisson_schedule(rate: float, duration_s: float, seed: int,
                     max_requests: int | None = None) -> list[float]:
    """Arrival times (s) of a Poisson process of ``rate`` per second in [0, duration_s): cumulative
    exponential gaps drawn from ``random.Random(seed)``, at most ``max_requests``."""
    if rate <= 0 or not math.isfinite(rate):
        raise ValueError(f"request rate must be a positive number, got {rate}")
    rng = random.Random(seed)
    out: list[float] = []
    t = rng.expovariate(rate)
    while t < duration_s and (max_requests is None or len(out) < max_requests):
        out.append(t)
        t += rng.expovariate(rate)
    return out


# -- workload ------------------------------------------------------------------------------

def workload_requests(spec: str, *, apis: list[str], model: str, max_tokens: int
                      ) -> list[tuple[str, str, dict[str, Any]]]:
    """``(api, path, body)`` of every request the workload holds, in order (for several APIs:
    their requests alternated)."""
    if not spec.startswith(("scenario:", "builtin:", "random:")):
        return _requests_of(spec, model)
    unknown = [a for a in apis if a not in common.PATHS]
    if unknown or not apis:
        raise ValueError(f"unknown API(s) {unknown}: choose from {sorted(common.PATHS)}")
    per_api = [_requests_of(spec, model, api=api, max_tokens=max_tokens) for api in apis]
    return [r for group in itertools.zip_longest(*per_api) for r in group if r is not None]


def _requests_of(spec: str, model: str, *, api: str = "chat", max_tokens: int = 64
                 ) -> list[tuple[str, str, dict[str, Any]]]:
    """One API's requests of a scenario: or builtin: workload, or a trace file's (its own APIs)."""
    if spec.startswith("scenario:"):
        from harnesscheck.protocol.apis import get as get_api
        from harnesscheck.scenarios.loader import get

        mod = get_api(api)
        body = {**mod.first(get(spec.split(":", 1)[1]), model),
                mod.MAX_TOKENS_FIELD: max(max_tokens, mod.MIN_OUTPUT_TOKENS)}
        return [(api, common.PATHS[api], body)]
    if spec.startswith("random:"):
        return _random_requests(spec, model, api)
    if spec.startswith("builtin:"):
        from harnesscheck.replay.workloads import build

        trace = build(spec.split(":", 1)[1], sessions=2, turns=5, prompt_tokens=2000, api=api, model=model)
    else:
        from harnesscheck.replay.trace import load

        trace = load(spec)
    out: list[tuple[str, str, dict[str, Any]]] = []
    for s in trace.sessions:
        answers = {t.turn: t.response if t.response is not None else [] for t in s.turns}
        for t, body in zip(s.turns, s.requests(answers), strict=True):
            if model or not body.get("model"):
                body["model"] = model
            out.append((t.api, t.path or common.PATHS[t.api], body))
    if not out:
        raise ValueError(f"{spec}: the workload has no requests")
    return out


RANDOM_PROMPTS = 256  # distinct prompts of a random: workload (cycled, as every workload's requests are)
RANDOM_SCENARIO = "long_reasoning"  # its question ends each prompt (the reference server plays its answer)
_RANDOM_STRIDE = 16  # tokens between two prompts' starts in the filler text (one prefix-cache block)
_RANDOM_MAX_TOKENS = 1_000_000


@dataclass(frozen=True)
class RandomWorkload:
    """``random:ISL,OSL[,RATIO]``: per prompt, its filler text (the system prompt), the tokens the
    reference tokenizer counts in it and the question, and the output tokens it asks for."""

    input_len: int
    output_len: int
    ratio: float
    texts: tuple[str, ...]
    input_tokens: tuple[int, ...]
    output_tokens: tuple[int, ...]

    def settings(self) -> dict[str, Any]:
        """What results.json says of it (settings.random)."""
        ins, outs = self.input_tokens, self.output_tokens
        return {"input_tokens": self.input_len, "output_tokens": self.output_len, "range_ratio": self.ratio,
                "prompts": len(self.texts), "scenario": RANDOM_SCENARIO,
                "input_tokens_counted": {"min": min(ins), "mean": round(sum(ins) / len(ins), 1), "max": max(ins)},
                "output_tokens_asked": {"min": min(outs), "mean": round(sum(outs) / len(outs), 1), "max": max(outs)},
                "counted_with": "the reference server's tokenizer (an endpoint's own counts its prompt within a "
                                "small factor; its usage is in the figures: total_input_tokens)",
                "output_note": "output lengths are limits (max tokens): a model may stop before"}


def parse_random(spec: str) -> tuple[int, int, float]:
    """``random:ISL,OSL[,RATIO]`` -> (ISL, OSL, RATIO); ValueError says what is wrong."""
    parts = [x.strip() for x in spec.split(":", 1)[1].split(",")]
    usage = f"{spec}: expected random:ISL,OSL[,RATIO] (e.g. random:1000,200 or random:1000,200,0.1)"
    if len(parts) not in (2, 3):
        raise ValueError(usage)
    try:
        isl, osl = int(parts[0]), int(parts[1])
        ratio = float(parts[2]) if len(parts) == 3 else 0.0
    except ValueError:
        raise ValueError(usage) from None
    if not (1 <= isl <= _RANDOM_MAX_TOKENS and 1 <= osl <= _RANDOM_MAX_TOKENS):
        raise ValueError(f"{spec}: ISL and OSL are token counts from 1 to {_RANDOM_MAX_TOKENS}")
    if not (0 <= ratio < 1):  # also refuses NaN
        raise ValueError(f"{spec}: the range ratio is a share from 0 (every prompt alike) to below 1")
    return isl, osl, ratio


@functools.lru_cache(maxsize=4)
def random_workload(spec: str, seed: int = 0) -> RandomWorkload:
    """The prompts of ``random:ISL,OSL[,RATIO]`` (see the module docstring), the same for a spec and
    seed on every run and machine."""
    from harnesscheck.reference_server.tokenizer import load
    from harnesscheck.scenarios.loader import get

    isl, osl, ratio = parse_random(spec)
    rng = random.Random(seed)
    question = get(RANDOM_SCENARIO).turns[0].user or ""
    tok = load()
    asked = tok.count(question)

    def drawn(n: int) -> int:
        return max(1, round(rng.uniform(n * (1 - ratio), n * (1 + ratio))))

    lengths = [max(1, drawn(isl) - asked) for _ in range(RANDOM_PROMPTS)]
    outputs = tuple(drawn(osl) for _ in range(RANDOM_PROMPTS))
    ids = tok.encode(common.filler_text(max(lengths) + _RANDOM_STRIDE * RANDOM_PROMPTS, seed=seed))
    texts = tuple(tok.decode(ids[i * _RANDOM_STRIDE:i * _RANDOM_STRIDE + n]) for i, n in enumerate(lengths))
    return RandomWorkload(isl, osl, ratio, texts, tuple(tok.count(t) + asked for t in texts), outputs)


def _random_requests(spec: str, model: str, api: str) -> list[tuple[str, str, dict[str, Any]]]:
    """One API's requests of a random: workload: the filler as the system prompt, the scenario's
    question as the user's, the drawn output length as the API's output limit."""
    from harnesscheck.protocol.apis import get as get_api
    from harnesscheck.scenarios.loader import get

    work = random_workload(spec)
    mod = get_api(api)
    scenario = get(RANDOM_SCENARIO)
    out = []
    for text, limit in zip(work.texts, work.output_tokens, strict=True):
        body = {**mod.first(dataclasses.replace(scenario, system=text), model),
                mod.MAX_TOKENS_FIELD: max(limit, mod.MIN_OUTPUT_TOKENS)}
        out.append((api, common.PATHS[api], body))
    return out


# -- running a level -----------------------------------------------------------------------

def _tokens(usage: dict[str, Any], *names: str) -> int | None:
    for n in names:
        if isinstance(usage.get(n), int):
            return int(usage[n])
    return None


async def _one(client: Any, url: str, request: tuple[str, str, dict[str, Any]], hdrs: dict[str, str],
               level_start: float) -> Sample:
    api, path, body = request
    start = time.perf_counter() - level_start
    r = await client.post(url + path, body, api=api, headers=hdrs)
    out = _tokens(r.usage, "output_tokens", "completion_tokens")
    error = r.error
    if error is None and r.ttft_ns is None:
        error = "no content event"
    stalled = _stalled(r, float(getattr(client, "timeout", 0.0) or 0.0))
    if stalled:
        error = stalled
    ok = error is None and r.status is not None and 200 <= r.status < 300
    return Sample(start_s=start, ok=ok, error=error, ttft_ms=None if r.ttft_ns is None else r.ttft_ns / 1e6,
                  e2el_ms=(r.end_ns or 0) / 1e6, itl_ms=r.itl_ms(),
                  input_tokens=_tokens(r.usage, "input_tokens", "prompt_tokens") or 0,
                  output_tokens=out if out is not None else len(r.token_ns), api=api, status=r.status,
                  stalled=bool(stalled))


def _stalled(r: Any, deadline_s: float) -> str:
    """Why a request that ran out of time counts as stalled ('' when it does not): its stream had
    started (events came) and then nothing came for at least half the deadline (a stream that keeps
    sending but too slowly is only timed out)."""
    if r.error_kind != "timeout" or not r.events or deadline_s <= 0:
        return ""
    last_ns = max(r.token_ns[-1] if r.token_ns else 0, r.headers_ns or 0)
    silent_s = ((r.end_ns or 0) - last_ns) / 1e9
    if silent_s < deadline_s / 2:
        return ""
    return (f"stalled: {r.events} event(s) in {last_ns / 1e9:.1f} s, then nothing for {silent_s:.1f} s until "
            f"the {deadline_s:g} s deadline (--timeout)")


async def run_level(client: Any, url: str, pool: list[tuple[str, str, dict[str, Any]]],
                    hdrs: dict[str, str], *, kind: str, level: float, duration_s: float, seed: int,
                    max_requests: int | None = None,
                    on_sample: Callable[[Sample], None] | None = None) -> tuple[list[Sample], float]:
    """Run one level; its samples and its duration (s, from the start to the last answer)."""
    samples: list[Sample] = []
    start = time.perf_counter()

    async def send(i: int) -> None:
        s = await _one(client, url, pool[i % len(pool)], hdrs, start)
        samples.append(s)
        if on_sample is not None:
            on_sample(s)

    if kind == "concurrency":
        sent = 0

        async def worker() -> None:
            nonlocal sent
            while time.perf_counter() - start < duration_s and (max_requests is None or sent < max_requests):
                sent += 1
                await send(sent - 1)

        await asyncio.gather(*(worker() for _ in range(int(level))))
    else:
        tasks = []
        try:
            for i, at in enumerate(poisson_schedule(level, duration_s, seed, max_requests)):
                wait = start + at - time.perf_counter()
                if wait > 0:
                    await asyncio.sleep(wait)
                tasks.append(asyncio.ensure_future(send(i)))
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:  # stopped: the requests in flight end with it, none left running
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
    return samples, time.perf_counter() - start


# -- figures -------------------------------------------------------------------------------

def _stats(name: str, values: list[float]) -> dict[str, float]:
    xs = values or [0.0]  # vLLM reports 0 for an empty list (np.mean(ttfts or 0))
    out = {f"mean_{name}_ms": float(np.mean(xs)), f"median_{name}_ms": float(np.median(xs)),
           f"std_{name}_ms": float(np.std(xs))}
    for p in PERCENTILES:
        out[f"p{p}_{name}_ms"] = float(np.percentile(xs, p))
    return out


def _token_times(s: Sample) -> tuple[list[float], float]:
    """When a request's content events arrived (s from the level start) and the output tokens each
    stands for: the request's usage tokens spread evenly over its events (vLLM streams one token per
    event, so its count of ITL entries is a token count; an endpoint that sends several tokens per
    event would otherwise show a peak rate below its mean)."""
    t = s.start_s + (s.ttft_ms or 0) / 1e3
    times = [t]
    for gap in s.itl_ms:
        t += gap / 1e3
        times.append(t)
    return times, (s.output_tokens / len(times) if s.output_tokens else 1.0)


def _peaks(ok: list[Sample]) -> tuple[float, int]:
    """vLLM's peak output tokens per second and peak concurrent requests, over one-second buckets
    from the first start (``_token_times``; a request is active in every bucket its span touches)."""
    if not ok:
        return 0.0, 0
    t0 = min(s.start_s for s in ok)
    end = max(s.start_s + s.e2el_ms / 1e3 for s in ok)
    n = int(math.ceil(end - t0)) + 1
    tokens = np.zeros(n)
    active = np.zeros(n)
    for s in ok:
        times, weight = _token_times(s)
        for x in times:
            b = int(x - t0)
            if 0 <= b < n:
                tokens[b] += weight
        for b in range(int(s.start_s - t0), int(s.start_s + s.e2el_ms / 1e3 - t0) + 1):
            active[b] += 1
    return float(tokens.max()), int(active.max())


WINDOWS = (4, 60)  # a level's rate samples: one window per second of it, at least 4 (the gate's minimum)


def window_rates(samples: list[Sample], span_s: float, slo_ms: dict[str, float] | None = None
                 ) -> dict[str, list[float]]:
    """A level's rates per time window: ``throughput`` (requests completed / window length),
    ``output_throughput`` (output tokens that arrived / window length) and, with an SLO, ``goodput``
    (completed requests within it / window length). The windows split [0, span_s) (the time the
    level sent requests) into one a second, at least ``WINDOWS[0]`` and at most ``WINDOWS[1]``; a
    request counts in the window where it ended. A failed request counts nowhere, as it does not in
    vLLM's throughput."""
    if span_s <= 0:
        return {"throughput": [], "output_throughput": [], **({"goodput": []} if slo_ms else {})}
    n = min(max(int(span_s), WINDOWS[0]), WINDOWS[1])
    width = span_s / n
    done, good, tokens = np.zeros(n), np.zeros(n), np.zeros(n)
    for s in samples:
        if not s.ok:
            continue
        end = int((s.start_s + s.e2el_ms / 1e3) / width)
        if 0 <= end < n:
            done[end] += 1
            if slo_ms and _within(s, slo_ms):
                good[end] += 1
        times, weight = _token_times(s)
        for x in times:
            b = int(x / width)
            if 0 <= b < n:
                tokens[b] += weight
    out = {"throughput": list(done / width), "output_throughput": list(tokens / width)}
    if slo_ms:
        out["goodput"] = list(good / width)
    return out


def _within(s: Sample, slo_ms: dict[str, float]) -> bool:
    got = {"ttft": s.ttft_ms or 0.0, "tpot": s.tpot_ms, "e2el": s.e2el_ms}
    return all(got[k] <= v for k, v in slo_ms.items())


def _max_in_flight(samples: list[Sample]) -> int:
    """The most requests in flight at one instant (the kit's own figure; an end before a start)."""
    edges = sorted([(s.start_s, 1) for s in samples] + [(s.start_s + s.e2el_ms / 1e3, -1) for s in samples])
    peak = now = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    return peak


def level_figures(samples: list[Sample], duration_s: float, slo_ms: dict[str, float]) -> dict[str, Any]:
    """One level's figures under vLLM's names (``vllm bench serve --save-result`` keys)."""
    ok = [s for s in samples if s.ok]
    total_out = sum(s.output_tokens for s in ok)
    total_in = sum(s.input_tokens for s in ok)
    good = sum(_within(s, slo_ms) for s in ok) if slo_ms else 0
    peak_tokens, peak_active = _peaks(ok)
    fig: dict[str, Any] = {
        "duration": duration_s, "completed": len(ok), "failed": len(samples) - len(ok),
        "total_input_tokens": total_in, "total_output_tokens": total_out,
        "request_throughput": len(ok) / duration_s, "request_goodput": good / duration_s if slo_ms else None,
        "output_throughput": total_out / duration_s,
        "total_token_throughput": (total_in + total_out) / duration_s,
        "max_output_tokens_per_s": peak_tokens, "max_concurrent_requests": peak_active,
        "max_in_flight": _max_in_flight(samples), "stalled": sum(s.stalled for s in samples),
    }
    fig.update(_stats("ttft", [s.ttft_ms for s in ok if s.ttft_ms is not None]))
    fig.update(_stats("tpot", [s.tpot_ms for s in ok if s.output_tokens > 1]))
    fig.update(_stats("itl", [g for s in ok for g in s.itl_ms]))
    fig.update(_stats("e2el", [s.e2el_ms for s in ok]))
    fig["errors"] = sorted({s.error for s in samples if not s.ok and s.error})[:5]
    return fig


def level_label(kind: str, level: float) -> str:
    return f"c={int(level)}" if kind == "concurrency" else f"rate={level:g}"


#: What the figures whose names read alike mean (printed under each level and in `bench load --help`).
LABELS_EXPLAINED = (
    "Maximum request concurrency: the level's cap, requests the kit keeps in flight (--concurrency).",
    "Peak requests in flight: the most requests in flight at one instant (the kit's; at most the cap).",
    "Peak concurrent requests: vLLM's figure, the requests active at any time within the busiest "
    "one-second bucket; it exceeds the cap as requests end and others start within that second (at concurrency "
    "1, requests of 250 ms make it 4 or 5; a note under the figure says so).",
    "Peak output token throughput: output tokens that arrived in the busiest one-second bucket "
    "(vLLM's; each request's usage tokens spread over its streamed events).",
)


def peak_note(fig: dict[str, Any]) -> list[str]:
    """Under the two peaks, when vLLM's bucketed count exceeds the requests ever in flight at once
    (at concurrency 1, requests of a few hundred ms make it 4 or 10): why, in words."""
    bucketed, at_once = fig["max_concurrent_requests"], fig.get("max_in_flight", 0)
    if bucketed <= at_once:
        return []
    were = "was" if at_once == 1 else "were"
    return [f"  (Peak concurrent requests is vLLM's figure: the requests active at any time within the busiest "
            f"one-second bucket, {bucketed} here as requests ended and others started within that second; at most "
            f"{at_once} {were} in flight at one instant: Peak requests in flight.)"]


def success_problem(figures: dict[str, list[dict[str, Any]]], min_share: float) -> str | None:
    """The one line `bench load` ends with when a level's successful requests are fewer than
    ``min_share`` of its requests (its figures are no benchmark of a working endpoint: vllm bench
    would print them all the same), or None. ``figures``: per sweep kind, its levels' figures."""
    worst: tuple[float, dict[str, Any]] | None = None
    for levels in figures.values():
        for f in levels:
            sent = f["completed"] + f["failed"]
            share = f["completed"] / sent if sent else 0.0
            if share < min_share and (worst is None or share < worst[0]):
                worst = (share, f)
    if worst is None:
        return None
    share, f = worst
    sent = f["completed"] + f["failed"]
    why = f"; {f['stalled']} stalled" if f.get("stalled") else ""
    first = f"; first error: {f['errors'][0][:200]}" if f.get("errors") else ""
    return (f"only {f['completed']} of {sent} requests succeeded at {f['label']} ({share:.0%}), below "
            f"--min-success {min_share:g}{why}{first}")


def format_level(kind: str, level: float, fig: dict[str, Any]) -> str:
    """The level's block, laid out and named as ``vllm bench serve`` prints its result (the kit's
    ``Peak requests in flight`` added beside vLLM's bucketed ``Peak concurrent requests``)."""
    def row(name: str, value: Any, fmt: str = "{:<10.2f}") -> str:
        return "{:<40} ".format(name) + fmt.format(value)

    lines = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="),
             row("Successful requests:", fig["completed"], "{:<10}"),
             row("Failed requests:", fig["failed"], "{:<10}")]
    if fig.get("stalled"):
        lines.append(row("Stalled requests:", fig["stalled"], "{:<10}"))
    if kind == "concurrency":
        lines.append(row("Maximum request concurrency:", int(level), "{:<10}"))
    else:
        lines.append(row("Request rate configured (RPS):", level))
    lines += [row("Benchmark duration (s):", fig["duration"]),
              row("Total input tokens:", fig["total_input_tokens"], "{:<10}"),
              row("Total generated tokens:", fig["total_output_tokens"], "{:<10}"),
              row("Request throughput (req/s):", fig["request_throughput"])]
    if fig["request_goodput"] is not None:
        lines.append(row("Request goodput (req/s):", fig["request_goodput"]))
    lines += [row("Output token throughput (tok/s):", fig["output_throughput"]),
              row("Peak output token throughput (tok/s):", fig["max_output_tokens_per_s"]),
              row("Peak concurrent requests:", fig["max_concurrent_requests"], "{:<10}"),
              row("Peak requests in flight:", fig.get("max_in_flight", 0), "{:<10}")]
    lines += peak_note(fig)
    lines.append(row("Total token throughput (tok/s):", fig["total_token_throughput"]))
    for key, name, header in _METRICS:
        lines.append("{s:{c}^{n}}".format(s=header, n=50, c="-"))
        lines.append(row(f"Mean {name} (ms):", fig[f"mean_{key}_ms"]))
        lines.append(row(f"Median {name} (ms):", fig[f"median_{key}_ms"]))
        lines += [row(f"P{p} {name} (ms):", fig[f"p{p}_{key}_ms"]) for p in PERCENTILES]
    lines.append("=" * 50)
    for error in fig["errors"]:
        lines.append(f"  error: {error[:200]}")
    return "\n".join(lines)


# -- the benchmark -------------------------------------------------------------------------

async def _sweeps(url: str, pool: list[tuple[str, str, dict[str, Any]]], opts: LoadOptions
                  ) -> dict[str, list[tuple[float, list[Sample], float]]]:
    from harnesscheck.replay.client import StreamClient

    hdrs = common.headers(opts.api_key)
    out: dict[str, list[tuple[float, list[Sample], float]]] = {}
    async with StreamClient(limit=0, timeout=opts.timeout_s, read_timeout=opts.timeout_s) as client:
        for i in range(opts.warmup):  # connections and caches warm, answers discarded
            await _one(client, url, pool[i % len(pool)], hdrs, time.perf_counter())
        plan = [("concurrency", float(c)) for c in opts.concurrency]
        plan += [("rate", float(r)) for r in opts.rates]
        for n, (kind, level) in enumerate(plan):
            label = level_label(kind, level)
            counts = [0, 0]

            def tick(s: Sample, label: str = label, counts: list[int] = counts) -> None:
                if opts.record is not None:
                    opts.record(label, s)
                counts[0 if s.ok else 1] += 1
                if opts.progress is not None:
                    opts.progress(label, counts[0], counts[1])

            try:
                samples, dur = await run_level(client, url, pool, hdrs, kind=kind, level=level,
                                               duration_s=opts.duration_s, seed=opts.seed + n,
                                               max_requests=opts.max_requests, on_sample=tick)
            except asyncio.CancelledError:  # stopped (run_async: SIGINT/SIGTERM): the levels finished are
                break  # the result (handed up in Interrupted.measured), the level cut short is left out
            out.setdefault(kind, []).append((level, samples, dur))
    return out


def run_load(opts: LoadOptions) -> dict[str, Any]:
    """Run the sweeps; the results document (``common.write_outputs`` writes it). Per sweep kind
    three benchmarks, ``load-KIND-ttft``, ``-tpot``, ``-e2el`` (arms: the levels, samples: one per
    request), whose ``settings.figures`` hold every level's vLLM-named figures."""
    from harnesscheck.reports.schema import now_iso
    from harnesscheck.protocol.wire.server_info import server_info

    if not opts.concurrency and not opts.rates:
        raise ValueError("give --concurrency and/or --request-rate levels")
    if any(c < 1 for c in opts.concurrency):
        raise ValueError("concurrency levels must be >= 1")
    if any(not (r > 0 and math.isfinite(r)) for r in opts.rates):
        raise ValueError("request rates must be positive numbers (requests per second)")
    started = now_iso()
    if opts.endpoint:
        url = opts.endpoint.rstrip("/")
        model = common.resolve_model(url, opts.model, opts.api_key)
        pool = workload_requests(opts.workload, apis=opts.apis, model=model, max_tokens=opts.max_tokens)
        results, stop = common.run_stoppable(_sweeps(url, pool, opts))
        server = server_info(url, model, kind="external", api_key=opts.api_key)
        endpoint = url
    else:
        from harnesscheck.reference_server.config import DEFAULT_MODEL_IDS

        model = opts.model or DEFAULT_MODEL_IDS[0]
        pool = workload_requests(opts.workload, apis=opts.apis, model=model, max_tokens=opts.max_tokens)
        args = [*common.timing_args(opts.ttft_base_ms, opts.prefill_us_per_token, opts.decode_ms),
                *opts.server_args]
        with common.embedded_servers(args) as (srv,):
            results, stop = common.run_stoppable(_sweeps(srv.url, pool, opts))
            server = server_info(srv.url, model, kind="embedded")
        endpoint = "embedded"
    apis = sorted({api for api, _, _ in pool})
    settings: dict[str, Any] = {"workload": opts.workload, "apis": apis, "requests_in_workload": len(pool),
                                "duration_s": opts.duration_s, "max_requests": opts.max_requests,
                                "seed": opts.seed,
                                "warmup_requests": opts.warmup, "slo_ms": dict(opts.slo_ms),
                                "percentiles": list(PERCENTILES)}
    if opts.workload.startswith("scenario:"):
        settings["max_tokens"] = opts.max_tokens
    if opts.workload.startswith("random:"):
        settings["random"] = random_workload(opts.workload).settings()
    settings["timeout_s"] = opts.timeout_s
    if not opts.endpoint:
        settings["timing_model"] = {"ttft_base_ms": opts.ttft_base_ms, "decode_ms": opts.decode_ms,
                                    "prefill_us_per_token": opts.prefill_us_per_token}
    benchmarks = sweep_benchmarks(results, settings, timing=server["timing"], slo_ms=opts.slo_ms,
                                  duration_s=opts.duration_s)
    return common.stopped(common.results_document(benchmarks=benchmarks, endpoint=endpoint, model=model,
                                                  apis=apis, server=server, settings=settings, started_at=started),
                          stop)  # stopped: the finished levels, marked interrupted


_LATENCIES = (("ttft", "TTFT"), ("tpot", "TPOT (per request: (E2EL - TTFT) / (tokens - 1))"),
              ("e2el", "end-to-end latency"))
_RATES = (("throughput", "request throughput", "req/s"), ("output-throughput", "output token throughput", "tok/s"),
          ("goodput", "request goodput (within the SLO)", "req/s"))


def sweep_benchmarks(results: dict[str, list[tuple[float, list[Sample], float]]], settings: dict[str, Any], *,
                     timing: str, slo_ms: dict[str, float], duration_s: float) -> list[dict[str, Any]]:
    """The benchmarks of the sweeps run (``{kind: [(level, samples, duration), ...]}``), in the
    order the module docstring gives: latencies (a sample per request) then rates (a sample per
    time window of the level's sending time, ``window_rates``)."""
    benchmarks: list[dict[str, Any]] = []
    for kind, levels in results.items():
        figures = [{"level": level, "label": level_label(kind, level),
                    **level_figures(samples, dur, slo_ms)} for level, samples, dur in levels]
        sweep = {**settings, "sweep": kind, "levels": [f["level"] for f in figures]}
        for key, title in _LATENCIES:
            arms = []
            for n, (level, samples, _) in enumerate(levels):
                ok = [s for s in samples if s.ok]
                xs = {"ttft": [s.ttft_ms for s in ok if s.ttft_ms is not None],
                      "tpot": [s.tpot_ms for s in ok if s.output_tokens > 1],
                      "e2el": [s.e2el_ms for s in ok]}[key]
                arms.append(common.arm(level_label(kind, level), xs, seed=n))
            benchmarks.append({"name": f"load-{kind}-{key}", "title": f"{title} per {kind} level",
                               "unit": "ms", "timing": timing, "better": "lower",
                               "settings": {**sweep, "figures": figures} if key == "ttft" else sweep,
                               "arms": arms, "ratios": []})
        windows = [window_rates(samples, min(dur, duration_s), slo_ms) for _, samples, dur in levels]
        for key, title, unit in _RATES:
            field_name = key.replace("-", "_")
            if field_name not in windows[0]:
                continue  # goodput without an SLO
            arms = [common.arm(level_label(kind, level), w[field_name], seed=n)
                    for n, ((level, _, _), w) in enumerate(zip(levels, windows))]
            benchmarks.append({"name": f"load-{kind}-{key}", "title": f"{title.capitalize()} per {kind} level "
                               "(one sample per time window)", "unit": unit, "timing": timing, "better": "higher",
                               "settings": sweep, "arms": arms, "ratios": []})
    return benchmarks
